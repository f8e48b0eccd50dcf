"""The site's history pages: ``nights.html`` (a row per night, a trend), the issue bodies as HTML, the README badge.

Everything here is read from what each night's report already wrote into the
site (``<night>/compat.json`` and ``<night>/issues/*.md``): publishing never
recomputes a result. Every string from a report is escaped (``html.escape``),
as the report escapes it.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import bugmatrix.report as report_package
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, read_text, write_json_atomic, write_text_atomic
from bugmatrix.publish.issue_html import render_markdown
from bugmatrix.publish.markers import parse_markers

__all__ = ["BADGE_LABEL", "NightSummary", "badge", "badge_svg", "issue_page", "nights_page", "summarize", "write_history_pages"]

BADGE_LABEL = "bugmatrix nightly"
#: The trend shows at most this many nights (the history's span).
TREND_NIGHTS = 90
#: Status colours, the report's own: each has at least 4.5:1 contrast with the page's background and with white text.
GREEN, RED, GREY = "#2e7d32", "#b3261e", "#595959"
AMBER = "#8a5a00"  # reproduced, in the trend (a fill, with its legend in words)
#: What the night's page adds to the report's stylesheet: numbers right-aligned, zero quiet, a count loud.
_OWN_CSS = f"""
  table.nights td {{ text-align: right; }} table.nights td.l, table.nights th {{ text-align: left; }}
  table.nights {{ font-size: 13px; background: #fff; }} table.nights td.i {{ white-space: normal; min-width: 14rem; }}
  .q {{ color: {GREY}; }} .bad {{ color: {RED}; font-weight: 600; }}
  .trend {{ max-width: 100%; overflow-x: auto; }} .trend svg {{ display: block; }}
  .legend {{ font-size: .85rem; color: {GREY}; margin: .2rem 0 .6rem; }}
  .legend i {{ display: inline-block; width: .8em; height: .8em; margin: 0 .25em 0 .8em; vertical-align: -.05em; }}
  article.body {{ background: #fff; border: 1px solid #ddd; padding: .2rem 1rem .8rem; max-width: 60rem; }}
  article.body th, article.body td {{ white-space: normal; }}
  article.body pre {{ white-space: pre-wrap; word-break: break-word; background: #f4f4f4; padding: .5rem; }}
  @media (max-width: 700px) {{ body {{ margin: 0 .5rem 1rem; }} table.nights {{ font-size: 12px; }} }}
"""


def _report_css() -> str:
    """The report's own stylesheet (its template's ``<style>``), so the site looks like the report it links."""
    template = Path(report_package.__file__).parent / "templates" / "index.html.j2"
    found = re.search(r"<style>(.*?)</style>", template.read_text(encoding="utf-8"), re.S)
    return found.group(1) if found else ""


def _css() -> str:
    return _report_css() + _OWN_CSS


@dataclass(frozen=True)
class NightSummary:
    """What one night's report says, counted: the columns of ``nights.html``."""

    date: str
    profile: str
    commit: str
    path: str
    regressions: int = 0
    new_failure_modes: int = 0
    unexpected_fixes: int = 0
    flaky: int = 0
    missing: int = 0
    not_installing: int = 0
    new_releases: int = 0
    reused: int = 0
    ran: int = 0
    reproduced: int = 0
    fixed: int = 0
    other: int = 0
    issues: tuple[tuple[str, str], ...] = ()  # (file stem, title)
    readable: bool = True

    @property
    def findings(self) -> int:
        return self.regressions + self.new_failure_modes + self.unexpected_fixes + self.flaky + self.missing + self.not_installing


def _issues(directory: Path) -> tuple[tuple[str, str], ...]:
    """The night's issue bodies (``<stem>.md``), each with the title and key its marker carries."""
    found = []
    for path in sorted(directory.glob("*.md")) if directory.is_dir() else ():
        markers = parse_markers(read_text(path, "issue body"))
        found.append((path.stem, markers[0].title if markers and markers[0].title else path.stem, markers[0].key if markers else ""))
    return tuple(found)


def summarize(site: Path, date: str, profile: str, commit: str, path: str) -> NightSummary:
    """Count one published night from its own ``compat.json``; a night whose report cannot be read says so."""
    found = _issues(site / path / "issues")
    issues = tuple((stem, title) for stem, title, _ in found)
    flaky = sum(1 for _, _, key in found if key.startswith("flaky:"))
    try:
        data = read_json(site / path / "compat.json", "compat document")
        verdicts: dict[str, int] = {}
        outcomes = {"reproduced": 0, "fixed": 0, "other": 0}
        for per_cell in (data.get("results") or {}).values():
            for entry in per_cell.values():
                verdict = str(entry.get("verdict") or "")
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
                outcome = str(entry.get("outcome") or "")
                outcomes[outcome if outcome in outcomes else "other"] += 1
        cells = [c for c in data.get("cells") or [] if isinstance(c, dict)]
        status = [str((c.get("install") or {}).get("status", "ok")) for c in cells]
        reused = sum(1 for c in cells if c.get("reused_from"))
        return NightSummary(
            date,
            profile,
            commit,
            path,
            regressions=verdicts.get("regression", 0),
            new_failure_modes=verdicts.get("new-failure-mode", 0),
            unexpected_fixes=verdicts.get("unexpected-fix", 0),
            flaky=flaky,
            missing=status.count("missing"),
            not_installing=status.count("failed"),
            new_releases=len({(r.get("axis"), r.get("version")) for r in data.get("releases") or []}),
            reused=reused,
            ran=len(cells) - reused - status.count("missing"),
            reproduced=outcomes["reproduced"],
            fixed=outcomes["fixed"],
            other=outcomes["other"],
            issues=issues,
        )
    except (BugmatrixError, ValueError, AttributeError, TypeError):
        return NightSummary(date, profile, commit, path, flaky=flaky, issues=issues, readable=False)


def _count(n: int) -> str:
    return '<span class="q" aria-label="none">—</span>' if n == 0 else f'<span class="bad">{n}</span>'


def _trend(nights: list[NightSummary]) -> str:
    """Stacked bars, oldest left: fixed / reproduced / other (variant, cell) pairs per night; a night with findings marked ▲.

    Inline SVG with a text legend and a title per night (hover): no script, no
    library, readable in greyscale through the legend's order (bottom to top).
    """
    shown = list(reversed(nights[:TREND_NIGHTS]))
    if not shown:
        return ""
    top = max(n.reproduced + n.fixed + n.other for n in shown) or 1
    w, h = max(8, min(36, 720 // len(shown))), 80
    parts = []
    for i, n in enumerate(shown):
        y = float(h)
        bars = []
        for value, colour in ((n.fixed, GREEN), (n.reproduced, AMBER), (n.other, GREY)):
            height = value * h / top
            y -= height
            bars.append(f'<rect x="{i * w}" y="{y:.1f}" width="{w - 2}" height="{height:.1f}" fill="{colour}"/>')
        mark = (
            f'<text x="{i * w + (w - 2) / 2:.1f}" y="{h + 13}" font-size="11" text-anchor="middle" fill="{RED}">▲</text>'
            if n.findings
            else ""
        )
        title = f"{n.date}: {n.fixed} fixed, {n.reproduced} reproduced, {n.other} other" + (
            f"; {n.findings} finding(s)" if n.findings else ""
        )
        parts.append(f"<g><title>{html.escape(title)}</title>{''.join(bars)}{mark}</g>")
    first, last = html.escape(shown[0].date), html.escape(shown[-1].date)
    label = f"{len(shown)} night(s), {first} to {last}: (variant, cell) pairs per night by outcome; ▲ marks a night with findings"
    legend = (
        f'<p class="legend">{first} → {last}, oldest left:<i style="background:{GREEN}"></i>fixed'
        f'<i style="background:{AMBER}"></i>reproduced<i style="background:{GREY}"></i>other (different, skipped, not installed …)'
        f' <span style="color:{RED}">▲</span> a night with findings</p>'
    )
    width = len(shown) * w
    return (
        f'<div class="trend"><svg role="img" aria-label="{html.escape(label)}" width="{width}" height="{h + 16}" '
        f'viewBox="0 0 {width} {h + 16}"><title>{html.escape(label)}</title>{"".join(parts)}</svg></div>{legend}'
    )


_COLUMNS = (
    "night",
    "commit",
    "regressions",
    "new failure modes",
    "unexpected fixes",
    "flaky",
    "missing",
    "not installing",
    "new releases",
    "reused / run",
    "issues",
)


def _head(title: str) -> list[str]:
    return [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_css()}</style></head><body>",
    ]


def nights_page(nights: list[NightSummary]) -> str:
    """Every night kept, newest first per profile, with its counts and a trend."""
    out = _head("bugmatrix: every night")
    out.append(
        "<main><header><h1>bugmatrix: every night</h1>"
        '<p class="meta">One row per night, newest first, counted from that night\'s own report; — is none. '
        "Reused / run: cells whose results were reused from an earlier night / cells run that night.</p></header>"
    )
    for profile in dict.fromkeys(n.profile for n in nights):
        own = [n for n in nights if n.profile == profile]
        out.append(f'<h2 id="{html.escape(profile)}">{html.escape(profile)}</h2>{_trend(own)}')
        out.append(
            '<div class="scroll"><table class="nights"><thead><tr>'
            + "".join(f'<th scope="col">{c}</th>' for c in _COLUMNS)
            + "</tr></thead><tbody>"
        )
        for n in own:
            href = html.escape(urllib.parse.quote(n.path))
            issues = "<br>".join(
                f'<a href="{href}/issues/{html.escape(urllib.parse.quote(stem))}.html">{html.escape(title)}</a>' for stem, title in n.issues
            ) or _count(0)
            counts = (n.regressions, n.new_failure_modes, n.unexpected_fixes, n.flaky, n.missing, n.not_installing, n.new_releases)
            cells = [_count(x) for x in counts] if n.readable else ['<span class="q">unreadable</span>'] * len(counts)
            out.append(
                f'<tr><th scope="row"><a href="{href}/index.html">{html.escape(n.date)}</a></th>'
                f'<td class="l"><code>{html.escape(n.commit)}</code></td>'
                + "".join(f"<td>{c}</td>" for c in cells)
                + f'<td>{n.reused} / {n.ran}</td><td class="l i">{issues}</td></tr>'
            )
        out.append("</tbody></table></div>")
    return "\n".join(out) + "\n</main></body></html>\n"


def issue_page(title: str, markdown: str, source: str) -> str:
    """An issue body as a page: its Markdown rendered by :func:`~bugmatrix.publish.issue_html.render_markdown` (everything escaped)."""
    return (
        "\n".join(_head(title)) + f'<header><h1>{html.escape(title)}</h1><p class="meta"><a href="../index.html">the night\'s report</a> · '
        f'<a href="{html.escape(source)}">the Markdown as filed</a></p></header><main><article class="body">{render_markdown(markdown, top=2)}</article></main></body></html>\n'
    )


def badge(night: NightSummary | None) -> dict[str, object]:
    """The shields.io endpoint document for the newest night: its regressions, green at zero."""
    if night is None or not night.readable:
        return {"schemaVersion": 1, "label": BADGE_LABEL, "message": "no night", "color": "lightgrey"}
    n = night.regressions
    return {"schemaVersion": 1, "label": BADGE_LABEL, "message": f"{n} regression{'' if n == 1 else 's'}", "color": "red" if n else "green"}


def badge_svg(document: dict[str, object]) -> str:
    """A self-contained flat badge (no fonts or images fetched): label on grey, message on its colour."""
    label, message = html.escape(str(document["label"])), html.escape(str(document["message"]))
    colour = {"green": GREEN, "red": RED}.get(str(document.get("color")), GREY)
    lw, mw = 7 * len(str(document["label"])) + 10, 7 * len(str(document["message"])) + 10
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + mw}" height="20" role="img" aria-label="{label}: {message}">'
        f"<title>{label}: {message}</title>"
        f'<rect width="{lw}" height="20" fill="#444d56"/><rect x="{lw}" width="{mw}" height="20" fill="{colour}"/>'
        f'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle">'
        f'<text x="{lw / 2}" y="14">{label}</text><text x="{lw + mw / 2}" y="14">{message}</text></g></svg>\n'
    )


def write_history_pages(site: Path, nights: list[tuple[str, str, str, str]], root_profile: str) -> list[NightSummary]:
    """Write ``nights.html``, ``badge.json``/``badge.svg`` and each night's ``issues/*.html`` into ``site``."""
    summaries = [summarize(site, *n) for n in nights]
    for s in summaries:
        for stem, title in s.issues:
            source = site / s.path / "issues" / f"{stem}.md"
            write_text_atomic(source.with_suffix(".html"), issue_page(title, read_text(source, "issue body"), source.name))
    write_text_atomic(site / "nights.html", nights_page(summaries))
    document = badge(next((s for s in summaries if s.profile == root_profile), None))
    write_json_atomic(site / "badge.json", document)
    write_text_atomic(site / "badge.svg", badge_svg(document))
    return summaries
