"""Contradictions between what a cell pins and what the constraints add, found when the plan is made, not at night.

Where two requirements of a cell (an axis pin, a constraint's, a case environment's) name one distribution and no
version satisfies both, the plan is refused in one line naming both. A conjunction of PEP 440 specifiers holds
somewhere iff it holds at a version its bounds name or just beside one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bugmatrix.cell.caseenv import Env
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix import Matrix

__all__ = ["Demand", "check_contradictions", "contradiction", "satisfiable"]

#: Far enough past any real release component to sit between two neighbouring versions.
_GAP = 999999


@dataclass(frozen=True)
class Demand:
    """One requirement on a distribution and the matrix entry it comes from (``axes.numpy pin``, ``constraints[2] (when ...)``)."""

    distribution: str
    specifier: SpecifierSet
    text: str
    source: str


def _candidates(specifiers: Iterable[Specifier]) -> list[Version]:
    """Every version a bound names, and one just above and just below it: where a conjunction of bounds can first hold."""
    bounds = []
    for spec in specifiers:
        text = spec.version.removesuffix(".*")
        try:
            bounds.append(Version(text))
        except InvalidVersion:
            continue  # '===' with an arbitrary string: tried as itself below
    width = max((len(b.release) for b in bounds), default=1) + 2
    found = {Version("0"), Version(str(_GAP))}
    for bound in bounds:
        release = list(bound.release)
        found.add(bound)
        found.add(Version(".".join(map(str, [*release, *[0] * (width - len(release) - 1), 1]))))
        nonzero = max((i for i, part in enumerate(release) if part), default=None)
        if nonzero is not None:
            below = [*release[:nonzero], release[nonzero] - 1]
            found.add(Version(".".join(map(str, [*below, *[_GAP] * (width - len(below))]))))
    return sorted(found)


def satisfiable(specifiers: Sequence[SpecifierSet]) -> bool:
    """Whether some version satisfies every one of ``specifiers`` (pre-releases admitted: a pin may name one)."""
    joined = [spec for specs in specifiers for spec in specs]
    arbitrary = [s.version for s in joined if s.operator == "==="]
    candidates: list[Version | str] = [*_candidates(joined), *arbitrary]
    return any(all(specs.contains(str(v), prereleases=True) for specs in specifiers) for v in candidates)


#: How a demand from a case environment's requirements is named (``Demand.source``).
ENVIRONMENT = "the case's environment requires"


def _demands(matrix: Matrix, pins: Mapping[str, str], extra: Env | None = None) -> list[Demand]:
    """The cell's requirements, each with its entry (markers evaluated for its interpreter); ``extra``: a case environment's."""
    extra = extra or Env()
    python = pins.get(matrix.interpreter, matrix.base[matrix.interpreter])
    dropped = {text for _, text in matrix.taken_over(pins, extra)}
    sources = [(f"{distribution}=={pins[axis]}", f"axes.{axis} pin") for axis, (distribution, _) in matrix.providers(pins).items()]
    sources += [(text, matrix.describe(c)) for c in matrix.matching_constraints(pins) for text in c.requires if text not in dropped]
    sources += [(text, ENVIRONMENT) for text in extra.requires]
    interpreter = {"python_version": python, "python_full_version": f"{python}.0"}
    demands = []
    for text, source in sources:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(interpreter):
            demands.append(Demand(canonicalize_name(requirement.name), requirement.specifier, text, source))
    return demands


def contradiction(matrix: Matrix, pins: Mapping[str, str], extra: Env | None = None) -> tuple[Demand, Demand] | None:
    """The first two requirements of this cell that no version satisfies together, or None."""
    by_name: dict[str, list[Demand]] = {}
    for demand in _demands(matrix, pins, extra):
        by_name.setdefault(demand.distribution, []).append(demand)
    for demands in by_name.values():
        if len(demands) > 1 and not satisfiable([d.specifier for d in demands]):
            pairs = (pair for pair in itertools.combinations(demands, 2) if not satisfiable([d.specifier for d in pair]))
            return next(pairs, (demands[0], demands[-1]))  # every pair agrees, all of them do not: name the ends
    return None


def check_contradictions(matrix: Matrix, cells: Iterable[tuple[str, Mapping[str, str], Env, str]]) -> None:
    """Refuse the plan when any cell's ``(id, pins, extra, source)`` requirements contradict (one line: both entries, the cell, the fixes)."""
    found = [(cell_id, pair, source) for cell_id, pins, extra, source in cells if (pair := contradiction(matrix, pins, extra)) is not None]
    if not found:
        return
    cell_id, (first, second), source = found[0]
    more = f" (and {len(found) - 1} more cells)" if len(found) > 1 else ""
    if ENVIRONMENT in (first.source, second.source):
        mine, theirs = (first, second) if first.source == ENVIRONMENT else (second, first)
        said = "its own" if theirs.source == ENVIRONMENT else f"{theirs.source} of {matrix.path}:"
        msg = (
            f"{source or 'a case'}: {mine.source} {mine.text!r}, which contradicts {said} {theirs.text!r} in cell {cell_id}{more}; "
            "no version satisfies both: fix the Env(requires=...)"
        )
        raise BugmatrixError(msg)
    msg = (
        f"{matrix.path}: {second.source}: {second.text!r} contradicts {first.source}: {first.text!r} "
        f"in cell {cell_id}{more}; neither wins: narrow the constraint's when, drop the requirement, "
        "or [[exclude]] that combination"
    )
    raise BugmatrixError(msg)
