"""Which distributions changed between two runs of one cell (``numpy 2.3.4 → 2.4.0``): the "why" behind a change."""

from __future__ import annotations

from collections.abc import Mapping

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents.compat import Cell, Moved
from bugmatrix.report.model import Compat
from bugmatrix.versions import distribution_changes

__all__ = ["distributions_of", "explain_changes", "source_build_lines"]


def distributions_of(cell: Cell) -> dict[str, str] | None:
    """A cell's recorded distributions (None: not recorded); a rebuilt wheel shows as ``2.10.0 (build 3)``."""
    found, builds = cell.environment.get("distributions"), cell.environment.get("wheel_builds") or {}
    if not isinstance(found, Mapping):
        return None
    return {name: f"{version} (build {builds[name]})" if name in builds else version for name, version in found.items()}


def explain_changes(baseline: Compat | None, current: Compat) -> list[Moved]:
    """Every (variant, cell) whose outcome differs from the baseline's (missing ones aside), with what moved in that cell."""
    if baseline is None:
        return []
    old, moved = baseline.cell_by_id, {}
    for cell in current.cells:
        had, has = distributions_of(old[cell.id]) if cell.id in old else None, distributions_of(cell)
        if had is not None and has is not None:  # either record without distributions: nothing moved (never invented)
            moved[cell.id] = distribution_changes(had, has)
    explained = []
    for variant, per_cell in current.results.items():
        was = baseline.results.get(variant, {})
        for cell, entry in per_cell.items():
            before = was.get(cell)
            if before is None or before.outcome is entry.outcome or entry.outcome is Outcome.MISSING:
                continue
            explained.append(Moved(variant, cell, before.outcome, entry.outcome, tuple(moved.get(cell, ()))))
    return sorted(explained, key=lambda e: (e.cell, e.variant))


def source_build_lines(compat: Compat) -> list[str]:
    """One line per cell whose environment built a distribution from source (slow, and another binary than a wheel's)."""
    lines = []
    for cell in compat.cells:
        built = cell.environment.get("source_builds") or {}
        if built:
            names = ", ".join(f"{name} {version}" for name, version in sorted(built.items()))
            lines.append(f"built from source in {cell.id}: {names} (no wheel for its Python; refuse with [harness] source_builds)")
    return lines
