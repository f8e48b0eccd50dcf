"""The site's history pages: ``nights.html`` (the variant × night grid, the findings trend, a row per night), issue pages, the badge.

Everything here is read from what each night's report already wrote into the
site (``<night>/compat.json`` and ``<night>/issues/*.md``): publishing never
recomputes a result. The pages come from the templates of
:mod:`~bugmatrix.publish.render` (autoescaped); this module only counts and
places. Each night's report page leaves one slot for the site
(:data:`~bugmatrix.report.render_html.SITE_SLOT`): the site fills it with where
a maintainer goes next (the night's issue pages, their files, every night), with
links relative to where that copy of the page sits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, read_text, write_json_atomic, write_text_atomic
from bugmatrix.publish.grid import NightOutcomes, variant_grid
from bugmatrix.publish.issue_html import parse_markdown
from bugmatrix.publish.markers import parse_markers
from bugmatrix.publish.render import render
from bugmatrix.report.render_html import SITE_SLOT

__all__ = ["Issue", "NightSummary", "badge", "summarize", "trend", "write_history_pages"]

#: The trend shows at most this many nights (the history's span).
TREND_NIGHTS = 90
#: Status colours, the report's own: each has at least 4.5:1 contrast with the page's background and with white text.
GREEN, RED, GREY, AMBER, PURPLE = "#2e7d32", "#b3261e", "#595959", "#8a5a00", "#5b2a86"
#: The trend's findings, bottom to top: (what it counts, its colour).
TREND_KINDS = (("regressions", RED), ("new failure modes", AMBER), ("missing", GREY), ("not installing", PURPLE))
#: The columns of the table of nights.
COLUMNS = (
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
#: What :attr:`NightSummary.findings` adds up, in the words of the table of nights (one, many).
_FINDING_WORDS = (
    ("regression", "regressions"),
    ("new failure mode", "new failure modes"),
    ("unexpected fix", "unexpected fixes"),
    ("flaky", "flaky"),
    ("missing", "missing"),
    ("not installing", "not installing"),
)
#: The badge's colours: shields.io's names, drawn by badge.svg in the site's own.
BADGE_COLOURS = {"green": GREEN, "red": RED, "lightgrey": GREY}


@dataclass(frozen=True)
class Issue:
    """One issue body of a night (``issues/<stem>.md``): its title and key (from its marker), and its attached files."""

    stem: str
    title: str
    key: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class NightSummary:
    """What one night's report says, counted: the columns of ``nights.html``, and each variant's outcomes for the grid."""

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
    cells: int = 0
    issues: tuple[Issue, ...] = ()
    readable: bool = True
    outcomes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # variant -> cell -> outcome
    flagged: frozenset[str] = frozenset()  # variants with a flagged verdict or an issue tonight

    @property
    def findings(self) -> int:
        return self.regressions + self.new_failure_modes + self.unexpected_fixes + self.flaky + self.missing + self.not_installing

    @property
    def finding_text(self) -> str:
        """``3 findings (1 regression, 2 missing)``: the count the badge shows, with the columns of the table of nights it adds up."""
        counts = (self.regressions, self.new_failure_modes, self.unexpected_fixes, self.flaky, self.missing, self.not_installing)
        said = ", ".join(f"{n} {one if n == 1 else many}" for (one, many), n in zip(_FINDING_WORDS, counts, strict=True) if n)
        return f"{self.findings} finding{'' if self.findings == 1 else 's'}" + (f" ({said})" if said else "")

    @property
    def trend_counts(self) -> tuple[int, ...]:
        """The trend's findings (:data:`TREND_KINDS`), in its order."""
        return (self.regressions, self.new_failure_modes, self.missing, self.not_installing)


def _issues(directory: Path) -> tuple[Issue, ...]:
    """The night's issue bodies (``<stem>.md``), each with the title and key its marker carries and the files beside it."""
    found = []
    for path in sorted(directory.glob("*.md")) if directory.is_dir() else ():
        markers = parse_markers(read_text(path, "issue body"))
        title = markers[0].title if markers and markers[0].title else path.stem
        attached = directory / path.stem
        files = sorted(p.relative_to(attached).as_posix() for p in attached.rglob("*") if p.is_file()) if attached.is_dir() else []
        found.append(Issue(path.stem, title, markers[0].key if markers else "", tuple(files)))
    return tuple(found)


def summarize(site: Path, date: str, profile: str, commit: str, path: str) -> NightSummary:
    """Count one published night from its own ``compat.json``; a night whose report cannot be read says so."""
    issues = _issues(site / path / "issues")
    flaky = sum(1 for issue in issues if issue.key.startswith("flaky:"))
    subjects = frozenset(issue.key.partition(":")[2] for issue in issues)
    try:
        data = read_json(site / path / "compat.json", "compat document")
        verdicts: dict[str, int] = {}
        outcomes: dict[str, dict[str, str]] = {}
        flagged = set(subjects)
        for variant, per_cell in (data.get("results") or {}).items():
            for cell, entry in per_cell.items():
                verdict = str(entry.get("verdict") or "")
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
                outcomes.setdefault(str(variant), {})[str(cell)] = str(entry.get("outcome") or "")
                if verdict in ("regression", "new-failure-mode", "unexpected-fix"):
                    flagged.add(str(variant))
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
            cells=len(cells),
            issues=issues,
            outcomes=outcomes,
            flagged=frozenset(flagged),
        )
    except (BugmatrixError, ValueError, AttributeError, TypeError):
        return NightSummary(date, profile, commit, path, flaky=flaky, issues=issues, readable=False, flagged=subjects)


def trend(nights: list[NightSummary], height: int = 80) -> dict[str, object]:
    """The findings trend's geometry, oldest left: per night a stack of :data:`TREND_KINDS`, each divided by the night's cells.

    Per cell, so a night of 2 cells drawn beside nights of 5 does not look
    like a collapse; the tallest night fills the height. A night without
    findings gets a short green mark, one whose report cannot be read a "?".
    """
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
    label = (
        f"{len(shown)} night(s), {first} to {last}: findings per cell per night (regressions, new failure modes, missing, not installing)"
    )
    return {"bars": bars, "width": width, "height": height, "total": len(shown) * width, "label": label, "first": first, "last": last}


def badge(night: NightSummary | None, profile: str) -> dict[str, object]:
    """The shields.io endpoint document: the profile, its newest night and that night's findings (green at none)."""
    label = f"bugmatrix {profile}"
    if night is None or not night.readable:
        return {
            "schemaVersion": 1,
            "label": label,
            "message": "no night" if night is None else f"{night.date} unreadable",
            "color": "lightgrey",
        }
    n = night.findings
    return {
        "schemaVersion": 1,
        "label": label,
        "message": f"{night.date} · {n} finding{'' if n == 1 else 's'}",
        "color": "red" if n else "green",
    }


def _badge_svg(document: dict[str, object]) -> str:
    """A self-contained flat badge (no fonts or images fetched): label on grey, message on its colour."""
    label, message = str(document["label"]), str(document["message"])
    widths = (7 * len(label) + 10, 7 * len(message) + 10)
    return render("badge.svg.j2", label=label, message=message, widths=widths, colour=BADGE_COLOURS[str(document["color"])])


def _up(path: str) -> str:
    """From a page in ``path`` (a night's directory, or "" for the root) to the site's root."""
    return "../" * len(Path(path).parts)


def _fill_slot(page: Path, night: NightSummary, to_root: str, to_night: str) -> None:
    """Put the site's links into a report page's slot (a page without one, from an older report, is left as it is)."""
    text = page.read_text(encoding="utf-8")
    head, opened, rest = text.partition(SITE_SLOT[0])
    _, closed, tail = rest.partition(SITE_SLOT[1])
    if opened and closed:
        links = render("night_links.html.j2", night=night, to_root=to_root, to_night=to_night).strip()
        write_text_atomic(page, head + opened + links + closed + tail)


def write_history_pages(site: Path, nights: list[tuple[str, str, str, str]], root_profile: str) -> list[NightSummary]:
    """Write ``nights.html``, ``badge.json``/``.svg``, each night's ``issues/*.html``, and the site's links into every report page."""
    summaries = [summarize(site, *n) for n in nights]
    for s in summaries:
        up = _up(s.path)
        for issue in s.issues:
            source = site / s.path / "issues" / f"{issue.stem}.md"
            blocks = parse_markdown(read_text(source, "issue body"), top=2)
            write_text_atomic(source.with_suffix(".html"), render("issue.html.j2", issue=issue, night=s, blocks=blocks, to_root=up + "../"))
        _fill_slot(site / s.path / "index.html", s, up, "")
    newest: dict[str, NightSummary] = {}
    for s in summaries:  # newest first: the first of each profile is its root page
        newest.setdefault(s.profile, s)
    for profile, s in newest.items():
        where = "" if profile == root_profile else profile
        _fill_slot(site / where / "index.html", s, _up(where), f"{Path(s.path).name}/")
    document = badge(newest.get(root_profile), root_profile)
    profiles = [
        {"name": p, "root": p == root_profile, "nights": own, "grid": variant_grid([_outcomes(n) for n in own]), "trend": trend(own)}
        for p in sorted(newest, key=lambda p: p != root_profile)  # the root profile first, then by their newest night
        for own in [[n for n in summaries if n.profile == p]]
    ]
    page = render(
        "nights.html.j2",
        profiles=profiles,
        badge=document,
        legend=[o.label for o in Outcome],
        columns=COLUMNS,
        kinds=TREND_KINDS,
        green=GREEN,
        grey=GREY,
    )
    write_text_atomic(site / "nights.html", page)
    write_json_atomic(site / "badge.json", document)
    write_text_atomic(site / "badge.svg", _badge_svg(document))
    return summaries


def _outcomes(night: NightSummary) -> NightOutcomes:
    return NightOutcomes(night.date, night.path, night.outcomes, night.flagged)
