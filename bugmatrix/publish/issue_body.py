"""An issue body per finding: one more view over the night's report (:class:`~bugmatrix.report.night.NightReport`).

Anything a run wrote goes into a code span or fenced block longer than its longest backtick run, so no ``@user``,
``#123`` or markup in a message acts on GitHub.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from bugmatrix.publish import render
from bugmatrix.publish.markers import MARKER, finding_marker
from bugmatrix.publish.site import night_path
from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.history import WINDOW, outcome_runs
from bugmatrix.report.model import REUSED
from bugmatrix.report.new_releases import one_line_reason
from bugmatrix.report.night import CELL_FINDINGS, Finding, NightReport, distributions_of
from bugmatrix.tools.repro import LOCKED

__all__ = ["BODY_LIMIT", "INLINE", "Attachment", "Links", "fenced", "issue_title", "literal", "render_issue"]

#: GitHub refuses bodies over 65,536 characters; a comment repeating a body adds a line or two.
BODY_LIMIT = 60_000
MESSAGE_CHARS = 300
_TITLES = {
    ChangeKind.MISSING: "results missing in cell {subject}",
    ChangeKind.REGRESSION: "regression: {subject} reproduces where it was fixed",
    ChangeKind.RELEASE_DOES_NOT_INSTALL: "new release {subject} does not install",
    ChangeKind.NO_LONGER_INSTALLS: "cell {subject} no longer installs",
    ChangeKind.FLAKY: "flaky: {subject} changes back and forth",
    ChangeKind.NEW_FAILURE_MODE: "new failure mode: {subject} fails another way",
}


#: Files an issue body shows inline (when short enough), in this order; the lock is always a link.
INLINE = ("requirements.txt", "repro.py")


@dataclass(frozen=True)
class Attachment:
    """Files written for one finding (``directory`` under the bodies' directory) and how to use them."""

    directory: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # name -> text, for the files a body may inline
    locked: bool = False  # requirements.lock.txt is among the files written
    python: str = ""
    command: str = ""  # the export command that wrote them, to run again by hand
    run: str = ""  # what runs the reproduction once installed
    note: str = ""  # why something is absent


@dataclass(frozen=True)
class Links:
    """Where the night is published: the night's page, the latest page, its attachments, and the workflow run."""

    night: str = ""
    latest: str = ""
    files: str = ""  # the base every attachment directory is served under ("" when nowhere)
    run: str = ""

    @classmethod
    def for_site(cls, site_url: str, profile: str, date: str, run_url: str = "") -> Links:
        """The links of a night on the Pages site (:mod:`~bugmatrix.publish.site`'s layout); none without a site."""
        if not site_url:
            return cls(run=run_url)
        base = site_url.rstrip("/") + "/"
        path = night_path(profile, date)
        latest = base + (path.rsplit("/", 1)[0] + "/" if "/" in path else "")
        return cls(f"{base}{path}/index.html", latest, f"{base}{path}/issues/", run_url)


def literal(text: object, limit: int = MESSAGE_CHARS, *, table: bool = False) -> str:
    """One line of run text as a code span (mentions, references and markup stay text); "—" when empty."""
    line = " ".join(str(text).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    if not line:
        return "—"
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    span = f"{ticks}{pad}{line}{pad}{ticks}"
    return span.replace("|", "\\|") if table else span


def fenced(text: str, language: str = "") -> str:
    """A fenced block longer than any backtick run in ``text``, so nothing inside can end it."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    body = text.rstrip("\n")
    return f"{fence}{language}\n{body}\n{fence}"


def issue_title(finding: Finding) -> str:
    """``bugmatrix: regression: autocast_cache::core[cpu] reproduces where it was fixed`` (the same on every night)."""
    return "bugmatrix: " + _TITLES[finding.kind].format(subject=finding.subject)


def _pins(report: NightReport, cell_id: str) -> str:
    compat = report.compat
    cell = compat.cell_by_id.get(cell_id)
    if cell is None:
        return "—"
    return literal(" · ".join(f"{compat.short(a)} {cell.pins[a]}" for a in compat.axis_names if a in cell.pins), table=True)


def _cells_table(finding: Finding, report: NightReport) -> tuple[list[str], list[list[str]]]:
    """The table's columns after cell and pins, and one row per cell."""
    compat, by_cell = report.compat, {c.cell_id: c for c in finding.changes}
    flaky, of_cells = finding.kind is ChangeKind.FLAKY, not finding.of_variant
    if flaky:
        head = ["outcomes, night by night (first night of each)"]
    else:
        head = ["since", "what tonight says"] if of_cells else ["baseline → tonight", "expected", "since", "message"]

    def said(cell_id: str) -> list[str]:
        since, cell = finding.since_by_cell.get(cell_id) or "—", compat.cell_by_id.get(cell_id)
        if flaky:
            return [" → ".join(f"{d} {o}" for d, o in outcome_runs(report.own_nights[-WINDOW:], finding.subject, cell_id)) or "—"]
        if of_cells:
            if cell is not None and cell.failed:
                return [since, literal(one_line_reason(cell.install.reason), table=True)]
            return [since, literal(by_cell[cell_id].message if cell_id in by_cell else "", table=True)]
        change, entry = by_cell.get(cell_id), compat.entry(finding.subject, cell_id)
        before = change.before.label if change is not None and change.before is not None else "—"
        now = entry.outcome.label if entry is not None else "—"
        if cell is not None and cell.reused_from is not None:  # never passed off as tonight's observation
            now += f" {REUSED} reused from {literal(cell.reused_from.text, table=True)}"
        expected = entry.expected.value if entry is not None and entry.expected is not None else "—"
        return [f"{before} → {now}", expected, since, literal(entry.message if entry else "", table=True)]

    return head, [[literal(c, table=True), _pins(report, c), *said(c)] for c in finding.cells]


def _below(finding: Finding, report: NightReport) -> dict[str, str]:
    """Per cell: what moved below the pins since the baseline's run, that nothing did, or that it cannot be said."""
    below, old = {}, report.baseline.cell_by_id if report.baseline is not None else {}
    for cell_id in finding.cells:
        if finding.moved.get(cell_id):
            below[cell_id] = literal("; ".join(finding.moved[cell_id]), 1000)
        elif cell_id in old and None not in (distributions_of(old[cell_id]), distributions_of(report.compat.cell_by_id[cell_id])):
            below[cell_id] = "nothing; the same distributions as the baseline's run of this cell"
        else:
            below[cell_id] = "cannot say (the baseline's run of this cell, or tonight's, recorded no distributions)"
    return below


#: The helpers ``issue.md.j2`` writes with; the inlined files share what is left of ``room``.
_TOOLS = {"literal": literal, "fenced": fenced, "MARKER": MARKER, "LOCKED": LOCKED, "room": BODY_LIMIT - 200, "window": WINDOW}


def render_issue(finding: Finding, report: NightReport, night: str, links: Links, attachment: Attachment) -> tuple[str, str]:
    """(title, body) of a finding's issue (``issue.md.j2``); the body starts with its marker."""
    compat, title = report.compat, issue_title(finding)
    variant = compat.variant_by_id.get(finding.subject)
    logged = ((c, e.log) for c in finding.cells if (e := compat.entry(finding.subject, c)) is not None and e.log.strip())
    body = render(
        "issue.md.j2",
        **_TOOLS,
        marker=finding_marker(finding, night, title).render(),
        finding=finding,
        night=night,
        compat=compat,
        links=links,
        attachment=attachment,
        table=_cells_table(finding, report),
        cell_finding=finding.kind in CELL_FINDINGS,
        evidence=variant.evidence if variant is not None else "",
        below=_below(finding, report) if finding.of_variant else {},
        log=next(logged, None) if finding.of_variant else None,
        inline=[(name, attachment.files[name]) for name in INLINE if name in attachment.files],
    )
    return title, body
