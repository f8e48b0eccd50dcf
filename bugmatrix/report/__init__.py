"""From run files to what maintainers read: compat.json, compat.md, index.html.

The pipeline is one way: :mod:`~bugmatrix.report.merge` turns run files into a
compat document, :mod:`~bugmatrix.report.diff` compares it with the baseline,
and the two renderers only ever read those two values. What every renderer
must agree on (how an outcome is written, which axes a cell has) lives here,
so the Markdown and the HTML can never drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["AXIS_ORDER", "AXIS_SHORT", "FLAGGED_VERDICTS", "SYMBOLS", "axes_of", "label", "split_axes"]

#: Every outcome has a symbol *and* a word; colour is only ever an addition.
SYMBOLS = {
    "reproduced": "✗",
    "fixed": "✓",
    "different": "≠",
    "skipped": "–",
    "crashed": "‼",
    "timeout": "∞",
    "install-failed": "⚠",
}

#: Verdicts a maintainer must look at; renderers mark them beyond the symbol.
FLAGGED_VERDICTS = ("regression", "unexpected-fix", "new-failure-mode")

#: Display order of the matrix axes; axes a future matrix adds come after, sorted.
AXIS_ORDER = ("python", "torch", "lightning", "transformers")
#: Column headings name axes the way the cell ids do (``py311-torch2.5.1-pl2.0.3-tf4.30.2``).
AXIS_SHORT = {"python": "py", "torch": "torch", "lightning": "pl", "transformers": "tf"}


def label(outcome: str) -> str:
    """``✗ reproduced``: the form used in every rendered table."""
    return f"{SYMBOLS.get(outcome, '?')} {outcome}"


def axes_of(cells: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every axis pinned by at least one cell, in display order."""
    seen = {axis for cell in cells for axis in (cell.get("pins") or {})}
    return [a for a in AXIS_ORDER if a in seen] + sorted(seen.difference(AXIS_ORDER))


def split_axes(cells: list[Mapping[str, Any]]) -> tuple[list[str], dict[str, str]]:
    """Axes whose pin differs between cells, and the pins all cells share.

    A column header only needs what tells cells apart: ``torch 2.5.1 · pl 2.0.3``
    instead of repeating ``py 3.11`` in every column; the shared pins are said
    once above the table.
    """
    varying: list[str] = []
    shared: dict[str, str] = {}
    for axis in axes_of(cells):
        values = {str((c.get("pins") or {}).get(axis, "")) for c in cells}
        if len(values) == 1 and "" not in values:
            shared[axis] = values.pop()
        else:
            varying.append(axis)
    return varying, shared
