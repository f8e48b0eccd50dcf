"""From the matrix and the cases' slices to the list of cells.

A profile's cells are the union of its cases' slices, not the cross product of every axis: adding a case touches no
other case's cells, and one cell id runs the same variants in every profile. A CUDA twin is planned only for a cell
that runs a CUDA variant; a case environment beyond the axes runs in a sibling cell (same pins plus that environment).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bugmatrix.cell.caseenv import Env
from bugmatrix.documents.plan import PLAN_SCHEMA
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.computed import Choice, Reference, choose, committed_choices
from bugmatrix.plan.conflicts import check_contradictions
from bugmatrix.plan.matrix import SYMBOLIC, Matrix
from bugmatrix.plan.slices import Slice

__all__ = ["Cell", "Slices", "find_cell", "override_notes", "plan_all", "plan_cells", "plan_document", "recompute", "sibling_id"]


class Slices(Protocol):
    """What the planner asks of the cases (:class:`bugmatrix.plan.catalog.Catalog` answers it)."""

    def slices(self, matrix: Matrix) -> list[Slice]: ...


@dataclass(frozen=True)
class Cell:
    """One pinned environment: its id, its pins and the profiles that include it."""

    id: str
    pins: Mapping[str, str]
    profiles: tuple[str, ...] = field(default=(), compare=False)
    device: str = "cpu"
    variants: tuple[str, ...] = field(default=(), compare=False)
    interpreter: str = field(default="", compare=False)  # the matrix's interpreter axis (set by the planner)
    extra: Env = field(default_factory=Env, compare=False)  # a case's environment beyond the pins: this cell is a sibling
    sibling_of: str = field(default="", compare=False)  # the cell whose pins it shares, where ``extra`` is set
    source: str = field(default="", compare=False)  # the case file that declares ``extra`` (errors name it)
    #: Where ``extra`` takes a distribution over from a ``[[constraints]]`` entry: what the plan says about it, one note each.
    overrides: tuple[str, ...] = field(default=(), compare=False)

    @property
    def python(self) -> str:
        """The interpreter version this cell runs."""
        return self.pins[self.interpreter]

    @property
    def axes(self) -> tuple[str, ...]:
        """The package axes installed in this cell (what its variants may use), in display order."""
        return tuple(a for a in self.pins if a != self.interpreter)


def sibling_id(cell_id: str, extra: Env) -> str:
    """``py311-torch2.0.1-with-setuptools-lt-81``: the cell a case's environment runs in, beside ``cell_id``."""
    return f"{cell_id}-{extra.id_part()}"


def _sort_key(matrix: Matrix, cell: Cell) -> tuple:
    return (cell.device, *matrix.release_order(cell.pins))


def _slice_pins(matrix: Matrix, profile: str, case: Slice) -> list[dict[str, str]]:
    """The combinations one case asks the profile for: its axes crossed at the profile's versions, and the interpreter sweep."""
    chosen = matrix.profile(profile)
    interpreter = matrix.interpreter
    held = {a: matrix.base[a] for a in matrix.held_axes}
    values = [case.own(axis, chosen[axis]) if axis in chosen else (matrix.base[axis],) for axis in case.axes]
    pin_sets = [{**held, **dict(zip(case.axes, combo, strict=True))} for combo in itertools.product(*values)]
    for python in chosen.get(interpreter, ()):
        if python != matrix.base[interpreter]:
            pin_sets.append({**held, **{a: matrix.base[a] for a in case.axes}, interpreter: python})
    return [p for p in map(matrix.rebased, pin_sets) if case.admits(p)]  # rebased puts them in display order


class _Members:
    """Which cases a cell's pins belong to (any profile): a point of the case's cross (its spanned axes at any of their
    versions, the rest at base, ``[[base_when]]`` applied), or an ``[[include]]`` cell that pins its axes."""

    def __init__(self, matrix: Matrix, slices: list[Slice]) -> None:
        self.matrix = matrix
        self.slices = slices
        self.includes = [matrix.rebased(pins) for pins, _ in matrix.include]
        self.held = {a: matrix.base[a] for a in matrix.held_axes}

    def _point(self, case: Slice, pins: Mapping[str, str]) -> bool:
        if any(a not in pins or pins[a] not in case.own(a, self.matrix.axes[a].versions) for a in case.axes):
            return False  # a release another case added for its own cells is no point of this one's cross
        spanned = {a: pins[a] for a in case.axes}
        return self.matrix.rebased({**self.held, **spanned, self.matrix.interpreter: pins[self.matrix.interpreter]}) == dict(pins)

    def cases(self, pins: Mapping[str, str]) -> list[Slice]:
        installed = {a for a in pins if a != self.matrix.interpreter}
        included = dict(pins) in self.includes
        return [s for s in self.slices if s.admits(pins) and (self._point(s, pins) or (included and set(s.axes) <= installed))]

    def cells(self, cell: Cell) -> list[Cell]:
        """The cell with its variants, and one sibling per environment its cases' variants need beyond its own (a CUDA
        twin's sibling is its CPU cell's sibling + ``-cuda``: it installs that sibling's lock)."""
        runs = [(m, s.source) for s in self.cases(cell.pins) for m in s.members if m.runs_at(cell.pins)]
        own = sorted(self.matrix.requirements_for(cell.pins))
        groups: dict[Env, list[tuple[str, str]]] = {}
        for member, source in runs:
            # An environment that installs what the cell installs, and sets nothing, is the cell's own.
            same = not (member.extra.absent or member.extra.variables or member.extra.flags)
            extra = Env() if same and sorted(self.matrix.requirements_for(cell.pins, extra=member.extra)) == own else member.extra
            groups.setdefault(extra, []).append((member.id, source))
        cuda = "-cuda" if cell.device == "cuda" else ""
        planned = [replace(cell, variants=tuple(i for i, _ in groups.pop(Env(), [])))]
        for extra, found in groups.items():
            named = {(m.environment, s) for m, s in runs if m.id in {i for i, _ in found}}
            planned.append(
                replace(
                    cell,
                    id=sibling_id(cell.id.removesuffix(cuda), extra) + cuda,
                    variants=tuple(i for i, _ in found),
                    extra=extra,
                    sibling_of=cell.id,
                    source=found[0][1],
                    overrides=self._overrides(cell.pins, extra, sorted(named)),
                )
            )
        return [c for c in planned if c.variants]

    def _overrides(self, pins: Mapping[str, str], extra: Env, named: list[tuple[str, str]]) -> tuple[str, ...]:
        who = " and ".join(f"{source}'s environment {name!r}" for name, source in named)
        return tuple(
            f"{who} ({extra.describe()}) takes over from {self.matrix.describe(constraint)}: {text!r} is not installed there"
            for constraint, text in self.matrix.taken_over(pins, extra)
            if text not in extra.requires
        )

    def has_cuda(self, pins: Mapping[str, str]) -> bool:
        return any(m.device == "cuda" and m.runs_at(pins) for s in self.cases(pins) for m in s.members)


def plan_cells(matrix: Matrix, profile: str, catalog: Slices) -> list[Cell]:
    """The cells of one profile; a profile that plans none, or a cell whose requirements contradict, is a one-line error."""
    unresolved = [axis for axis, values in matrix.profile(profile).items() if any(v in SYMBOLIC for v in values)]
    if unresolved:  # a programming error more than a user's: every entry point resolves first
        msg = f"{matrix.path}: profiles.{profile}.{unresolved[0]} lists a symbolic version; plan bugmatrix.releases.tracking.resolve_matrix(...)'s matrix"
        raise BugmatrixError(msg)
    if profile in matrix.computed:
        return _computed_cells(matrix, profile, catalog)
    slices = catalog.slices(matrix)
    members = _Members(matrix, slices)
    rules = [r for r in matrix.file.exclude if r.profiles is None or profile in r.profiles]
    pin_sets = [p for case in slices for p in _slice_pins(matrix, profile, case)]
    pin_sets += [matrix.rebased(pins) for pins, profiles in matrix.include if profile in profiles]
    kept = [p for p in pin_sets if not any(r.matches(p) for r in rules)]
    if not kept:
        why = "every combination it asks for is excluded by an [[exclude]]" if pin_sets else "no case declares a variant"
        msg = f"{matrix.path}: profiles.{profile}: plans no cells ({why}); narrow the [[exclude]] rules or list other versions"
        raise BugmatrixError(msg)
    interpreter = matrix.interpreter
    cells = [Cell(cid, pins, (profile,), interpreter=interpreter) for cid, pins in {matrix.cell_id(p): p for p in kept}.items()]
    gpu = matrix.file.gpu_select  # a CPU cell matching every axis [gpu] lists gets a CUDA twin where one of its cases runs on CUDA
    twins = [c for c in cells if gpu and all(c.pins.get(a, v[0]) in v for a, v in gpu.items()) and members.has_cuda(c.pins)]
    cells += [Cell(matrix.cell_id(c.pins, "cuda"), c.pins, (profile,), "cuda", interpreter=interpreter) for c in twins]
    planned = [p for cell in cells for p in members.cells(cell)]
    check_contradictions(matrix, [(c.id, c.pins, c.extra, c.source) for c in planned if c.device == "cpu"])
    return sorted(planned, key=lambda c: _sort_key(matrix, c))  # stable: a sibling follows its cell


def recompute(matrix: Matrix, profile: str, catalog: Slices, reference: Reference) -> list[Choice]:
    """Every case's choice for a computed profile (``--compute P --write``); pass the matrix without ``latest``."""
    candidates = plan_cells(matrix, matrix.file.within[profile], catalog)
    return [choose(matrix, case, candidates, reference) for case in catalog.slices(matrix)]


def _computed_cells(matrix: Matrix, profile: str, catalog: Slices) -> list[Cell]:
    candidates = plan_cells(matrix, matrix.file.within[profile], catalog)
    by_id = {c.id: c for c in candidates}
    committed = committed_choices(matrix.computed[profile])
    ids: set[str] = set()
    for case in catalog.slices(matrix):
        chosen = committed.get(case.case)
        own = {m.id for m in case.members}
        if chosen is None or not all(i in by_id and own & set(by_id[i].variants) for i in chosen):
            chosen = choose(matrix, case, candidates).cells
        ids.update(chosen)
    cells = [replace(c, profiles=(profile,)) for c in candidates if (c.sibling_of or c.id).removesuffix("-cuda") in ids]
    if not cells:
        msg = f"{matrix.path}: profiles.{profile}: plans no cells (no case has a cell in profiles.{matrix.file.within[profile]}); list versions there"
        raise BugmatrixError(msg)
    return cells


def plan_all(matrix: Matrix, catalog: Slices) -> list[Cell]:
    """Every cell of every profile, each tagged with the profiles that include it; ``within`` relations checked."""
    planned = {profile: plan_cells(matrix, profile, catalog) for profile in matrix.profiles}
    for smaller, larger in matrix.file.within.items():
        outside = [c.id for c in planned[smaller] if c.id not in {o.id for o in planned[larger]}]
        if outside:
            more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
            msg = (
                f"{matrix.path}: profiles.{smaller}.within: cell {outside[0]}{more} of {smaller} is not planned in {larger}; "
                f"list its versions in profiles.{larger}, or remove within from profiles.{smaller}"
            )
            raise BugmatrixError(msg)
    cells: dict[str, Cell] = {}
    for cell in (c for profile_cells in planned.values() for c in profile_cells):
        cells[cell.id] = replace(cells[cell.id], profiles=(*cells[cell.id].profiles, *cell.profiles)) if cell.id in cells else cell
    return sorted(cells.values(), key=lambda c: _sort_key(matrix, c))


def override_notes(cells: Iterable[Cell]) -> list[str]:
    """Each constraint a case's environment takes over, once, with the number of (CPU) cells: what ``plan`` says."""
    counted = Counter(note for c in cells if c.device == "cpu" for note in c.overrides)
    return [f"{note} ({n} cell{'s' if n != 1 else ''})" for note, n in counted.items()]


def find_cell(cells: Iterable[Cell], name: str) -> Cell:
    """A cell by id, with a helpful error naming close matches."""
    cells = list(cells)
    if found := next((c for c in cells if c.id == name), None):
        return found
    close = [c.id for c in cells if name in c.id or c.id in name][:3]
    tags = Counter(p for c in cells for p in c.profiles)
    widest = f" -- --profile {tags.most_common(1)[0][0]}" if tags else ""
    hint = f"did you mean {', '.join(close)}?" if close else f"list them with: nox -s plan{widest}"
    msg = f"unknown cell {name!r}; {hint}"
    raise BugmatrixError(msg)


def plan_document(matrix: Matrix, profile: str, cells: list[Cell], resolution: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The plan as data (``bugmatrix.plan.cells/1``): what the report checks completeness against; ``resolution`` (the saved
    resolution's JSON) says what ``latest`` meant, for the report's tracking."""
    pinned = {axis for cell in cells for axis in cell.pins}
    listed = []
    for c in cells:
        sibling = {"environment": c.extra.to_json(), "sibling_of": c.sibling_of} if c.extra else {}
        sibling |= {"overrides": list(c.overrides)} if c.overrides else {}
        listed.append(
            {"id": c.id, "pins": dict(c.pins), "profiles": list(c.profiles), "device": c.device, "variants": list(c.variants), **sibling}
        )
    document = {
        "schema": PLAN_SCHEMA,
        "profile": profile,
        "axes": [{"name": name, "prefix": a.prefix} for name, a in matrix.axes.items() if name in pinned],
        "cells": listed,
    }
    return document if resolution is None else {**document, "resolution": resolution}
