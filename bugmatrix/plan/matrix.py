"""``matrix.toml``: read it, check it (:mod:`bugmatrix.documents.matrix`), and hand back the typed :class:`Matrix`.
No axis lives in code: an axis is an ``[axes.<name>]`` entry and nothing else (docs/matrix.md)."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from bugmatrix.cell.caseenv import Env
from bugmatrix.documents.matrix import SYMBOLIC, AxisTable, ConstraintTable, MatrixFile, explain
from bugmatrix.errors import BugmatrixError

__all__ = ["SYMBOLIC", "Matrix", "load_matrix", "parse_matrix"]


@dataclass(frozen=True)
class Matrix:
    """The validated ``matrix.toml``: its tables (``file``), with the axes and profiles the planner plans (``latest`` made
    concrete there once :mod:`bugmatrix.releases.tracking` resolves it, so read those two here, not from ``file``).
    """

    path: Path
    file: MatrixFile
    axes: Mapping[str, AxisTable]  # display order = file order
    profiles: Mapping[str, Mapping[str, tuple[str, ...]]]  # name -> axis -> its listed versions (the first profile: the default)
    cell_deadline_s: float | None = None  # [harness] cell_deadline_s, 0 as None (the tests session runs without one)

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

    @functools.cached_property
    def base(self) -> dict[str, str]:
        """``[base]``, in display order."""
        return {axis: self.file.base[axis] for axis in self.axes}

    @property
    def include(self) -> list[tuple[dict[str, str], tuple[str, ...]]]:
        """``[[include]]``: each added cell's pins (the held axes at base) and the profiles it is added to."""
        held = {a: self.base[a] for a in self.held_axes}
        return [
            (self.ordered({**held, **{a: v for a, v in table.items() if a != "profiles"}}), tuple(table.get("profiles", self.profiles)))
            for table in self.file.include
        ]

    @property
    def computed(self) -> dict[str, Path]:
        """profile -> the file of its committed choice (a computed profile), beside the matrix."""
        return {name: self.path.parent / str(table["computed"]) for name, table in self.file.profiles.items() if "computed" in table}

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
        for rule in self.file.base_when:
            result = rule.apply(result, self.base)
        return self.ordered(result)

    def effective(self, pins: Mapping[str, str]) -> dict[str, str]:
        """A cell's pins plus the base pin (or ``[[base_when]]`` stand-in) of every other axis: what constraints are judged at."""
        full = {**self.base, **pins}
        for rule in self.file.base_when:
            if rule.matches(full):
                full.update({axis: version for axis, version in rule.pins.items() if axis not in pins})
        return self.ordered(full)

    def cell_id(self, pins: Mapping[str, str], device: str = "cpu") -> str:
        """Readable, stable id: ``py311-torch2.5.1-pl2.0.3-tf4.30.2`` (+ ``-cuda``)."""
        parts = [self.axes[axis].id_part(version) for axis, version in self.ordered(pins).items()]
        return "-".join(parts) + ("-cuda" if device == "cuda" else "")

    def matching_constraints(self, pins: Mapping[str, str]) -> list[ConstraintTable]:
        """The constraints whose ``when`` holds at this cell's effective pins."""
        effective = self.effective(pins)
        return [c for c in self.file.constraints if c.matches(effective)]

    def describe(self, constraint: ConstraintTable) -> str:
        """``constraints[2] (when torch<2.3)``: how a contradiction names one of :attr:`file`'s constraints."""
        index = next(i for i, c in enumerate(self.file.constraints) if c is constraint)
        when = ", ".join(f"{axis}{spec}" for axis, spec in constraint.specifiers.items())
        return f"constraints[{index}] (when {when})"

    def providers(self, pins: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        """axis -> (distribution, module) for every pinned package axis, constraints applied."""
        chosen = {axis: next(iter(self.axes[axis].distributions.items())) for axis in self.package_axes if axis in pins}
        for constraint in self.matching_constraints(pins):
            for axis, dist in constraint.distribution.items():
                if axis in chosen:
                    chosen[axis] = (dist, self.axes[axis].distributions[dist])
        return chosen

    def taken_over(self, pins: Mapping[str, str], extra: Env) -> list[tuple[ConstraintTable, str]]:
        """The constraints' requirements on a distribution that a case's environment ``extra`` names: the case's own wins there."""
        owned = extra.distributions
        return [(c, r) for c in self.matching_constraints(pins) for r in c.requires if canonicalize_name(Requirement(r).name) in owned]

    def requirements_for(self, pins: Mapping[str, str], *, harness: bool = True, extra: Env | None = None) -> list[str]:
        """pip requirement strings that build this cell: pins, constraints (less :meth:`taken_over`), ``extra``'s, the harness's."""
        extra = extra or Env()
        pinned = [f"{dist}=={pins[axis]}" for axis, (dist, _) in self.providers(pins).items()]
        dropped = {r for _, r in self.taken_over(pins, extra)}
        ranges = [r for c in self.matching_constraints(pins) for r in c.requires if r not in dropped]
        return pinned + list(dict.fromkeys([*ranges, *extra.requires])) + (list(self.file.harness.requires) if harness else [])

    def import_modules(self, pins: Mapping[str, str]) -> list[str]:
        """The modules that must import in this cell (the pinned distributions' own, no fallback)."""
        return [module for _, module in self.providers(pins).values()]

    def axis_providers(self, pins: Mapping[str, str] | None = None) -> dict[str, list[tuple[str, str]]]:
        """axis -> (distribution, module) providers; for a cell only the one it pins, else all of them."""
        if pins is None:
            return {axis: list(self.axes[axis].distributions.items()) for axis in self.package_axes}
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


def parse_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Parsed TOML decoded by :class:`~bugmatrix.documents.matrix.MatrixFile`, as a :class:`Matrix`; a defect is one line."""
    try:
        file = msgspec.convert(data, MatrixFile)
    except msgspec.ValidationError as exc:
        msg = f"{path}: {explain(exc, data)}"
        raise BugmatrixError(msg) from None
    profiles = {name: {axis: tuple(v) for axis, v in file.listed(name).items()} for name in file.profiles}
    return Matrix(path, file, file.axes, profiles, float(file.harness.cell_deadline_s) or None)
