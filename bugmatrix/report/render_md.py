"""GitHub-flavoured Markdown: compat.md and the CI step summary (templates ``compat.md.j2`` and ``summary.md.j2``).

Both lead with what needs a maintainer; compat.md then has each case's boundaries, agreement and table, neighbouring
cells that agree sharing a column (:func:`_column_groups`). :data:`TEXT` renders every text page (the terminal's too);
no Markdown library escapes for GitHub's dialect, so :func:`escape_md` is hand-written, applied as the ``md`` and
``code`` filters (autoescape is for HTML).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from jinja2 import Environment, PackageLoader

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.documents.compat import Cell, Variant
from bugmatrix.report.boundaries import by_case
from bugmatrix.report.diff import INFORMATIONAL, PER_CELL, Change
from bugmatrix.report.history import WINDOW
from bugmatrix.report.marks import Picture, Track, boundary_text
from bugmatrix.report.model import REUSED, Compat, reused_note
from bugmatrix.report.night import NightReport

__all__ = ["LINE_LIMIT", "SUMMARY_CHANGE_LIMIT", "TEXT", "code", "escape_md", "render_markdown", "render_step_summary"]

#: Characters that change Markdown structure or style; backslash-escaped (GFM honours these in tables too).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: Identifiers that may go verbatim in a code span: no backtick (ends the span), no pipe (ends the cell).
_PLAIN_ID = re.compile(r"[\w.:+\-\[\]/=, ]+")


def escape_md(text: object) -> str:
    """Make arbitrary text safe inside a Markdown table cell (one line, no markup, no HTML)."""
    out = _MD_SPECIAL.sub(r"\\\1", str(text))
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(out.split())


def code(text: object) -> str:
    """An id as a code span when it needs no escaping (a code span shows backslashes literally), else escaped text."""
    text = str(text)
    return f"`{text}`" if _PLAIN_ID.fullmatch(text) else escape_md(text)


#: The text templates (``*.md.j2``, ``terminal.txt.j2``): a line holding only a tag leaves nothing behind.
TEXT = Environment(
    loader=PackageLoader("bugmatrix.report", "templates"),
    autoescape=False,  # noqa: S701 -- Markdown escapes with the md and code filters
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEXT.filters.update(md=escape_md, code=code)

#: GitHub rejects step summaries over 1 MiB; a nightly with a broken index could list thousands of changes.
SUMMARY_CHANGE_LIMIT = 30
#: The step summary stays readable (GitHub truncates it at 1 MiB anyway); compat.json has everything.
LINE_LIMIT = 40


@functools.lru_cache(maxsize=4096)
def _said(outcome: Outcome, verdict: Verdict | None, workarounds: tuple[str, ...], old: bool, mark: str) -> str:
    """An entry's text: what only its judgement decides (a few dozen kinds in 20,000 entries), then the column's mark."""
    text = outcome.label
    if verdict is not None and verdict.flagged:
        text = f"**{text}** ({verdict})"
    elif verdict is Verdict.NEW:
        text += " (new)"
    if old:
        text += " (under an old check)"
    if workarounds:
        text += " — works: " + ", ".join(escape_md(w) for w in workarounds)
    return text + mark


def _change_items(changes: Iterable[Change]) -> list[Change | list[Change]]:
    """The changes to list, most severe first; a missing or uninstallable cell is one item (a list), not one per variant."""
    items: list[Change | list[Change]] = []
    per_cell: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        if c.kind in INFORMATIONAL:
            continue
        if c.kind not in PER_CELL or not c.variant_id:
            items.append(c if c.variant_id else [c])
        elif (c.kind, c.cell_id) in per_cell:
            per_cell[(c.kind, c.cell_id)].append(c)
        else:  # the group keeps the severity slot of its first change
            items.append(per_cell.setdefault((c.kind, c.cell_id), [c]))
    return items


def _column_groups(compat: Compat, columns: list[Cell], ran: list[Variant], varying: list[str]) -> list[tuple[str, list[str]]]:
    """(heading, one entry per row) for each column of a case's table.

    Neighbouring cells that differ in one axis and agree on every row share a column (``tf 4.29.2, 4.30.2, 5.23.0``).
    """
    groups: list[tuple[list[Cell], str | None, list[str]]] = []
    rows = [(v, compat.entries(v.id)) for v in ran]
    for cell in columns:
        mark = f" {REUSED}" if cell.reused else ""  # never shown as fresh: the Reused section names its origin
        # "·": the variant was not part of this cell's run (e.g. selected out with -k).
        entries = [
            _said(e.outcome, e.verdict, e.workarounds, bool(v.old_check(e)), mark) if (e := per_cell.get(cell.id)) is not None else "·"
            for v, per_cell in rows
        ]
        if groups:
            cells, axis, previous = groups[-1]
            first, pins = cells[0].pins, cell.pins
            differ = [a for a in varying if first.get(a) != pins.get(a)]
            # Both must pin the axis: "tf 4.29.2" must not stand for a cell without that axis.
            if entries == previous and len(differ) == 1 and axis in (None, differ[0]) and first.get(differ[0]) and pins.get(differ[0]):
                groups[-1] = ([*cells, cell], differ[0], previous)
                continue
        groups.append(([cell], None, entries))
    headings = []
    for cells, axis, entries in groups:
        pins = cells[0].pins  # every cell of a group pins its axis
        parts = [f"{compat.short(a)} {', '.join(c.pins[a] for c in cells) if a == axis else pins[a]}" for a in varying if a in pins]
        reused = f" {REUSED}" if any(c.reused for c in cells) else ""
        headings.append((escape_md(" · ".join(parts) or ", ".join(c.id for c in cells)) + reused, entries))
    return headings


def _flips(picture: Picture, track: Track) -> str:
    """A track's boundary as the HTML labels it ("fixed in torch 2.11.0"); another device's says where it was observed."""
    return (
        (boundary_text(picture, track) if picture.observed_on else "")
        or "; ".join(f.label for f in track.flips)
        or track.unread
        or "no flip along " + " × ".join(picture.short(a) for a in picture.axes)
    )


TEXT.filters["moved"] = lambda moved: escape_md("; ".join(moved)) if moved else "nothing"
TEXT.globals.update(
    reused=REUSED,
    change_items=_change_items,
    flips=_flips,
    reused_note=reused_note,
    outcomes=list(Outcome),
    line_limit=LINE_LIMIT,
    window=WINDOW,
)


class _Case(NamedTuple):
    name: str
    drawn: list[Picture]
    headings: list[str]
    rows: list[tuple[Variant, list[str]]]  # the variants that ran somewhere, each with its entry per column
    skipped: int  # variants that only skipped, or sat in cells that never installed: counted below the table


def _cases(report: NightReport) -> list[_Case]:
    compat = report.compat
    varying, _ = compat.varying_and_shared
    cases = []
    for case, drawn, idle in by_case(compat, report.boundary):
        ran = [v for v in compat.variants if v.case == case and v.id in compat.ran_variants]
        columns = [c for c in compat.cells if any(c.id in compat.entries(v.id) for v in ran)]
        groups = _column_groups(compat, columns, ran, varying) if ran else []
        rows = [(v, [entries[i] for _, entries in groups]) for i, v in enumerate(ran)]
        cases.append(_Case(case, drawn, [heading for heading, _ in groups], rows, len(idle)))
    return cases


def render_markdown(report: NightReport) -> str:
    """The full compat.md: header, findings, then per case its boundaries, agreement and table."""
    return TEXT.get_template("compat.md.j2").render(report=report, cases=_cases(report))


def render_step_summary(report: NightReport) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY``: the findings and the flaky pairs, then outcome counts per case."""
    compat = report.compat
    counts: dict[str, Counter[Outcome]] = {}
    for variant in compat.variants:
        counts.setdefault(variant.case, Counter()).update(e.outcome for e in compat.entries(variant.id).values())
    return TEXT.get_template("summary.md.j2").render(
        report=report,
        counts=[(case, [counter.get(o, 0) for o in Outcome]) for case, counter in counts.items()],
        limit=SUMMARY_CHANGE_LIMIT,
        notes_limit=LINE_LIMIT,
    )
