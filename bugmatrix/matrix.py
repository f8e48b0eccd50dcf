"""``matrix.toml``: the version axes, profiles, rules and install constraints.

Parsed with ``tomllib`` and validated strictly: any defect becomes a one-line
:class:`BugmatrixError` naming the file, the key and the value, and what to do.
Nothing about versions lives in code; this file and the cases' own
declarations are the only sources of a cell list.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bugmatrix.errors import BugmatrixError

__all__ = ["AXES", "PROFILES", "Constraint", "Matrix", "Rule", "load_matrix", "parse_matrix"]

AXES = ("python", "torch", "lightning", "transformers")
PROFILES = ("smoke", "nightly", "full")  # each a subset of the next
#: The distributions that may provide each axis (see constraints[].distribution).
DISTRIBUTIONS = {"torch": ("torch",), "lightning": ("lightning", "pytorch-lightning"), "transformers": ("transformers",)}
TOP_KEYS = {"schema", "base", "axes", "profiles", "exclude", "include", "constraints", "harness", "gpu"}


@dataclass(frozen=True)
class Rule:
    """An exclude rule: a cell matching every specifier is dropped."""

    when: Mapping[str, SpecifierSet]
    profiles: tuple[str, ...]

    def matches(self, pins: Mapping[str, str]) -> bool:
        return all(axis in pins and spec.contains(pins[axis], prereleases=True) for axis, spec in self.when.items())


@dataclass(frozen=True)
class Constraint:
    """Extra install requirements (and distribution names) for a version range."""

    when: Mapping[str, SpecifierSet]
    requires: tuple[str, ...]
    distribution: Mapping[str, str]
    why: str

    def matches(self, pins: Mapping[str, str]) -> bool:
        return all(axis in pins and spec.contains(pins[axis], prereleases=True) for axis, spec in self.when.items())


@dataclass(frozen=True)
class Matrix:
    """The validated contents of ``matrix.toml``."""

    path: Path
    base: Mapping[str, str]
    axes: Mapping[str, tuple[str, ...]]
    profiles: Mapping[str, Mapping[str, tuple[str, ...]]]
    exclude: tuple[Rule, ...]
    include: tuple[tuple[Mapping[str, str], tuple[str, ...]], ...]
    constraints: tuple[Constraint, ...]
    harness: tuple[str, ...]
    gpu_select: Mapping[str, tuple[str, ...]]
    gpu_runner: tuple[str, ...]


class _Checker:
    """Validation helpers that know the file name, so every error can name it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str, fix: str) -> BugmatrixError:
        return BugmatrixError(f"{self.path}: {key}: {problem}; {fix}")

    def table(self, data: Any, key: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(key, f"expected a table, got {type(data).__name__}", "see the comments in matrix.toml")
        if allowed is not None:
            for name in data:
                if name not in allowed:
                    raise self.fail(f"{key}.{name}" if key else name, "unknown key", f"use one of {', '.join(sorted(allowed))}")
        return data

    def version(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"{value!r} is not a version string", 'write it quoted, e.g. "2.4.1"')
        try:
            Version(value)
        except InvalidVersion:
            raise self.fail(key, f"{value!r} is not a valid version", 'use a released version such as "2.4.1"') from None
        return value

    def versions(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of versions, got {value!r}", 'write e.g. ["2.4.1", "2.5.1"]')
        if not value:
            raise self.fail(key, "empty list", "list at least one version, or remove the key")
        found = tuple(self.version(v, f"{key}[{i}]") for i, v in enumerate(value))
        duplicates = sorted({v for v in found if found.count(v) > 1})
        if duplicates:
            raise self.fail(key, f"duplicate version(s) {', '.join(duplicates)}", "list each version once")
        return found

    def specifiers(self, data: Any, key: str) -> dict[str, SpecifierSet]:
        table = self.table(data, key, set(AXES))
        specs = {}
        for axis, text in table.items():
            try:
                specs[axis] = SpecifierSet(str(text))
            except InvalidSpecifier:
                raise self.fail(f"{key}.{axis}", f"{text!r} is not a version specifier", 'write e.g. "<2.1" or ">=2.3,<2.6"') from None
        if not specs:
            raise self.fail(key, "empty condition", 'name at least one axis, e.g. { torch = "<2.3" }')
        return specs

    def requirement(self, value: Any, key: str) -> str:
        try:
            Requirement(str(value))
        except InvalidRequirement:
            raise self.fail(key, f"{value!r} is not a requirement", 'write it as pip would take it, e.g. "numpy<2"') from None
        return str(value)

    def profile_names(self, value: Any, key: str) -> tuple[str, ...]:
        names = tuple(value) if isinstance(value, list) else ()
        bad = [n for n in names if n not in PROFILES] if names else [value]
        if bad:
            raise self.fail(key, f"{bad[0]!r} is not a profile", f"use a list of {', '.join(PROFILES)}")
        return names


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
    """Validate parsed TOML; every rule of the file format is enforced here."""
    check = _Checker(path)
    check.table(data, "", TOP_KEYS)
    if data.get("schema") != 1:
        raise check.fail("schema", f"{data.get('schema')!r} is not a known matrix schema", "set schema = 1")

    axes_table = check.table(data.get("axes", {}), "axes", set(AXES))
    axes = {axis: check.versions(axes_table.get(axis), f"axes.{axis}") for axis in AXES}

    base_table = check.table(data.get("base", {}), "base", set(AXES))
    base = {}
    for axis in AXES:
        if axis not in base_table:
            raise check.fail(f"base.{axis}", "missing", "pin the version used where a case does not span this axis")
        base[axis] = check.version(base_table[axis], f"base.{axis}")
        if base[axis] not in axes[axis]:
            raise check.fail(f"base.{axis}", f"{base[axis]!r} is not in axes.{axis}", "add it to the axis or pin a listed version")

    profiles_table = check.table(data.get("profiles", {}), "profiles", set(PROFILES))
    profiles: dict[str, dict[str, tuple[str, ...]]] = {}
    for name in PROFILES:
        if name not in profiles_table:
            raise check.fail(f"profiles.{name}", "missing", f"define all of {', '.join(PROFILES)}")
        table = check.table(profiles_table[name], f"profiles.{name}", set(AXES))
        profiles[name] = {}
        for axis, values in table.items():
            key = f"profiles.{name}.{axis}"
            listed = check.versions(values, key)
            unknown = [v for v in listed if v not in axes[axis]]
            if unknown:
                raise check.fail(key, f"{unknown[0]!r} is not in axes.{axis}", f"add it to axes.{axis} or remove it")
            profiles[name][axis] = listed
    for smaller, larger in itertools.pairwise(PROFILES):
        for axis, values in profiles[smaller].items():
            missing = [v for v in values if v not in profiles[larger].get(axis, (base[axis],))]
            if missing:
                raise check.fail(
                    f"profiles.{smaller}.{axis}", f"{missing[0]!r} is not in profiles.{larger}", f"{smaller} must be a subset of {larger}"
                )

    exclude = []
    for i, rule in enumerate(_array(check, data.get("exclude", []), "exclude")):
        key = f"exclude[{i}]"
        table = check.table(rule, key, {"when", "profiles"})
        exclude.append(
            Rule(
                check.specifiers(table.get("when", {}), f"{key}.when"),
                check.profile_names(table.get("profiles", list(PROFILES)), f"{key}.profiles"),
            )
        )

    include = []
    for i, cell in enumerate(_array(check, data.get("include", []), "include")):
        key = f"include[{i}]"
        table = check.table(cell, key, {*AXES, "profiles"})
        pins = {a: check.version(v, f"{key}.{a}") for a, v in table.items() if a != "profiles"}
        for axis, version in pins.items():
            if version not in axes[axis]:
                raise check.fail(f"{key}.{axis}", f"{version!r} is not in axes.{axis}", "an include can only combine listed versions")
        if "torch" not in pins:
            raise check.fail(key, "no torch pin", 'every cell needs torch: add torch = "..."')
        include.append((pins, check.profile_names(table.get("profiles", list(PROFILES)), f"{key}.profiles")))

    constraints = []
    for i, entry in enumerate(_array(check, data.get("constraints", []), "constraints")):
        key = f"constraints[{i}]"
        table = check.table(entry, key, {"when", "requires", "distribution", "why"})
        dist = check.table(table.get("distribution", {}), f"{key}.distribution", set(AXES) - {"python"})
        for axis, name in dist.items():
            if name not in DISTRIBUTIONS.get(axis, ()):
                raise check.fail(
                    f"{key}.distribution.{axis}",
                    f"{name!r} is not a distribution of {axis}",
                    f"use one of {', '.join(DISTRIBUTIONS[axis])}",
                )
        requires = tuple(check.requirement(r, f"{key}.requires") for r in _string_list(check, table.get("requires", []), f"{key}.requires"))
        constraints.append(Constraint(check.specifiers(table.get("when", {}), f"{key}.when"), requires, dist, str(table.get("why", ""))))

    harness = tuple(
        check.requirement(r, "harness.requires")
        for r in _string_list(check, check.table(data.get("harness", {}), "harness", {"requires"}).get("requires", []), "harness.requires")
    )
    gpu = check.table(data.get("gpu", {}), "gpu", {"torch", "lightning", "transformers", "runner"})
    gpu_select = {axis: check.versions(gpu[axis], f"gpu.{axis}") for axis in AXES if axis in gpu}
    for axis, values in gpu_select.items():
        unknown = [v for v in values if v not in axes[axis]]
        if unknown:
            raise check.fail(f"gpu.{axis}", f"{unknown[0]!r} is not in axes.{axis}", "list versions the matrix has, or no GPU cell matches")
    runner = gpu.get("runner", ["self-hosted", "gpu"])
    if not isinstance(runner, list) or not runner or not all(isinstance(r, str) for r in runner):
        raise check.fail("gpu.runner", f"{runner!r} is not a list of runner labels", 'write e.g. ["self-hosted", "gpu"]')
    return Matrix(path, base, axes, profiles, tuple(exclude), tuple(include), tuple(constraints), harness, gpu_select, tuple(runner))


def _string_list(check: _Checker, value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise check.fail(key, f"{value!r} is not a list of requirements", 'write e.g. ["numpy<2"]')
    return value


def _array(check: _Checker, value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise check.fail(key, f"expected an array of tables, got {type(value).__name__}", f"write [[{key}]] blocks")
    return value
