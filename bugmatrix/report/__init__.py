"""From run files to what maintainers read: compat.json, compat.md, index.html.

The pipeline is one way: :mod:`~bugmatrix.report.merge` turns run files (and
the plan, when given) into a compat document, :mod:`~bugmatrix.report.diff`
compares it with the baseline, and the renderers only ever read those two
values. How an outcome is written comes from the enums
(:class:`~bugmatrix.cell.outcomes.Outcome`), and which axes a cell has, in
which order and under which short name, from the document itself (the plan's
or the run files' axis list): nothing here names an axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from bugmatrix.cell.outcomes import Outcome, Verdict

__all__ = ["OUTCOMES", "axes_of", "is_flagged", "label", "short", "split_axes"]

#: Every outcome, in legend order; each has a symbol *and* a word, colour is only ever an addition.
OUTCOMES = tuple(o.value for o in Outcome)


@cache
def label(outcome: str) -> str:
    """``✗ reproduced``: the form used in every rendered table (memoised: a full report asks ~10^5 times)."""
    return Outcome(outcome).label


@cache
def is_flagged(verdict: str | None) -> bool:
    """A verdict a maintainer must look at (regression, unexpected fix, new failure mode)."""
    return bool(verdict) and Verdict(verdict).flagged


def axes_of(compat: Mapping[str, Any]) -> list[str]:
    """Every axis pinned by at least one cell, in the document's display order (unknown ones after, sorted)."""
    order = [a["name"] for a in compat.get("axes", [])]
    seen = {axis for cell in compat["cells"] for axis in (cell.get("pins") or {})}
    return [a for a in order if a in seen] + sorted(seen.difference(order))


def short(compat: Mapping[str, Any], axis: str) -> str:
    """An axis's short name in headings, as in cell ids (``pl`` for lightning)."""
    return next((a["prefix"] for a in compat.get("axes", []) if a["name"] == axis), axis)


def split_axes(compat: Mapping[str, Any], cells: list[Mapping[str, Any]] | None = None) -> tuple[list[str], dict[str, str]]:
    """Axes whose pin differs between cells, and the pins all cells share.

    A column header only needs what tells cells apart: ``torch 2.5.1 · pl 2.0.3``
    instead of repeating ``py 3.11`` in every column; the shared pins are said
    once above the table.
    """
    cells = compat["cells"] if cells is None else cells
    varying: list[str] = []
    shared: dict[str, str] = {}
    for axis in axes_of(compat):
        values = {str((c.get("pins") or {}).get(axis, "")) for c in cells}
        if len(values) == 1 and "" not in values:
            shared[axis] = values.pop()
        else:
            varying.append(axis)
    return varying, shared
