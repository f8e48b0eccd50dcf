"""An issue body's Markdown as HTML for the site: the small subset :mod:`~bugmatrix.publish.issue_body` writes, everything escaped.

The bodies carry run text (exception messages, logs, package names) that
anyone upstream can influence, so this renderer trusts nothing: every
character of the source is HTML-escaped first, and only the constructs the
body writer emits are turned back into markup - headings, ``-`` lists, pipe
tables, fenced blocks, ``---``, code spans, ``**bold**``, links whose target is
http(s) or a relative path, and the literal lines ``<details>``,
``<summary>…</summary>``, ``</details>`` and ``<sub>…</sub>``. Anything else
(an ``<img>``, a ``javascript:`` link, a raw ``<script>``) is shown as text.
A full Markdown library is not needed for this subset and would widen what a
hostile message can reach.
"""

from __future__ import annotations

import html
import re

__all__ = ["render_markdown"]

_FENCE = re.compile(r"^(`{3,})(.*)$")
_HEADING = re.compile(r"^(#{1,6}) +(.*)$")
_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_SAFE_URL = re.compile(r"https?://[^\s\"'<>]+|[^\s\"'<>:]+", re.IGNORECASE)  # http(s), or relative (no scheme at all)
_MARKER = re.compile(r"^<!-- .* -->$")
_ROW = re.compile(r"(?<!\\)\|")


def _inline(text: str) -> str:
    """Code spans first (their content stays literal), then links and bold in the rest; the source is escaped throughout."""
    out, last = [], 0
    for match in _CODE.finditer(text):
        out.append(_markup(text[last : match.start()]))
        out.append(f"<code>{html.escape(match.group(2).strip() if match.group(2).strip() else match.group(2))}</code>")
        last = match.end()
    out.append(_markup(text[last:]))
    return "".join(out)


def _markup(text: str) -> str:
    out, last = [], 0
    for match in _LINK.finditer(text):
        out.append(_bold(text[last : match.start()]))
        label, target = match.group(1), match.group(2)
        if _SAFE_URL.fullmatch(target):
            out.append(f'<a href="{html.escape(target)}">{_bold(label)}</a>')
        else:
            out.append(_bold(match.group(0)))
        last = match.end()
    out.append(_bold(text[last:]))
    return "".join(out)


def _bold(text: str) -> str:
    escaped = html.escape(text)
    return _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", escaped)


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in _ROW.split(inner)]


def render_markdown(text: str, top: int = 1) -> str:
    """The body as HTML (a fragment): the subset above, every other character as text.

    ``top`` is the highest heading level the fragment may use: under a page's
    ``<h1>`` the body's first level (``###`` in the bodies) becomes ``<h2>``, so
    headings go down one level at a time.
    """
    levels = sorted({len(m.group(1)) for line in text.splitlines() if (m := _HEADING.match(line.strip()))})
    shift = {level: min(6, top + i) for i, level in enumerate(levels)}
    lines = text.splitlines()
    out: list[str] = []
    paragraph: list[str] = []
    i = 0

    def flush() -> None:
        if paragraph:
            out.append("<p>" + " ".join(_inline(p) for p in paragraph) + "</p>")
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(stripped)
        if fence:
            flush()
            closing, body = fence.group(1), []
            i += 1
            while i < len(lines) and lines[i].strip() != closing:
                body.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(body))}</code></pre>")
        elif not stripped or _MARKER.match(stripped):
            flush()
        elif heading := _HEADING.match(stripped):
            flush()
            level = shift[len(heading.group(1))]
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif stripped == "---":
            flush()
            out.append("<hr>")
        elif stripped in ("<details>", "</details>"):
            flush()
            out.append(stripped)
        elif stripped.startswith("<details><summary>") and stripped.endswith("</summary>"):
            flush()
            out.append(f"<details><summary>{_inline(stripped[len('<details><summary>') : -len('</summary>')])}</summary>")
        elif stripped.startswith("<sub>") and stripped.endswith("</sub>"):
            flush()
            out.append(f"<p><small>{_inline(stripped[5:-6])}</small></p>")
        elif stripped.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif stripped.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|?[\s:|-]+\|?", lines[i + 1].strip()):
            flush()
            head = "".join(f'<th scope="col">{_inline(c)}</th>' for c in _cells(stripped))
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')
            continue
        else:
            paragraph.append(stripped)
        i += 1
    flush()
    return "\n".join(out)
