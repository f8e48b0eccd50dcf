"""The plan in one call, as ``nox -l``, ``plan`` and ``check`` make it: every matrix mistake found before a cell runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import Cell, plan_all, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.existence import check_case_versions, check_versions
from bugmatrix.releases.registry import Resolution, warn
from bugmatrix.releases.tracking import resolve_matrix, without_symbolic

__all__ = ["Planned", "load_plan"]


@dataclass(frozen=True)
class Planned:
    """The matrix as declared and as resolved (``latest`` made concrete), the cases, and every profile's cells."""

    declared: Matrix
    matrix: Matrix
    resolution: Resolution
    catalog: Catalog
    cells: tuple[Cell, ...]

    def profile_cells(self, profile: str) -> list[Cell]:
        """One profile's cells, tagged with that profile only (an unknown name is a one-line error)."""
        return plan_cells(self.matrix, profile, self.catalog)


def load_plan(
    declared: Matrix,
    cases_dir: Path,
    *,
    refresh: bool = False,
    fallback: bool = False,
    registry: bool = True,
    offline: bool = False,
    saved: Path | None = None,
    warn: Callable[[str], None] = warn,
) -> Planned:
    """Check, resolve, import and plan. ``fallback``: plan the pinned versions only (with a warning) when ``latest`` cannot
    be resolved; ``registry=False`` skips the version checks; ``offline`` asks and writes nothing."""
    if registry:
        check_versions(declared, warn=warn, offline=offline)
    try:
        matrix, resolution = resolve_matrix(declared, refresh=refresh, saved=saved, warn=warn, offline=offline, check=registry)
    except BugmatrixError as exc:
        if not fallback:
            raise
        warn(f"'latest' left out of every profile: {exc}")
        matrix, resolution = without_symbolic(declared), Resolution()
    catalog = load_catalog(cases_dir, matrix)
    check_case_versions(declared, catalog.own_versions(), ask=registry, warn=warn, offline=offline)
    return Planned(declared, matrix, resolution, catalog, tuple(plan_all(matrix, catalog)))
