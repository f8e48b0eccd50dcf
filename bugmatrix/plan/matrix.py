"""``matrix.toml``: read it, check it (:mod:`bugmatrix.documents.matrix`), and hand back the typed :class:`Matrix`.

Nothing about versions, axes or profiles lives in code: an axis (numpy, accelerate, ...) is an ``[axes.<name>]``
entry and nothing else. docs/matrix.md describes the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from bugmatrix.cell.caseenv import Env
from bugmatrix.documents.matrix import DEFAULT_REUSE_MAX_AGE_DAYS, SCHEMA, SYMBOLIC, MatrixFile, explain
from bugmatrix.errors import BugmatrixError

__all__ = [
    "DEFAULT_REUSE_MAX_AGE_DAYS",
    "SCHEMA",
    "SYMBOLIC",
    "Axis",
    "BaseWhen",
    "Constraint",
    "Matrix",
    "Rule",
    "holds",
    "load_matrix",
    "parse_matrix",
]


@dataclass(frozen=True)
class Axis:
    """One axis: its releases, its cell-id prefix, and (distribution, import module) pairs, the default first."""

    name: str
    prefix: str
    versions: tuple[str, ...]
    distributions: tuple[tuple[str, str], ...]
    every_cell: bool = False
    device_runtime: bool = False

    @property
    def is_interpreter(self) -> bool:
        """The interpreter is the one axis no distribution provides."""
        return not self.distributions

    def id_part(self, version: str) -> str:
        """``torch2.5.1``; the interpreter drops its dots (``py311``)."""
        return f"{self.prefix}{version.replace('.', '') if self.is_interpreter else version}"


def holds(when: Mapping[str, SpecifierSet], pins: Mapping[str, str]) -> bool:
    """Every axis ``when`` names is pinned at a version its specifier holds."""
    return all(axis in pins and spec.contains(pins[axis], prereleases=True) for axis, spec in when.items())


@dataclass(frozen=True)
class _Conditional:
    when: Mapping[str, SpecifierSet]

    def matches(self, pins: Mapping[str, str]) -> bool:
        return holds(self.when, pins)


@dataclass(frozen=True)
class Rule(_Conditional):
    """An exclude rule: a cell matching every specifier is dropped."""

    profiles: tuple[str, ...]


@dataclass(frozen=True)
class BaseWhen(_Conditional):
    """``[[base_when]]``: base pins that stand in where the usual base cannot exist (torch 2.15.0 has no cp310 wheel)."""

    pins: Mapping[str, str]
    why: str

    def apply(self, pins: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with every axis that is held at base (not spanned) replaced, when ``when`` matches."""
        if not self.matches(pins):
            return dict(pins)
        return {a: self.pins[a] if a in self.pins and v == base.get(a) else v for a, v in pins.items()}


@dataclass(frozen=True)
class Constraint(_Conditional):
    """Extra install requirements (and distribution names) for a version range of a cell's effective pins."""

    requires: tuple[str, ...]
    distribution: Mapping[str, str]
    why: str
    key: str = field(default="constraints", compare=False)  # "constraints[2]": how errors name this entry

    def describe(self) -> str:
        """``constraints[2] (when torch<2.3)``: how a contradiction names this entry."""
        when = ", ".join(f"{axis}{spec}" for axis, spec in self.when.items())
        return f"{self.key} (when {when})"


@dataclass(frozen=True)
class Matrix:
    """The validated contents of ``matrix.toml``."""

    path: Path
    axes: Mapping[str, Axis]  # display order = file order
    base: Mapping[str, str]
    profiles: Mapping[str, Mapping[str, tuple[str, ...]]]  # name -> axis -> versions, in file order (the first is the default)
    exclude: tuple[Rule, ...]
    include: tuple[tuple[Mapping[str, str], tuple[str, ...]], ...]
    constraints: tuple[Constraint, ...]
    harness: tuple[str, ...]
    gpu_select: Mapping[str, tuple[str, ...]]
    gpu_runner: tuple[str, ...]
    base_when: tuple[BaseWhen, ...] = ()
    within: Mapping[str, str] = field(default_factory=dict)  # profile -> the profile whose cells it must be a subset of
    reuse_max_age_days: int = DEFAULT_REUSE_MAX_AGE_DAYS  # results older than this are re-observed (bugmatrix/run/reuse.py)
    computed: Mapping[str, Path] = field(default_factory=dict)  # profile -> the file of its committed choice (a computed profile)
    refuse_source_builds: bool = False  # no wheel for a cell: its install failure, never a build
    cell_deadline_s: float | None = None  # what still runs after this is killed and recorded timeout

    @property
    def interpreter(self) -> str:
        """The interpreter axis: the one no distribution provides."""
        return next(name for name, axis in self.axes.items() if axis.is_interpreter)

    @property
    def package_axes(self) -> tuple[str, ...]:
        """Every axis but the interpreter, in display order."""
        return tuple(name for name, axis in self.axes.items() if not axis.is_interpreter)

    @property
    def held_axes(self) -> tuple[str, ...]:
        """The axes every cell installs whether or not its variants span them: the interpreter and every ``every_cell`` axis."""
        return tuple(name for name, axis in self.axes.items() if axis.is_interpreter or axis.every_cell)

    @property
    def device_runtime(self) -> str | None:
        """The axis whose module says whether there is a GPU and which CUDA (``device_runtime = true``), if any."""
        return next((name for name, axis in self.axes.items() if axis.device_runtime), None)

    @property
    def default_profile(self) -> str:
        """The first declared profile: what ``nox`` alone and ``plan`` without ``--profile`` mean."""
        return next(iter(self.profiles))

    def profile(self, name: str) -> Mapping[str, tuple[str, ...]]:
        """A profile's versions per axis; an undeclared name is a one-line error listing the declared ones."""
        if name not in self.profiles:
            msg = (
                f"unknown profile {name!r}; use one of {', '.join(self.profiles)} (declared in {self.path}), or add [profiles.{name}] there"
            )
            raise BugmatrixError(msg)
        return self.profiles[name]

    def ordered(self, pins: Mapping[str, str]) -> dict[str, str]:
        """Pins in display order (the order of ``[axes]``)."""
        return {axis: pins[axis] for axis in self.axes if axis in pins}

    def release_order(self, pins: Mapping[str, str]) -> tuple[Version, ...]:
        """Pins as releases in display order (an axis not pinned first): how cells are sorted."""
        return tuple(Version(pins.get(axis, "0")) for axis in self.axes)

    def rebased(self, pins: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with ``[[base_when]]`` applied: base-held axes swapped where the base cannot exist."""
        result = dict(pins)
        for rule in self.base_when:
            result = rule.apply(result, self.base)
        return self.ordered(result)

    def effective(self, pins: Mapping[str, str]) -> dict[str, str]:
        """A cell's pins plus the base pin (or ``[[base_when]]`` stand-in) of every other axis: what constraints are judged at."""
        full = {**self.base, **pins}
        for rule in self.base_when:
            if rule.matches(full):
                full.update({axis: version for axis, version in rule.pins.items() if axis not in pins})
        return self.ordered(full)

    def cell_id(self, pins: Mapping[str, str], device: str = "cpu") -> str:
        """Readable, stable id: ``py311-torch2.5.1-pl2.0.3-tf4.30.2`` (+ ``-cuda``)."""
        parts = [self.axes[axis].id_part(version) for axis, version in self.ordered(pins).items()]
        return "-".join(parts) + ("-cuda" if device == "cuda" else "")

    def matching_constraints(self, pins: Mapping[str, str]) -> list[Constraint]:
        """The constraints whose ``when`` holds at this cell's effective pins."""
        effective = self.effective(pins)
        return [c for c in self.constraints if c.matches(effective)]

    def providers(self, pins: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        """axis -> (distribution, module) for every pinned package axis, constraints applied."""
        chosen = {axis: self.axes[axis].distributions[0] for axis in self.package_axes if axis in pins}
        for constraint in self.matching_constraints(pins):
            for axis, dist in constraint.distribution.items():
                if axis in chosen:
                    chosen[axis] = next(p for p in self.axes[axis].distributions if p[0] == dist)
        return chosen

    def taken_over(self, pins: Mapping[str, str], extra: Env) -> list[tuple[Constraint, str]]:
        """The constraints' requirements on a distribution that a case's environment ``extra`` names: the case's own wins there."""
        owned = extra.distributions
        return [(c, r) for c in self.matching_constraints(pins) for r in c.requires if canonicalize_name(Requirement(r).name) in owned]

    def requirements_for(self, pins: Mapping[str, str], *, harness: bool = True, extra: Env | None = None) -> list[str]:
        """pip requirement strings that build this cell: pins, constraints (less :meth:`taken_over`), ``extra``'s, the harness's."""
        extra = extra or Env()
        pinned = [f"{dist}=={pins[axis]}" for axis, (dist, _) in self.providers(pins).items()]
        dropped = {r for _, r in self.taken_over(pins, extra)}
        ranges = [r for c in self.matching_constraints(pins) for r in c.requires if r not in dropped]
        return pinned + list(dict.fromkeys([*ranges, *extra.requires])) + (list(self.harness) if harness else [])

    def import_modules(self, pins: Mapping[str, str]) -> list[str]:
        """The modules that must import in this cell (the pinned distributions' own, no fallback)."""
        return [module for _, module in self.providers(pins).values()]

    def axis_providers(self, pins: Mapping[str, str] | None = None) -> dict[str, list[tuple[str, str]]]:
        """axis -> (distribution, module) providers; for a cell only the one it pins, else all of them."""
        if pins is None:
            return {axis: list(self.axes[axis].distributions) for axis in self.package_axes}
        return {axis: [provider] for axis, provider in self.providers(pins).items()}

    def axis_spec(self, pins: Mapping[str, str] | None = None) -> dict[str, Any]:
        """What a cell's plugin needs (``--bugmatrix-axis-spec``, :mod:`bugmatrix.cell.axes`): the providers and the device runtime."""
        return {"axes": self.axis_providers(pins), "device_runtime": self.device_runtime}


def load_matrix(path: Path) -> Matrix:
    """Read and validate a matrix file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{path}: cannot read the matrix ({exc.strerror}); run from the repository root or pass --matrix"
        raise BugmatrixError(msg) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: not valid TOML ({exc}); fix the syntax at that line"
        raise BugmatrixError(msg) from exc
    return parse_matrix(data, path)


def _when(table: Mapping[str, str]) -> dict[str, SpecifierSet]:
    return {axis: SpecifierSet(text) for axis, text in table.items()}


def parse_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Parsed TOML decoded by :class:`~bugmatrix.documents.matrix.MatrixFile`, as a :class:`Matrix`; a defect is one line."""
    try:
        file = msgspec.convert(data, MatrixFile)
    except msgspec.ValidationError as exc:
        msg = f"{path}: {explain(exc, data)}"
        raise BugmatrixError(msg) from None
    axes = {
        name: Axis(name, a.prefix, tuple(a.versions), tuple(a.distributions.items()), a.every_cell, a.device_runtime)
        for name, a in file.axes.items()
    }
    base = {axis: file.base[axis] for axis in axes}
    held = [name for name, axis in axes.items() if axis.is_interpreter or axis.every_cell]
    include = []
    for table in file.include:
        full = {**{a: base[a] for a in held}, **{a: v for a, v in table.items() if a != "profiles"}}
        include.append(({a: str(full[a]) for a in axes if a in full}, tuple(table.get("profiles", file.profiles))))
    every = tuple(file.profiles)
    return Matrix(
        path,
        axes,
        base,
        {name: {axis: tuple(v) for axis, v in file.listed(name).items()} for name in file.profiles},
        tuple(Rule(_when(r.when), tuple(every if r.profiles is None else r.profiles)) for r in file.exclude),
        tuple(include),
        tuple(
            Constraint(_when(c.when), tuple(c.requires), c.distribution, c.why, key=f"constraints[{i}]")
            for i, c in enumerate(file.constraints)
        ),
        tuple(file.harness.requires),
        {axis: tuple(file.gpu[axis]) for axis in axes if axis in file.gpu},
        tuple(file.runner),
        tuple(BaseWhen(_when(r.when), r.pins, r.why) for r in file.base_when),
        {name: str(table["within"]) for name, table in file.profiles.items() if "within" in table},
        file.reuse.max_age_days,
        {name: path.parent / str(table["computed"]) for name, table in file.profiles.items() if "computed" in table},
        file.harness.source_builds == "refuse",
        float(file.harness.cell_deadline_s) or None,
    )
