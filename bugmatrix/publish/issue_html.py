"""An issue body's Markdown as HTML for the site: the subset :mod:`~bugmatrix.publish.issue_body` writes, read as data.

:class:`Block` and :class:`Span` values are rendered by the autoescaping ``_markdown.html.j2``: only what the body
writer emits becomes markup; anything else is text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bugmatrix.publish import render

__all__ = ["Block", "Span", "parse_markdown", "render_markdown"]

_FENCE = re.compile(r"^(`{3,})(.*)$")
_HEADING = re.compile(r"^(#{1,6}) +(.*)$")
_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_SAFE_URL = re.compile(r"https?://[^\s\"'<>]+|[^\s\"'<>:]+", re.IGNORECASE)  # http(s), or relative (no scheme at all)
_MARKER = re.compile(r"^<!-- .* -->$")
_ROW = re.compile(r"(?<!\\)\|")
_RULE = re.compile(r"\|?[\s:|-]+\|?")
_SUMMARY = re.compile(r"<details><summary>(.*)</summary>")
#: Lines that are a block of their own, with nothing in it.
_BARE = {"---": "hr", "<details>": "details", "</details>": "/details"}
_SUMMARY_CODE = re.compile(r"<code>(.*?)</code>")  # issue_body writes a cell id there, html.escape-d


@dataclass(frozen=True)
class Span:
    """A run of inline text: ``text``, ``bold``, ``code``, or ``link`` (``href``, and its ``label`` of text and bold spans)."""

    kind: str
    text: str = ""
    href: str = ""
    label: tuple[Span, ...] = ()


Line = tuple[Span, ...]


@dataclass(frozen=True)
class Block:
    """One block of the body: ``p``, ``h`` (``level``), ``pre`` (``text``), ``hr``, ``ul`` (``items``), ``table`` (``items`` is the
    header, ``rows`` the rows), ``small``, and ``details`` / ``/details`` (the opening, with its summary in ``spans``, and the close)."""

    kind: str
    spans: Line = ()
    level: int = 0
    text: str = ""
    items: tuple[Line, ...] = ()
    rows: tuple[tuple[Line, ...], ...] = ()


def _split(
    text: str, pattern: re.Pattern[str], outside: Callable[[str], Sequence[Span]], inside: Callable[[re.Match[str]], Sequence[Span]]
) -> list[Span]:
    out, last = [], 0
    for match in pattern.finditer(text):
        out += [*outside(text[last : match.start()]), *inside(match)]
        last = match.end()
    return [*out, *outside(text[last:])]


def _bold(text: str) -> list[Span]:
    return _split(text, _BOLD, lambda plain: [Span("text", plain)], lambda match: [Span("bold", match.group(1))])


def _link(match: re.Match[str]) -> list[Span]:
    label, target = match.group(1), match.group(2)
    return [Span("link", href=target, label=tuple(_bold(label)))] if _SAFE_URL.fullmatch(target) else _bold(match.group(0))


def _inline(text: str) -> Line:
    """Code spans first (their content stays literal), then links and bold in the rest."""
    spans = _split(
        text,
        _CODE,
        lambda plain: _split(plain, _LINK, _bold, _link),
        lambda match: [Span("code", match.group(2).strip() or match.group(2))],
    )
    return tuple(s for s in spans if s.text or s.kind == "link")


def _summary(text: str) -> Line:
    """A ``<summary>``: the writer's ``<code>`` (un-escaped once, escaped again by the template), the rest as Markdown."""
    return tuple(_split(text, _SUMMARY_CODE, _inline, lambda match: [Span("code", html.unescape(match.group(1)))]))


def _cells(line: str) -> tuple[Line, ...]:
    inner = line.strip().removeprefix("|")
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return tuple(_inline(c.strip().replace("\\|", "|")) for c in _ROW.split(inner))


def parse_markdown(text: str, top: int = 1) -> list[Block]:
    """The body's blocks; ``top`` is the highest heading level they may use (under a page's ``<h1>``, ``###`` becomes ``<h2>``)."""
    lines = text.splitlines()
    levels = sorted({len(m.group(1)) for line in lines if (m := _HEADING.match(line.strip()))})
    shift = {level: min(6, top + i) for i, level in enumerate(levels)}
    out: list[Block] = []
    paragraph: list[Span] = []

    def flush() -> None:
        if paragraph:
            out.append(Block("p", tuple(paragraph[:-1])))  # the lines, each followed by a space: the last one dropped
            paragraph.clear()

    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        fence, heading, summary = _FENCE.match(stripped), _HEADING.match(stripped), _SUMMARY.fullmatch(stripped)
        table = stripped.startswith("|") and i + 1 < len(lines) and _RULE.fullmatch(lines[i + 1].strip())
        sub = stripped.startswith("<sub>") and stripped.endswith("</sub>")
        listed, bare = stripped.startswith("- "), _BARE.get(stripped)
        if stripped and not (fence or heading or summary or table or sub or listed or bare or _MARKER.match(stripped)):
            paragraph += [*_inline(stripped), Span("text", " ")]
            i += 1
            continue
        flush()
        if fence:
            closing, body = fence.group(1), []
            i += 1
            while i < len(lines) and lines[i].strip() != closing:
                body.append(lines[i])
                i += 1
            out.append(Block("pre", text="\n".join(body)))
        elif heading:
            out.append(Block("h", _inline(heading.group(2)), level=shift[len(heading.group(1))]))
        elif bare:
            out.append(Block(bare))
        elif summary:
            out.append(Block("details", _summary(summary.group(1))))
        elif sub:
            out.append(Block("small", _inline(stripped[5:-6])))
        elif listed:
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(_inline(lines[i].strip()[2:]))
                i += 1
            out.append(Block("ul", items=tuple(items)))
            continue
        elif table:
            head, rows = _cells(stripped), []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append(Block("table", items=head, rows=tuple(rows)))
            continue
        i += 1  # a blank line or the finding's marker (for the tracker, not the reader)
    flush()
    return out


def render_markdown(text: str, top: int = 1) -> str:
    """The body as an HTML fragment: the subset above, every other character as text (``_markdown.html.j2``)."""
    return render("_markdown.html.j2", blocks=parse_markdown(text, top)).strip()
