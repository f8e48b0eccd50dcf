"""Release tracking: each ``latest`` / ``latest-pre`` of a profile replaced, once per plan, by the release it names and
added to its axis's versions (constraints and excludes treat it like any listed release; the resolution is saved and
reused by everything that plans after it). :func:`load_plan`: the plan as ``nox -l``, ``plan`` and ``check`` make it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import Cell, plan_all, plan_cells
from bugmatrix.plan.matrix import SYMBOLIC, Matrix, load_matrix
from bugmatrix.releases.registry import Releases, Resolution, load_resolution, resolve_axes, warn
from bugmatrix.versions import parse_version

__all__ = [
    "RESOLUTION_ENV",
    "Planned",
    "apply_resolution",
    "load_plan",
    "load_resolved_matrix",
    "requests",
    "resolution_path",
    "resolve_matrix",
    "tracked_for",
    "without_symbolic",
]

RESOLUTION_ENV = "BUGMATRIX_RESOLUTION"


def resolution_path(reports: Path | None = None) -> Path:
    """``$BUGMATRIX_RESOLUTION`` or ``<reports>/resolution.json``."""
    return Path(os.environ.get(RESOLUTION_ENV) or (reports or output_dir()) / "resolution.json")


def requests(matrix: Matrix) -> dict[str, list[str]]:
    """axis -> the symbolic values any profile lists for it (empty when every version is pinned)."""
    found: dict[str, dict[str, None]] = {}
    for table in matrix.profiles.values():
        for axis, values in table.items():
            found.setdefault(axis, {}).update(dict.fromkeys(v for v in values if v in SYMBOLIC))
    return {axis: list(values) for axis, values in found.items() if values}


def apply_resolution(matrix: Matrix, resolution: Resolution) -> Matrix:
    """The matrix with every symbolic profile value replaced by its release (added to the axis, kept once)."""
    axes = dict(matrix.axes)
    for entry in resolution.entries:
        axis = axes[entry.axis]
        if Version(entry.resolved) not in {Version(v) for v in axis.versions}:
            axes[entry.axis] = msgspec.structs.replace(axis, versions=[*axis.versions, entry.resolved])
    profiles = {name: {axis: tuple(values) for axis, values in resolution.apply(table).items()} for name, table in matrix.profiles.items()}
    return dataclasses.replace(matrix, axes=axes, profiles=profiles)


def resolve_matrix(
    matrix: Matrix,
    *,
    refresh: bool = False,
    saved: Path | None = None,
    warn: Callable[[str], None] = warn,
    offline: bool = False,
    check: bool = True,
) -> tuple[Matrix, Resolution]:
    """The concrete matrix and its resolution: a saved one covering every request unless ``refresh``, else the registry's,
    saved. ``offline``: never the registry, never a write."""
    wanted = requests(matrix)
    if not wanted:
        return matrix, Resolution()
    path = saved or resolution_path()
    if not refresh and path.exists():
        # A saved resolution less the axes the matrix no longer has; a value that is not a version (``../../etc``) is one line.
        previous = load_resolution(path)
        kept = [entry for entry in previous.entries if entry.axis in matrix.axes]
        if bad := next((entry for entry in kept if parse_version(entry.resolved) is None), None):
            msg = f"{path}: {bad.axis}.resolved: {bad.resolved!r} is not a version; delete {path} and re-run `nox -s plan`"
            raise BugmatrixError(msg)
        previous = dataclasses.replace(previous, entries=tuple(kept))
        if all(previous.covers(a, r) for a, rs in wanted.items() for r in rs):
            if check:
                Releases(warn=warn, offline=offline).check_resolved(previous, matrix, path)
            return apply_resolution(matrix, previous), previous
    if offline:
        msg = f"no saved resolution of {', '.join(sorted(wanted))} in {path} (listing asks no registry; `nox -s plan` saves one)"
        raise BugmatrixError(msg)
    distributions = {axis: next(iter(matrix.axes[axis].distributions)) for axis in wanted if axis != matrix.interpreter}
    resolution = resolve_axes(wanted, distributions, saved=path, warn=warn)
    if not resolution.stale:
        write_json_atomic(path, resolution.to_json())
    return apply_resolution(matrix, resolution), resolution


def without_symbolic(matrix: Matrix) -> Matrix:
    """The matrix with every ``latest``/``latest-pre`` left out (an axis left empty falls back to its base pin)."""
    profiles = {
        name: {axis: kept for axis, values in table.items() if (kept := tuple(v for v in values if v not in SYMBOLIC))}
        for name, table in matrix.profiles.items()
    }
    return dataclasses.replace(matrix, profiles=profiles)


def load_resolved_matrix(path: Path) -> Matrix:
    """``load_matrix`` + :func:`resolve_matrix` with the saved resolution."""
    return resolve_matrix(load_matrix(path))[0]


def tracked_for(matrix: Matrix, resolution: Resolution, pins: Mapping[str, str], profiles: tuple[str, ...]) -> dict[str, Any]:
    """``{"torch": {"requested": "latest", "resolved": "2.15.0"}}`` for each axis one of the cell's profiles asks a symbolic
    value of (``matrix`` unresolved) that resolved to its pin."""
    tracked: dict[str, Any] = {}
    for entry in resolution.entries:
        asked = any(entry.requested in matrix.profiles[p].get(entry.axis, ()) for p in profiles)
        if asked and entry.axis in pins and Version(pins[entry.axis]) == Version(entry.resolved):
            tracked[entry.axis] = {"requested": entry.requested, "resolved": pins[entry.axis]}
    return tracked


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
) -> Planned:
    """Check, resolve, import and plan. ``fallback``: plan the pinned versions only (with a warning) when ``latest`` cannot
    be resolved; ``registry=False`` skips the version checks; ``offline`` asks and writes nothing."""
    if registry:
        Releases(offline=offline).check_versions(declared)
    try:
        matrix, resolution = resolve_matrix(declared, refresh=refresh, saved=saved, offline=offline, check=registry)
    except BugmatrixError as exc:
        if not fallback:
            raise
        warn(f"'latest' left out of every profile: {exc}")
        matrix, resolution = without_symbolic(declared), Resolution()
    catalog = load_catalog(cases_dir, matrix)
    Releases(offline=offline).check_case_versions(declared, catalog.own_versions(), ask=registry)
    return Planned(declared, matrix, resolution, catalog, tuple(plan_all(matrix, catalog)))
