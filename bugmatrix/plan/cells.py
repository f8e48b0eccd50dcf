"""From the matrix and the cases' axes to the list of cells.

Cells are not the cross product of every axis: each variant spans only the
axes it depends on (core torch cases: torch; the T5 case: lightning x
transformers), and the plan is the union of those projections. The axes every
cell installs (the interpreter, and each ``every_cell`` axis of the matrix)
are held at their ``[base]`` pins where a projection does not span them; no
other axis is installed in a cell whose variants do not span it, so adding an
axis (and a case spanning it) adds cells without touching the others. A cell
whose pins are all contained in a larger cell is dropped: the larger one runs
its variants too (a cell runs every variant whose axes it installs).

A profile that lists several interpreters sweeps them: every projection at
its base pins on each other interpreter (the same union, so the sweep cell of
today's catalogue names the axes its variants span, and a new axis adds a
sweep cell of its own instead of renaming this one). Where the base cannot
exist for a cell (no wheel for its Python), the ``[[base_when]]`` stand-ins
replace the base-held pins. Every cell carries the variant ids it runs, so the
report can tell a result that is missing from one that was never planned.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.conflicts import check_contradictions
from bugmatrix.plan.matrix import SYMBOLIC, Matrix

__all__ = ["PLAN_SCHEMA", "Cell", "Projections", "find_cell", "plan_all", "plan_cells", "plan_document", "sibling_id"]

PLAN_SCHEMA = "bugmatrix.plan.cells/1"


class Projections(Protocol):
    """What the planner asks of the cases (:class:`bugmatrix.plan.catalog.Catalog` answers it)."""

    def projections(self) -> list[tuple[str, ...]]: ...

    def runs_in(self, axes: tuple[str, ...]) -> list[str]: ...

    def installs_in(self, axes: tuple[str, ...]) -> dict[tuple[str, ...], list[str]]: ...


@dataclass(frozen=True)
class Cell:
    """One pinned environment: its id, its pins and the profiles that include it."""

    id: str
    pins: Mapping[str, str]
    profiles: tuple[str, ...] = field(default=(), compare=False)
    device: str = "cpu"
    variants: tuple[str, ...] = field(default=(), compare=False)
    interpreter: str = field(default="", compare=False)  # the matrix's interpreter axis (set by the planner)
    extra: tuple[str, ...] = field(default=(), compare=False)  # an install workaround's requirements, added to the pins'
    sibling_of: str = field(default="", compare=False)  # the cell whose pins it shares, where ``extra`` is set

    @property
    def python(self) -> str:
        """The interpreter version this cell runs."""
        return self.pins[self.interpreter]

    @property
    def axes(self) -> tuple[str, ...]:
        """The package axes installed in this cell (what its variants may use), in display order."""
        return tuple(a for a in self.pins if a != self.interpreter)

    def to_json(self) -> dict[str, Any]:
        sibling = {"requires": list(self.extra), "sibling_of": self.sibling_of} if self.extra else {}
        return {
            "id": self.id,
            "pins": dict(self.pins),
            "profiles": list(self.profiles),
            "device": self.device,
            "variants": list(self.variants),
            **sibling,
        }


_OPERATORS = {"<=": "le", ">=": "ge", "==": "eq", "!=": "ne", "~=": "compat", "===": "is", "<": "lt", ">": "gt"}


def sibling_id(cell_id: str, requires: tuple[str, ...]) -> str:
    """``py311-torch2.0.1-with-setuptools-lt-81``: the cell an install workaround runs in, beside ``cell_id``."""
    parts = []
    for text in requires:
        requirement = Requirement(text)
        specs = sorted(requirement.specifier, key=str)
        parts.append("-".join([canonicalize_name(requirement.name), *(f"{_OPERATORS[s.operator]}-{s.version}" for s in specs)]))
    return f"{cell_id}-with-{'-and-'.join(parts)}"


def _siblings(cell: Cell, catalog: Projections) -> list[Cell]:
    """One sibling per distinct install workaround set the cell's axes admit: same pins, the extra requirements, those variants only.

    A CUDA twin's sibling is its CPU cell's sibling + ``-cuda`` (``py311-torch2.3.1-with-numpy-lt-2-cuda``), like every
    CUDA twin: it installs that CPU sibling's lock (``bugmatrix.run.lock.lock_path``) and the re-resolve lane finds it there.
    """
    cuda = "-cuda" if cell.device == "cuda" else ""
    return [
        Cell(
            sibling_id(cell.id.removesuffix(cuda), extra) + cuda,
            cell.pins,
            cell.profiles,
            cell.device,
            tuple(ids),
            cell.interpreter,
            extra,
            cell.id,
        )
        for extra, ids in catalog.installs_in(cell.axes).items()
    ]


def _sort_key(matrix: Matrix, cell: Cell) -> tuple:
    return (cell.device, *(Version(cell.pins.get(a, "0")) for a in matrix.axes))


def _pin_sets(matrix: Matrix, profile: str, catalog: Projections) -> list[dict[str, str]]:
    """Every combination the profile asks for, before rules and covering: projections, the interpreter sweep, includes."""
    chosen = matrix.profile(profile)
    interpreter = matrix.interpreter
    held = {a: matrix.base[a] for a in matrix.held_axes}
    pin_sets: list[dict[str, str]] = []
    for axes in catalog.projections():
        values = [chosen.get(axis, (matrix.base[axis],)) for axis in axes]
        for combo in itertools.product(*values):
            pin_sets.append(matrix.ordered({**held, **dict(zip(axes, combo, strict=True))}))
    for python in chosen.get(interpreter, ()):
        if python != matrix.base[interpreter]:
            for axes in catalog.projections():
                pin_sets.append(matrix.ordered({**held, **{a: matrix.base[a] for a in axes}, interpreter: python}))
    pin_sets += [matrix.ordered(pins) for pins, profiles in matrix.include if profile in profiles]
    return [matrix.rebased(p) for p in pin_sets]


def plan_cells(matrix: Matrix, profile: str, catalog: Projections) -> list[Cell]:
    """The cells of one profile; a profile that plans none, or a cell whose requirements contradict, is a one-line error."""
    unresolved = [axis for axis, values in matrix.profile(profile).items() if any(v in SYMBOLIC for v in values)]
    if unresolved:  # a programming error more than a user's: every entry point resolves first
        msg = f"{matrix.path}: profiles.{profile}.{unresolved[0]} lists a symbolic version; plan bugmatrix.releases.tracking.resolve_matrix(...)'s matrix"
        raise BugmatrixError(msg)
    rules = [r for r in matrix.exclude if profile in r.profiles]
    pin_sets = _pin_sets(matrix, profile, catalog)
    kept = [p for p in pin_sets if not any(r.matches(p) for r in rules)]
    if not kept:
        why = "every combination it asks for is excluded by an [[exclude]]" if pin_sets else "no case declares a variant"
        msg = f"{matrix.path}: profiles.{profile}: plans no cells ({why}); narrow the [[exclude]] rules or list other versions"
        raise BugmatrixError(msg)
    unique = {matrix.cell_id(p): p for p in kept}
    covered = {
        cid for cid, pins in unique.items()
        if any(other != pins and pins.items() <= other.items() for other in unique.values())
    }  # fmt: skip
    interpreter = matrix.interpreter
    cells = [Cell(cid, pins, (profile,), interpreter=interpreter) for cid, pins in unique.items() if cid not in covered]
    twins = _gpu_cells(matrix, cells)
    cells += [Cell(matrix.cell_id(c.pins, "cuda"), c.pins, (profile,), "cuda", interpreter=interpreter) for c in twins]
    planned = []
    for cell in cells:
        planned.append(Cell(cell.id, cell.pins, cell.profiles, cell.device, tuple(catalog.runs_in(cell.axes)), interpreter))
        planned += _siblings(cell, catalog)
    check_contradictions(matrix, [(c.id, c.pins, c.extra) for c in planned if c.device == "cpu"])
    return sorted(planned, key=lambda c: _sort_key(matrix, c))  # stable: a sibling follows its cell


def _gpu_cells(matrix: Matrix, cells: list[Cell]) -> list[Cell]:
    """CPU cells selected by ``[gpu]`` (every listed axis matches) also run on a GPU runner."""
    if not matrix.gpu_select:
        return []
    return [c for c in cells if all(c.pins.get(axis, values[0]) in values for axis, values in matrix.gpu_select.items())]


def _check_within(matrix: Matrix, planned: Mapping[str, list[Cell]]) -> None:
    """``within``: every cell of a profile is a cell of the profile it is declared within (CPU and GPU alike)."""
    for smaller, larger in matrix.within.items():
        outside = [c.id for c in planned[smaller] if c.id not in {o.id for o in planned[larger]}]
        if outside:
            more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
            msg = (
                f"{matrix.path}: profiles.{smaller}.within: cell {outside[0]}{more} of {smaller} is not planned in {larger}; "
                f"list its versions in profiles.{larger}, or remove within from profiles.{smaller}"
            )
            raise BugmatrixError(msg)


def plan_all(matrix: Matrix, catalog: Projections) -> list[Cell]:
    """Every cell of every profile, each tagged with the profiles that include it; ``within`` relations checked."""
    planned = {profile: plan_cells(matrix, profile, catalog) for profile in matrix.profiles}
    _check_within(matrix, planned)
    tags: dict[str, list[str]] = {}
    cells: dict[str, Cell] = {}
    for profile, profile_cells in planned.items():
        for cell in profile_cells:
            cells.setdefault(cell.id, cell)
            tags.setdefault(cell.id, []).append(profile)
    return sorted(
        (Cell(c.id, c.pins, tuple(tags[c.id]), c.device, c.variants, c.interpreter, c.extra, c.sibling_of) for c in cells.values()),
        key=lambda c: _sort_key(matrix, c),
    )


def find_cell(cells: Iterable[Cell], name: str) -> Cell:
    """A cell by id, with a helpful error naming close matches."""
    cells = list(cells)
    for cell in cells:
        if cell.id == name:
            return cell
    close = [c.id for c in cells if name in c.id or c.id in name][:3]
    tags = Counter(p for c in cells for p in c.profiles)
    widest = f" -- --profile {tags.most_common(1)[0][0]}" if tags else ""
    hint = f"did you mean {', '.join(close)}?" if close else f"list them with: nox -s plan{widest}"
    msg = f"unknown cell {name!r}; {hint}"
    raise BugmatrixError(msg)


def plan_document(matrix: Matrix, profile: str, cells: list[Cell]) -> dict[str, Any]:
    """The plan as data (``bugmatrix.plan.cells/1``): what the report checks completeness against.

    Its axes are those the cells pin, in display order: an axis no planned
    cell installs changes nothing in the document.
    """
    pinned = {axis for cell in cells for axis in cell.pins}
    return {
        "schema": PLAN_SCHEMA,
        "profile": profile,
        "axes": [{"name": a.name, "prefix": a.prefix} for a in matrix.axes.values() if a.name in pinned],
        "cells": [c.to_json() for c in cells],
    }
