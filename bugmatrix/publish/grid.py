"""The variant × night grid that opens ``nights.html``: what each variant did on each of the last nights, and where it flipped.

A maintainer's first question each morning is "did anything change?", and a
stacked count per night cannot answer it (a flip of one variant in one cell
looks like the night before). So the grid has one row per variant and one
column per night (the last :data:`GRID_NIGHTS`, oldest left); each entry is the
variant's outcome symbols across that night's cells (``✗✓``: reproduced in
some cells, fixed in others). A night on which a cell's outcome differs from
the night before is a **flip**: outlined, with "since <night>" on its row.
Rows with a finding (a flagged verdict, or an issue about the variant) come
first, then rows that flipped, then the rest in the report's order; variants
that ran nowhere (skipped or not installed in every cell of every shown night) fold into one line.

Everything is read from each night's own ``compat.json`` (:mod:`~bugmatrix.publish.nights`
passes the outcomes it read): publishing never recomputes a result.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bugmatrix.cell.outcomes import Outcome

__all__ = ["GRID_NIGHTS", "Grid", "GridEntry", "GridRow", "NightOutcomes", "variant_grid"]

#: Nights the grid shows (the history's flaky window is 30 nights too).
GRID_NIGHTS = 30
#: Outcomes of a variant that did not run: shown only where nothing else was recorded that night.
_NOT_RUN = (Outcome.SKIPPED.value, Outcome.INSTALL_FAILED.value)


@dataclass(frozen=True)
class NightOutcomes:
    """What one night recorded per variant (cell -> outcome value), and which variants had a finding that night."""

    date: str
    path: str
    outcomes: Mapping[str, Mapping[str, str]]
    findings: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GridEntry:
    """One variant on one night: its symbols ("" when the night has no result of it), a hover text, whether it flipped that night."""

    symbols: str
    title: str
    flip: bool = False
    finding: bool = False


@dataclass(frozen=True)
class GridRow:
    variant: str
    entries: tuple[GridEntry, ...]  # oldest night first, one per column
    since: str  # the night of its newest flip in the window ("" when none)
    finding: bool  # a finding on any shown night


@dataclass(frozen=True)
class Grid:
    nights: tuple[NightOutcomes, ...]  # the columns, oldest first
    rows: tuple[GridRow, ...]
    idle: tuple[str, ...]  # ran nowhere (skipped or not installed) on every shown night: one folded line


def _outcome(value: str) -> Outcome | None:
    try:
        return Outcome(value)
    except ValueError:
        return None


def _entry(night: NightOutcomes, variant: str, flipped: list[str]) -> GridEntry:
    per_cell = night.outcomes.get(variant)
    if not per_cell:
        return GridEntry("", f"{night.date}: not in this night's report")
    counts: dict[Outcome, int] = {}
    for value in per_cell.values():
        if (outcome := _outcome(value)) is not None:
            counts[outcome] = counts.get(outcome, 0) + 1
    ran = [o for o in Outcome if o in counts and o.value not in _NOT_RUN] or [o for o in Outcome if o in counts]
    said = ", ".join(f"{o.label} in {counts[o]}" for o in Outcome if o in counts)
    title = f"{night.date}: {said} (cells)" + (f"; flipped: {', '.join(flipped)}" if flipped else "")
    finding = variant in night.findings
    return GridEntry("".join(o.symbol for o in ran), title + ("; a finding" if finding else ""), bool(flipped), finding)


def _flips(before: Mapping[str, str] | None, after: Mapping[str, str] | None) -> list[str]:
    """``a: fixed → reproduced`` per cell whose outcome differs between two nights (a missing result is a gap, not a flip)."""
    if not before or not after:
        return []
    gap = Outcome.MISSING.value
    return [
        f"{cell} {before[cell]} → {now}"
        for cell, now in after.items()
        if cell in before and gap not in (before[cell], now) and before[cell] != now
    ]


def variant_grid(nights: Sequence[NightOutcomes], limit: int = GRID_NIGHTS) -> Grid:
    """The grid of ``nights`` (newest first, as the site lists them): the newest ``limit`` as columns, oldest left."""
    columns = list(reversed(nights[:limit]))
    before = nights[limit] if len(nights) > limit else None  # the night before the first column: a flip on it shows
    variants = list(dict.fromkeys(v for night in reversed(columns) for v in night.outcomes))
    rows, idle = [], []
    for variant in variants:
        values = [o for night in columns for o in (night.outcomes.get(variant) or {}).values()]
        if all(v in _NOT_RUN for v in values) and not any(variant in night.findings for night in columns):
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
    """A sort key that puts later nights first ("" is no night: equal for all)."""
    return -dt.date.fromisoformat(date).toordinal() if date else 0
