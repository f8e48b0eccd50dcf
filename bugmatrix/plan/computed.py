"""A computed profile (``[profiles.smoke] computed = "smoke.json"``): the fewest cells that show every case both ways.

Each case picks its own cells among the ``within`` profile's, from the committed reference's outcomes, else its
``expect=`` rules: a (reproduced, fixed) pair where most of its variants flip along exactly one declared axis (then the
fewest axes apart, the oldest reproduced, the fixed nearest base); else one cell showing both, or its one outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents.run import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.plan.matrix import Matrix
from bugmatrix.plan.slices import Slice

__all__ = ["COMPUTED_SCHEMA", "Choice", "choose", "committed_choices", "reference_outcomes", "write_choices"]

COMPUTED_SCHEMA = "bugmatrix.computed/1"
#: (variant id, cell id) -> the outcome the committed reference recorded.
Reference = Mapping[tuple[str, str], Outcome]


class _Chosen(msgspec.Struct):
    cells: list[str]
    shows: str = ""
    source: str = msgspec.field(default="", name="from")


class _Committed(msgspec.Struct):
    schema: Literal["bugmatrix.computed/1"]
    cases: dict[str, _Chosen]
    profile: str = ""
    within: str = ""
    written_by: str = ""


class CellLike(Protocol):
    """What choosing needs of a planned cell (:class:`bugmatrix.plan.cells.Cell`: the planner imports this module)."""

    id: str
    pins: Mapping[str, str]
    device: str
    variants: tuple[str, ...]
    sibling_of: str


@dataclass(frozen=True)
class Choice:
    """One case's cells in a computed profile, what they show, and whether that comes from the reference or from ``expect=``."""

    case: str
    cells: tuple[str, ...]
    shows: str
    source: str  # "reference", "expect", or "reference and expect"


def _at_base(matrix: Matrix, cell: CellLike) -> int:
    return sum(1 for axis, version in cell.pins.items() if matrix.base.get(axis) == version)


def choose(matrix: Matrix, case: Slice, candidates: Sequence[CellLike], reference: Reference = {}) -> Choice:  # noqa: B006 - read only
    """The case's cells among ``candidates`` (CPU cells of the larger profile); see the module docstring for the rule."""
    members = [m for m in case.members if m.device == "cpu"]
    ids = {m.id for m in members}
    ran: dict[str, dict[str, str]] = {}  # cell id -> its variants of the case -> where each ran (the cell, or a sibling of it)
    home: dict[str, CellLike] = {}  # cell id -> the cell (a sibling stands in, under its cell's id, where the cell runs nothing)
    for c in (c for c in candidates if c.device == "cpu" and ids & set(c.variants)):
        key = c.sibling_of or c.id
        ran.setdefault(key, {}).update({variant: c.id for variant in ids & set(c.variants)})
        if key not in home or not c.sibling_of:
            home[key] = replace(c, id=key, sibling_of="") if c.sibling_of else c  # type: ignore[type-var]
    cells = sorted(home.values(), key=lambda c: matrix.release_order(c.pins))
    if not cells:
        return Choice(case.case, (), "no cell of this profile runs it", "expect")
    seen: dict[tuple[str, str], Outcome | None] = {}
    origin: dict[str, set[str]] = {}  # cell id -> where its outcomes come from
    for cell in cells:
        for member in members:
            if member.id in ran[cell.id]:
                found = reference.get((member.id, ran[cell.id][member.id]))
                origin.setdefault(cell.id, set()).add("reference" if found is not None else "expect")
                seen[member.id, cell.id] = found if found is not None else member.expected(cell.pins)

    axes = {m.id: m.axes for m in members}

    def shows(cell: CellLike, outcome: Outcome) -> list[str]:
        return [m.id for m in members if seen.get((m.id, cell.id)) is outcome]

    def source(*chosen: CellLike) -> str:
        used = set().union(*(origin.get(c.id, set()) for c in chosen))
        return " and ".join(s for s in ("reference", "expect") if s in used)

    reproduced = [c for c in cells if shows(c, Outcome.REPRODUCED)]
    fixed = [c for c in cells if shows(c, Outcome.FIXED)]

    def near_base(listed: list[CellLike]) -> CellLike:
        return min(listed, key=lambda c: (-_at_base(matrix, c), matrix.release_order(c.pins)))

    if not reproduced or not fixed:
        outcome = Outcome.REPRODUCED if reproduced else Outcome.FIXED
        one = near_base(reproduced or fixed or cells)
        what = f"{shows(one, outcome)[0]} {outcome.value}" if reproduced or fixed else "no reproduced or fixed outcome"
        return Choice(case.case, (one.id,), f"{what} in {one.id} (its only outcome)", source(one))

    def flips(r: CellLike, f: CellLike) -> set[str]:
        """The variants reproduced in r and fixed in f that change along exactly one of their declared axes between them."""
        both = set(shows(r, Outcome.REPRODUCED)) & set(shows(f, Outcome.FIXED))
        return {v for v in both if sum(1 for a in axes[v] if r.pins.get(a) != f.pins.get(a)) == 1}

    pairs = [(r, f, flips(r, f)) for r in reproduced for f in fixed if r is not f]
    crossing = max((len(both) for _, _, both in pairs), default=0)
    single = [c for c in reproduced if c in fixed]
    if crossing == 0 and single:
        one = near_base(single)
        both = f"{shows(one, Outcome.REPRODUCED)[0]} reproduced and {shows(one, Outcome.FIXED)[0]} fixed in {one.id}"
        return Choice(case.case, (one.id,), both, source(one))

    def rank(pair: tuple[CellLike, CellLike, set[str]]) -> tuple:
        r, f, both = pair
        differ = sum(1 for a in matrix.axes if r.pins.get(a) != f.pins.get(a))
        newest = tuple(tuple(-part for part in v.release) for v in matrix.release_order(f.pins))
        return (-len(both), differ, matrix.release_order(r.pins), -_at_base(matrix, f), newest)

    r, f, both = min(pairs, key=rank)
    variant = sorted(both, key=[m.id for m in members].index)[0] if both else shows(r, Outcome.REPRODUCED)[0]
    tail = f", fixed in {f.id}" if both else f"; {shows(f, Outcome.FIXED)[0]} fixed in {f.id}"
    return Choice(case.case, (r.id, f.id), f"{variant} reproduced in {r.id}{tail}", source(r, f))


def reference_outcomes(runs: Path) -> dict[tuple[str, str], Outcome]:
    """Every (variant, cell) outcome of a directory of run files (the committed reference: ``reports/runs``); none where it is absent."""
    if not runs.is_dir():
        return {}
    return {(result.id, run.cell): result.outcome for run in load_run_dir(runs) for result in run.results}


def committed_choices(path: Path) -> dict[str, tuple[str, ...]]:
    """case -> its committed cells; an absent file holds none (every case is chosen from its ``expect=`` rules)."""
    if not path.is_file():
        return {}
    try:
        document = msgspec.json.decode(path.read_bytes(), type=_Committed)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        msg = f"{path}: not a computed profile's cell list ({exc}); recompute it: python -m bugmatrix plan --compute <profile> --write"
        raise BugmatrixError(msg) from None
    return {case: tuple(entry.cells) for case, entry in document.cases.items()}


def write_choices(path: Path, profile: str, within: str, choices: Iterable[Choice]) -> None:
    """The committed choice, all or nothing (what ``plan --compute P --write`` writes and the check compares)."""
    written_by = f"python -m bugmatrix plan --compute {profile} --write (docs/matrix.md, Profiles); do not edit by hand"
    cases = {c.case: _Chosen(list(c.cells), c.shows, c.source) for c in choices}
    write_json_atomic(path, msgspec.to_builtins(_Committed(COMPUTED_SCHEMA, cases, profile, within, written_by)))
