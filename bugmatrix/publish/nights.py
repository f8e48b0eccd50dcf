"""The site's history pages: ``nights.html`` (the variant × night grid, the findings trend, a row per night), issue pages, the badge.

Read from what each night's report wrote into the site (``<night>/compat.json``, ``<night>/issues/*.md``), never
recomputed. An outcome that differs from the night before is a flip.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.documents.compat import InstallStatus
from bugmatrix.documents.nights import SiteNight
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_text, write_json_atomic, write_text_atomic
from bugmatrix.publish import read_compat, render
from bugmatrix.publish.issue_html import parse_markdown
from bugmatrix.publish.markers import parse_markers
from bugmatrix.report.outputs import PAGES
from bugmatrix.report.render_html import SITE_SLOT

__all__ = ["GRID_NIGHTS", "Grid", "Issue", "NightSummary", "badge", "summarize", "trend", "variant_grid", "write_history_pages"]

#: The trend shows at most this many nights (the history's span).
TREND_NIGHTS = 90
#: Nights the grid shows (the history's flaky window is 30 nights too).
GRID_NIGHTS = 30
#: Status colours, the report's own: each has at least 4.5:1 contrast with the page's background and with white text.
GREEN, RED, GREY, AMBER, PURPLE = "#2e7d32", "#b3261e", "#595959", "#8a5a00", "#5b2a86"
#: The trend's findings, bottom to top: (what it counts, its colour).
TREND_KINDS = (("regressions", RED), ("new failure modes", AMBER), ("missing", GREY), ("not installing", PURPLE))
#: The counted columns of the table of nights; all but the last are findings.
COUNTED = ("regressions", "new failure modes", "unexpected fixes", "flaky", "missing", "not installing", "new releases")
_ONE = {"regressions": "regression", "new failure modes": "new failure mode", "unexpected fixes": "unexpected fix"}
#: The badge's colours: shields.io's names, drawn by badge.svg in the site's own.
BADGE_COLOURS = {"green": GREEN, "red": RED, "lightgrey": GREY}
#: Outcomes of a variant that did not run: shown only where nothing else was recorded that night.
_NOT_RUN = (Outcome.SKIPPED.value, Outcome.INSTALL_FAILED.value)


@dataclass(frozen=True)
class Issue:
    """One issue body of a night (``issues/<stem>.md``): its title and key (from its marker), its attached files and its text."""

    stem: str
    title: str
    key: str
    files: tuple[str, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class NightSummary:
    """What one night's report says, counted: the columns of ``nights.html`` (:data:`COUNTED`), and each variant's outcomes."""

    date: str
    profile: str
    commit: str
    path: str
    counts: Mapping[str, int] = field(default_factory=dict)
    reused: int = 0
    ran: int = 0
    cells: int = 0
    issues: tuple[Issue, ...] = ()
    readable: bool = True
    outcomes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # variant -> cell -> outcome
    flagged: frozenset[str] = frozenset()  # variants with a flagged verdict or an issue tonight

    @property
    def findings(self) -> int:
        return sum(self.counts.get(name, 0) for name in COUNTED[:-1])

    @property
    def finding_text(self) -> str:
        """``3 findings (1 regression, 2 missing)``: the count the badge shows, with the columns it adds up."""
        said = ", ".join(f"{n} {_ONE.get(name, name) if n == 1 else name}" for name in COUNTED[:-1] if (n := self.counts.get(name, 0)))
        return f"{self.findings} finding{'' if self.findings == 1 else 's'}" + (f" ({said})" if said else "")

    @property
    def trend_counts(self) -> tuple[int, ...]:
        """The trend's findings (:data:`TREND_KINDS`), in its order."""
        return tuple(self.counts.get(name, 0) for name, _ in TREND_KINDS)


def summarize(site: Path, night: SiteNight) -> NightSummary:
    """Count one published night from its own ``compat.json``; a night whose report cannot be read says so."""
    directory, found = site / night.path / "issues", []  # its issue bodies, each with its attached files
    for path in sorted(directory.glob("*.md")) if directory.is_dir() else ():
        text = read_text(path, "issue body")
        markers = parse_markers(text)
        title = markers[0].title if markers and markers[0].title else path.stem
        attached = directory / path.stem
        files = sorted(p.relative_to(attached).as_posix() for p in attached.rglob("*") if p.is_file()) if attached.is_dir() else []
        found.append(Issue(path.stem, title, markers[0].key if markers else "", tuple(files), text))
    issues = tuple(found)
    flaky = sum(1 for issue in issues if issue.key.startswith("flaky:"))
    subjects = frozenset(issue.key.partition(":")[2] for issue in issues)
    known = (night.date, night.profile, night.commit, night.path)
    try:
        compat = read_compat(site / night.path / "compat.json", "")
    except BugmatrixError:
        return NightSummary(*known, {"flaky": flaky}, issues=issues, readable=False, flagged=subjects)
    verdicts = Counter(e.verdict for per_cell in compat.results.values() for e in per_cell.values())
    outcomes = {v: {c: e.outcome.value for c, e in per_cell.items()} for v, per_cell in compat.results.items()}
    flagged = subjects | {v for v, per_cell in compat.results.items() if any(e.flagged for e in per_cell.values())}
    status = Counter(c.install.status for c in compat.cells)
    reused = sum(1 for c in compat.cells if c.reused)
    found = (verdicts[Verdict.REGRESSION], verdicts[Verdict.NEW_FAILURE_MODE], verdicts[Verdict.UNEXPECTED_FIX], flaky)
    releases = len({(r.axis, r.version) for r in compat.releases})
    counts = dict(zip(COUNTED, (*found, status[InstallStatus.MISSING], status[InstallStatus.FAILED], releases), strict=True))
    ran = len(compat.cells) - reused - status[InstallStatus.MISSING]
    return NightSummary(*known, counts, reused, ran, len(compat.cells), issues, outcomes=outcomes, flagged=flagged)


@dataclass(frozen=True)
class GridEntry:
    """One variant on one night of the nights page's grid: its symbols, hover title and marks."""

    symbols: str
    title: str
    flip: bool = False
    finding: bool = False


@dataclass(frozen=True)
class GridRow:
    """One variant's row of the grid, across the shown nights."""

    variant: str
    entries: tuple[GridEntry, ...]  # oldest night first, one per column
    since: str  # the night of its newest flip in the window ("" when none)
    finding: bool  # a finding on any shown night


@dataclass(frozen=True)
class Grid:
    """The nights page's grid: one column a night, one row a variant that ran somewhere."""

    nights: tuple[NightSummary, ...]  # the columns, oldest first
    rows: tuple[GridRow, ...]
    idle: tuple[str, ...]  # ran nowhere (skipped or not installed) on every shown night: one folded line


def _entry(night: NightSummary, variant: str, flipped: list[str]) -> GridEntry:
    per_cell = night.outcomes.get(variant)
    if not per_cell:
        return GridEntry("", f"{night.date}: not in this night's report")
    counts = Counter(Outcome(value) for value in per_cell.values())  # decoded by the compat model: every value is an Outcome
    ran = [o for o in Outcome if o in counts and o.value not in _NOT_RUN] or [o for o in Outcome if o in counts]
    said = ", ".join(f"{o.label} in {counts[o]}" for o in Outcome if o in counts)
    title = f"{night.date}: {said} (cells)" + (f"; flipped: {', '.join(flipped)}" if flipped else "")
    finding = variant in night.flagged
    return GridEntry("".join(o.symbol for o in ran), title + ("; a finding" if finding else ""), bool(flipped), finding)


def _flips(before: Mapping[str, str] | None, after: Mapping[str, str] | None) -> list[str]:
    """Per cell whose outcome differs between two nights (a missing result is a gap, not a flip)."""
    if not before or not after:
        return []
    gap = Outcome.MISSING.value
    return [
        f"{cell} {before[cell]} → {now}"
        for cell, now in after.items()
        if cell in before and gap not in (before[cell], now) and before[cell] != now
    ]


def variant_grid(nights: Sequence[NightSummary], limit: int = GRID_NIGHTS) -> Grid:
    """The grid of ``nights`` (newest first): the newest ``limit`` as columns, oldest left; rows with a finding, then flips, first."""
    columns = list(reversed(nights[:limit]))
    before = nights[limit] if len(nights) > limit else None  # the night before the first column: a flip on it shows
    variants = list(dict.fromkeys(v for night in reversed(columns) for v in night.outcomes))
    rows, idle = [], []
    for variant in variants:
        values = [o for night in columns for o in (night.outcomes.get(variant) or {}).values()]
        if all(v in _NOT_RUN for v in values) and not any(variant in night.flagged for night in columns):
            idle.append(variant)
            continue
        entries, since, previous = [], "", before.outcomes.get(variant) if before else None
        for night in columns:
            now = night.outcomes.get(variant)
            flipped = _flips(previous, now)
            since = night.date if flipped else since
            entries.append(_entry(night, variant, flipped))
            previous = now or previous
        rows.append(GridRow(variant, tuple(entries), since, any(e.finding for e in entries)))
    newest_finding = {r.variant: max((n.date for n, e in zip(columns, r.entries, strict=True) if e.finding), default="") for r in rows}
    order = {v: i for i, v in enumerate(variants)}
    rows.sort(
        key=lambda r: (not r.finding, _newest_first(newest_finding[r.variant]), not r.since, _newest_first(r.since), order[r.variant])
    )
    return Grid(tuple(columns), tuple(rows), tuple(idle))


def _newest_first(date: str) -> int:
    return -dt.date.fromisoformat(date).toordinal() if date else 0


def trend(nights: list[NightSummary], height: int = 80) -> dict[str, object]:
    """The findings trend's geometry, oldest left: per night a stack of :data:`TREND_KINDS`, each per cell (no false collapse)."""
    shown = list(reversed(nights[:TREND_NIGHTS]))
    rate = {n.date: [count / max(n.cells, 1) for count in n.trend_counts] for n in shown}
    top = max((sum(r) for r in rate.values()), default=0) or 1
    width = max(8, min(36, 720 // max(len(shown), 1)))
    bars = []
    for i, n in enumerate(shown):
        y, rects = float(height), []
        for value, (_, colour) in zip(rate[n.date], TREND_KINDS, strict=True):
            if value:
                rects.append({"y": round(y - value * height / top, 1), "height": round(value * height / top, 1), "fill": colour})
                y -= value * height / top
        said = ", ".join(f"{count} {name}" for count, (name, _) in zip(n.trend_counts, TREND_KINDS, strict=True))
        title = f"{n.date} ({n.cells} cell(s)): {said}" if n.readable else f"{n.date}: its report cannot be read"
        bars.append(
            {"x": i * width, "rects": rects, "clean": n.readable and not any(n.trend_counts), "readable": n.readable, "title": title}
        )
    first, last = (shown[0].date, shown[-1].date) if shown else ("", "")
    return {"bars": bars, "width": width, "height": height, "total": len(shown) * width, "first": first, "last": last}


def badge(night: NightSummary | None, profile: str) -> dict[str, object]:
    """The shields.io endpoint document: the profile, its newest night and that night's findings (green at none)."""
    if night is None or not night.readable:
        message, colour = ("no night" if night is None else f"{night.date} unreadable"), "lightgrey"
    else:
        n = night.findings
        message, colour = f"{night.date} · {n} finding{'' if n == 1 else 's'}", "red" if n else "green"
    return {"schemaVersion": 1, "label": f"bugmatrix {profile}", "message": message, "color": colour}


def _up(path: str) -> str:
    return "../" * len(Path(path).parts)


def _fill_slot(page: Path, night: NightSummary, to_root: str, to_night: str) -> None:
    """Put the site's links into a report page's slot (an older report's page without one is left as it is)."""
    text = page.read_text(encoding="utf-8")
    head, opened, rest = text.partition(SITE_SLOT[0])
    _, closed, tail = rest.partition(SITE_SLOT[1])
    if opened and closed:
        links = render("night_links.html.j2", night=night, to_root=to_root, to_night=to_night).strip()
        write_text_atomic(page, head + opened + links + closed + tail)


def write_history_pages(site: Path, nights: list[SiteNight], root_profile: str) -> list[NightSummary]:
    """Write each profile's root pages (its newest night's), ``nights.html``, ``badge.json``/``.svg``, each night's
    ``issues/*.html``, and the site's links into every report page."""
    summaries = [summarize(site, n) for n in nights]
    newest: dict[str, NightSummary] = {}
    for s in summaries:  # newest first: the first of each profile is its root page
        newest.setdefault(s.profile, s)
    for s in summaries:
        up = _up(s.path)
        for issue in s.issues:  # each body's text as read once by summarize
            page = render("issue.html.j2", issue=issue, night=s, blocks=parse_markdown(issue.text, top=2), to_root=up + "../")
            write_text_atomic(site / s.path / "issues" / f"{issue.stem}.html", page)
        _fill_slot(site / s.path / "index.html", s, up, "")
    for profile, s in newest.items():  # the site holds only what build_site wrote: its own pages, copied
        where = "" if profile == root_profile else profile
        for name in PAGES:
            shutil.copyfile(site / s.path / name, site / where / name)
        _fill_slot(site / where / "index.html", s, _up(where), f"{Path(s.path).name}/")
    document = badge(newest.get(root_profile), root_profile)
    profiles = [
        {"name": p, "root": p == root_profile, "nights": own, "grid": variant_grid(own), "trend": trend(own)}
        for p in sorted(newest, key=lambda p: p != root_profile)  # the root profile first, then by their newest night
        for own in [[n for n in summaries if n.profile == p]]
    ]
    context = {"legend": [o.label for o in Outcome], "counted": COUNTED, "kinds": TREND_KINDS, "green": GREEN, "grey": GREY}
    page = render("nights.html.j2", profiles=profiles, badge=document, **context)
    write_text_atomic(site / "nights.html", page)
    if root_profile not in newest:  # no night of the root profile yet (another profile ran first): the root lists the nights
        write_text_atomic(site / "index.html", page)
    write_json_atomic(site / "badge.json", document)
    write_text_atomic(site / "badge.svg", render("badge.svg.j2", badge=document, colour=BADGE_COLOURS[str(document["color"])]))
    return summaries
