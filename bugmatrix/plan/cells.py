"""From the matrix and the cases' axes to the list of cells.

Cells are not the cross product of every axis: each variant spans only the
axes it depends on (core torch cases: torch; the T5 case: lightning x
transformers), and the plan is the union of those projections, with axes a
projection does not span held at the matrix's ``base`` pins. A cell whose pins
are all contained in a larger cell is dropped: the larger one runs it too.
Where the base cannot exist for a cell (no wheel for its Python), the
``[[base_when]]`` stand-ins replace the base-held pins before anything else.
Every cell carries the variant ids it runs, so the report can tell a result
that is missing from one that was never planned.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.matrix import INTERPRETER, PROFILES, SYMBOLIC, Matrix

__all__ = ["PLAN_SCHEMA", "Cell", "find_cell", "plan_all", "plan_cells", "plan_document"]

PLAN_SCHEMA = "bugmatrix.plan.cells/1"


@dataclass(frozen=True)
class Cell:
    """One pinned environment: its id, its pins and the profiles that include it."""

    id: str
    pins: Mapping[str, str]
    profiles: tuple[str, ...] = field(default=(), compare=False)
    device: str = "cpu"
    variants: tuple[str, ...] = field(default=(), compare=False)

    @property
    def python(self) -> str:
        return self.pins[INTERPRETER]

    @property
    def axes(self) -> tuple[str, ...]:
        """The package axes installed in this cell (what its variants may use), in display order."""
        return tuple(a for a in self.pins if a != INTERPRETER)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pins": dict(self.pins),
            "profiles": list(self.profiles),
            "device": self.device,
            "variants": list(self.variants),
        }


def _sort_key(matrix: Matrix, cell: Cell) -> tuple:
    return (cell.device, *(Version(cell.pins.get(a, "0")) for a in matrix.axes))


def plan_cells(matrix: Matrix, profile: str, catalog: Catalog) -> list[Cell]:
    """The cells of one profile."""
    if profile not in PROFILES:
        msg = f"unknown profile {profile!r}; use one of {', '.join(PROFILES)}"
        raise BugmatrixError(msg)
    chosen = matrix.profiles[profile]
    unresolved = [axis for axis, values in chosen.items() if any(v in SYMBOLIC for v in values)]
    if unresolved:  # a programming error more than a user's: every entry point resolves first
        msg = f"{matrix.path}: profiles.{profile}.{unresolved[0]} lists a symbolic version; plan bugmatrix.releases.tracking.resolve_matrix(...)'s matrix"
        raise BugmatrixError(msg)
    # Every cell has the interpreter, and torch where the matrix has it: the cases all need torch.
    held = {a: matrix.base[a] for a in (INTERPRETER, "torch") if a in matrix.axes}
    pin_sets: list[dict[str, str]] = []
    for axes in catalog.projections():
        values = [chosen.get(axis, (matrix.base[axis],)) for axis in axes]
        for combo in itertools.product(*values):
            pin_sets.append(matrix.ordered({**held, **dict(zip(axes, combo, strict=True))}))
    # A python sweep: the base stack on every other listed interpreter.
    for python in chosen.get(INTERPRETER, ()):
        if python != matrix.base[INTERPRETER]:
            pin_sets.append(matrix.ordered({**matrix.base, INTERPRETER: python}))
    pin_sets += [
        matrix.ordered({INTERPRETER: matrix.base[INTERPRETER], **pins}) for pins, profiles in matrix.include if profile in profiles
    ]
    pin_sets = [matrix.rebased(p) for p in pin_sets]
    kept = [p for p in pin_sets if not any(r.matches(p) for r in matrix.exclude if profile in r.profiles)]
    unique = {matrix.cell_id(p): p for p in kept}
    covered = {
        cid for cid, pins in unique.items()
        if any(other != pins and pins.items() <= other.items() for other in unique.values())
    }  # fmt: skip
    cells = [Cell(cid, pins, (profile,)) for cid, pins in unique.items() if cid not in covered]
    cells += [Cell(matrix.cell_id(c.pins, "cuda"), c.pins, (profile,), "cuda") for c in _gpu_cells(matrix, cells)]
    planned = [Cell(c.id, c.pins, c.profiles, c.device, tuple(catalog.runs_in(c.axes))) for c in cells]
    return sorted(planned, key=lambda c: _sort_key(matrix, c))


def _gpu_cells(matrix: Matrix, cells: list[Cell]) -> list[Cell]:
    """CPU cells selected by ``[gpu]`` (every listed axis matches) also run on a GPU runner."""
    if not matrix.gpu_select:
        return []
    return [c for c in cells if all(c.pins.get(axis, values[0]) in values for axis, values in matrix.gpu_select.items())]


def plan_all(matrix: Matrix, catalog: Catalog) -> list[Cell]:
    """Every cell of every profile, each tagged with the profiles that include it."""
    tags: dict[str, list[str]] = {}
    cells: dict[str, Cell] = {}
    for profile in PROFILES:
        for cell in plan_cells(matrix, profile, catalog):
            cells.setdefault(cell.id, cell)
            tags.setdefault(cell.id, []).append(profile)
    return sorted((Cell(c.id, c.pins, tuple(tags[c.id]), c.device, c.variants) for c in cells.values()), key=lambda c: _sort_key(matrix, c))


def find_cell(cells: Iterable[Cell], name: str) -> Cell:
    """A cell by id, with a helpful error naming close matches."""
    cells = list(cells)
    for cell in cells:
        if cell.id == name:
            return cell
    close = [c.id for c in cells if name in c.id or c.id in name][:3]
    hint = f"did you mean {', '.join(close)}?" if close else "list them with: nox -s plan -- --profile full"
    msg = f"unknown cell {name!r}; {hint}"
    raise BugmatrixError(msg)


def plan_document(matrix: Matrix, profile: str, cells: list[Cell]) -> dict[str, Any]:
    """The plan as data (``bugmatrix.plan.cells/1``): what the report checks completeness against."""
    return {
        "schema": PLAN_SCHEMA,
        "profile": profile,
        "axes": [{"name": a.name, "prefix": a.prefix} for a in matrix.axes.values()],
        "cells": [c.to_json() for c in cells],
    }
