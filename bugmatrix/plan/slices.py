"""A case's slice: the cells it is planned in, and which of its variants run in each.

A case's cells cross the axes its variants span at a profile's versions (plus ``Case(versions=...)``), narrowed by
``Case(cross=...)``. A variant's requirement on an axis's distribution (``numpy<2``) says which cells it runs in; the
rest of its environment is a sibling beside them. Every mistake names the case file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from bugmatrix.cell.case import Case, Expect, Variant
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents.matrix import holds
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix import Matrix

__all__ = ["Member", "Slice", "case_slice", "source_of", "split_environment"]


@dataclass(frozen=True)
class Member:
    """One variant of a slice: where it runs (``when``: the cell's pins must satisfy it) and what its environment adds (``extra``)."""

    id: str
    device: str
    when: Mapping[str, SpecifierSet] = field(default_factory=dict)
    extra: Env = field(default_factory=Env)  # its environment beyond the cell's pins: a sibling where set
    expect: tuple[Expect, ...] = ()  # read by a computed profile where no result is committed
    axes: tuple[str, ...] = ()  # the axes it declares: it is read along these
    environment: str = ""  # the name its case gives that environment (the plan's notes say it)

    def runs_at(self, pins: Mapping[str, str]) -> bool:
        return holds(self.when, pins)

    def expected(self, pins: Mapping[str, str]) -> Outcome | None:
        """The outcome its first covering ``Expect`` declares at these pins, or None."""
        return next((e.outcome for e in self.expect if e.covers(pins, self.device)), None)


@dataclass(frozen=True)
class Slice:
    """What the planner needs of one case: the axes it crosses, its narrowing, its variants, and its file for errors."""

    case: str
    axes: tuple[str, ...]
    members: tuple[Member, ...]
    cross: Mapping[str, SpecifierSet] = field(default_factory=dict)
    source: str = ""
    versions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # its own releases, beyond the axes' lists

    def admits(self, pins: Mapping[str, str]) -> bool:
        """The cell is one this case's ``cross`` allows (an axis it narrows is pinned, at a version the narrowing holds)."""
        return holds(self.cross, pins)

    def own(self, axis: str, listed: Sequence[str]) -> tuple[str, ...]:
        """``listed`` (a profile's versions of an axis) with this case's own releases of it added."""
        return (*listed, *self.versions.get(axis, ()))


def case_slice(matrix: Matrix, case: Case, source: str) -> Slice:
    """The case's slice; an environment that pins an axis where it can never hold, or removes an axis, is one line naming ``source``."""
    spans = case.spans
    narrowing = case.narrowing
    outside = [axis for axis in narrowing if axis not in spans]
    if outside:
        msg = (
            f"{source}: cross names axis {outside[0]!r}, which none of the case's variants spans; "
            f"add it to their axes=, or narrow one of {', '.join(spans) or 'no axes'}"
        )
        raise BugmatrixError(msg)
    own = _own_versions(matrix, case, source)
    members = []
    for variant in case.variants:
        when, extra = split_environment(matrix, variant, spans, source, own)
        members.append(Member(variant.id, variant.device, when, extra, variant.expect, variant.axes, variant.environment))
    return Slice(case.id, spans, tuple(members), narrowing, source, own)


def _own_versions(matrix: Matrix, case: Case, source: str) -> dict[str, tuple[str, ...]]:
    """``Case(versions=...)`` checked against the matrix, less what the axis lists already (``latest`` may resolve to one)."""
    own, narrowing = {}, case.narrowing
    for axis, versions in case.versions.items():
        where = f"{source}: versions names axis {axis!r}"
        if axis not in matrix.package_axes:
            msg = f"{where}, which {matrix.path} does not declare; use one of {', '.join(matrix.package_axes)}"
            raise BugmatrixError(msg)
        if axis not in case.spans:
            msg = f"{where}, which none of the case's variants spans; add it to their axes=, or remove it from versions"
            raise BugmatrixError(msg)
        outside = [v for v in versions if axis in narrowing and not narrowing[axis].contains(v, prereleases=True)]
        if outside:
            msg = (
                f"{source}: versions.{axis} lists {outside[0]!r}, which its cross ({axis}{narrowing[axis]}) leaves out; remove one of them"
            )
            raise BugmatrixError(msg)
        own[axis] = tuple(v for v in versions if v not in matrix.axes[axis].versions)
    return own


def split_environment(
    matrix: Matrix,
    variant: Variant,
    spans: tuple[str, ...] | None = None,
    source: str = "",
    own: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[dict[str, SpecifierSet], Env]:
    """A variant's environment as the planner reads it: what it requires of an axis (where it runs) and the rest (its
    sibling). ``spans``: the axes its case's cells pin (default: the variant's own); ``own``: the case's own releases."""
    spans = variant.axes if spans is None else spans
    providers = {canonicalize_name(dist): axis for axis in matrix.package_axes for dist in matrix.axes[axis].distributions}
    when: dict[str, SpecifierSet] = {}
    extra = []
    where = f"{source or f'case {variant.case_id!r}'}: environment {variant.environment!r} of variant {variant.name!r}"
    for name in variant.env.absent:
        if canonicalize_name(name) in providers:
            axis = providers[canonicalize_name(name)]
            msg = f"{where} makes {name!r} absent, which provides axis {axis!r}; remove it from Env(absent=...): a cell installs the axes it pins"
            raise BugmatrixError(msg)
    for text in variant.env.requires:
        requirement = Requirement(text)
        axis = providers.get(canonicalize_name(requirement.name))
        if axis is None:
            extra.append(text)
            continue
        said = f"{where} requires {text!r}, a release of axis {axis!r}"
        if axis not in spans:
            msg = f"{said}, which the case does not span; add {axis!r} to its variants' axes= so its cells pin {axis}"
            raise BugmatrixError(msg)
        releases = (*matrix.axes[axis].versions, *(own or {}).get(axis, ()))
        if not any(requirement.specifier.contains(v, prereleases=True) for v in releases):
            msg = f"{said}, but no release in axes.{axis}.versions of {matrix.path} satisfies it; list one there"
            raise BugmatrixError(msg)
        when[axis] = when[axis] & requirement.specifier if axis in when else requirement.specifier
    return when, variant.env.but(extra)


def source_of(directory: Path | None, case: Case) -> str:
    """How errors name a case: its file where the catalogue knows its directory."""
    return str(directory / f"{case.id}.py") if directory is not None else f"case {case.id!r}"
