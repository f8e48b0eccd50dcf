"""``matrix.toml``: the axis registry, profiles, rules and install constraints.

Parsed with ``tomllib`` and validated strictly: any defect becomes a one-line
:class:`BugmatrixError` naming the file, the key and the value, and what to do.
Nothing about versions, axes or profiles lives in code: each ``[axes.<name>]``
table says an axis's releases, the prefix of its part of a cell id, the
distributions that provide it with the module a cell must import for each,
and its role where it has one (``every_cell``: installed in every cell, at its
base pin where no variant spans it; ``device_runtime``: the axis whose module
answers "is there a GPU, which CUDA"). The interpreter is the one axis without
distributions. Profiles are any ``[profiles.<name>]`` tables, the first one
the default; ``within = "<profile>"`` declares that one profile's cells are a
subset of another's. Adding an axis (numpy, accelerate, ...) is an entry here
and nothing else.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

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
    "load_matrix",
    "parse_matrix",
]

SCHEMA = 2
#: Profile values resolved by the registry when a plan is made (``bugmatrix.releases.tracking``); the value says if pre-releases count.
SYMBOLIC = {"latest": False, "latest-pre": True}
TOP_KEYS = {"schema", "base", "base_when", "axes", "profiles", "exclude", "include", "constraints", "harness", "gpu", "reuse"}
AXIS_KEYS = {"versions", "prefix", "distributions", "every_cell", "device_runtime"}
#: Keys of a ``[profiles.<name>]`` table that are not axes (so no axis may be named so).
PROFILE_KEYS = {"within"}
#: A profile's name becomes a nox tag, a session name (``report-<name>``) and a file name (``plan-<name>.json``).
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
#: ``[reuse] max_age_days`` when the file does not say: every cell really runs at least once a week.
DEFAULT_REUSE_MAX_AGE_DAYS = 7


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


def _matches(when: Mapping[str, SpecifierSet], pins: Mapping[str, str]) -> bool:
    return all(axis in pins and spec.contains(pins[axis], prereleases=True) for axis, spec in when.items())


@dataclass(frozen=True)
class Rule:
    """An exclude rule: a cell matching every specifier is dropped."""

    when: Mapping[str, SpecifierSet]
    profiles: tuple[str, ...]

    def matches(self, pins: Mapping[str, str]) -> bool:
        return _matches(self.when, pins)


@dataclass(frozen=True)
class BaseWhen:
    """Base pins that stand in where the usual base cannot exist (``[[base_when]]``).

    The python sweep runs the base stack on every listed interpreter, but a
    release may ship nothing for one (torch 2.15.0 has no cp310 wheel;
    transformers 5.x requires Python >= 3.11). Such a cell holds the newest
    releases that do exist instead of being planned only to be install-failed.
    """

    when: Mapping[str, SpecifierSet]
    pins: Mapping[str, str]
    why: str

    def matches(self, pins: Mapping[str, str]) -> bool:
        return _matches(self.when, pins)

    def apply(self, pins: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with every axis that is held at base (not spanned) replaced, when ``when`` matches."""
        if not _matches(self.when, pins):
            return dict(pins)
        return {a: self.pins[a] if a in self.pins and v == base.get(a) else v for a, v in pins.items()}


@dataclass(frozen=True)
class Constraint:
    """Extra install requirements (and distribution names) for a version range of a cell's effective pins."""

    when: Mapping[str, SpecifierSet]
    requires: tuple[str, ...]
    distribution: Mapping[str, str]
    why: str
    key: str = field(default="constraints", compare=False)  # "constraints[2]": how errors name this entry

    def matches(self, pins: Mapping[str, str]) -> bool:
        return _matches(self.when, pins)

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
    #: ``[harness] source_builds = "refuse"``: a distribution with no wheel for a cell is its install failure, never a build.
    refuse_source_builds: bool = False

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

    def rebased(self, pins: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with ``[[base_when]]`` applied: base-held axes swapped where the base cannot exist."""
        result = dict(pins)
        for rule in self.base_when:
            result = rule.apply(result, self.base)
        return self.ordered(result)

    def effective(self, pins: Mapping[str, str]) -> dict[str, str]:
        """A cell's pins plus the base pin of every axis it does not pin (``[[base_when]]`` stand-ins applied).

        What constraints are evaluated at, so a ``when`` may name any axis: a
        cell that leaves an axis at its base is judged at that base.
        """
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

    def requirements_for(self, pins: Mapping[str, str], *, harness: bool = True, extra: Sequence[str] = ()) -> list[str]:
        """pip requirement strings that build this cell: pins, range constraints, an install workaround's ``extra``, (the harness's own)."""
        pinned = [f"{dist}=={pins[axis]}" for axis, (dist, _) in self.providers(pins).items()]
        ranges = [r for c in self.matching_constraints(pins) for r in c.requires]
        return pinned + list(dict.fromkeys([*ranges, *extra])) + (list(self.harness) if harness else [])

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
            canonical = str(Version(value))
        except InvalidVersion:
            raise self.fail(key, f"{value!r} is not a valid version", 'use a released version such as "2.4.1"') from None
        if canonical != value:
            raise self.fail(key, f"{value!r} is not written canonically", f'write "{canonical}" (no spaces, prefixes or leading zeros)')
        return value

    def versions(self, value: Any, key: str, *, symbolic: bool = False) -> tuple[str, ...]:
        """A list of canonical versions; with ``symbolic`` (a profile's package axis) also ``latest``/``latest-pre``."""
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of versions, got {value!r}", 'write e.g. ["2.4.1", "2.5.1"]')
        if not value:
            raise self.fail(key, "empty list", "list at least one version, or remove the key")
        found = tuple(
            v if symbolic and v in SYMBOLIC else self.version(v, f"{key}[{i}]") for i, v in enumerate(value)
        )  # fmt: skip
        duplicates = sorted({v for v in found if found.count(v) > 1})
        if duplicates:
            raise self.fail(key, f"duplicate version(s) {', '.join(duplicates)}", "list each version once")
        return found

    def specifiers(self, data: Any, key: str, axes: set[str]) -> dict[str, SpecifierSet]:
        table = self.table(data, key, axes)
        specs = {}
        for axis, text in table.items():
            try:
                specs[axis] = SpecifierSet(str(text))
            except InvalidSpecifier:
                raise self.fail(f"{key}.{axis}", f"{text!r} is not a version specifier", 'write e.g. "<2.1" or ">=2.3,<2.6"') from None
        if not specs:
            raise self.fail(key, "empty condition", 'name at least one axis, e.g. { torch = "<2.3" }')
        return specs

    def requirement(self, value: Any, key: str, *, allow_direct: bool = False) -> str:
        try:
            requirement = Requirement(str(value))
        except InvalidRequirement:
            raise self.fail(key, f"{value!r} is not a requirement", 'write it as pip would take it, e.g. "numpy<2"') from None
        if requirement.url and not allow_direct:
            raise self.fail(
                key,
                f"{value!r} is a direct URL or path, which no lock or registry can reproduce",
                "use a released version, or add allow_direct = true with a why to this entry",
            )
        return str(value)

    def requirements(self, value: Any, key: str, *, allow_direct: bool = False) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"{value!r} is not a list of requirements", 'write e.g. ["numpy<2"]')
        return tuple(self.requirement(r, f"{key}[{i}]", allow_direct=allow_direct) for i, r in enumerate(value))

    def profile_names(self, value: Any, key: str, declared: Mapping[str, Any]) -> tuple[str, ...]:
        names = tuple(value) if isinstance(value, list) else ()
        bad = [n for n in names if n not in declared] if names else [value]
        if bad:
            raise self.fail(key, f"{bad[0]!r} is not a profile", f"use a list of {', '.join(declared)} (the [profiles.*] tables)")
        return names

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"{value!r} is not true or false", f"write {key.rpartition('.')[2]} = true, or leave it out")
        return value

    def array(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected an array of tables, got {type(value).__name__}", f"write [[{key}]] blocks")
        return value


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


def _axes(check: _Checker, data: Any) -> dict[str, Axis]:
    table = check.table(data, "axes")
    axes: dict[str, Axis] = {}
    for name, entry in table.items():
        key = f"axes.{name}"
        if name in PROFILE_KEYS:
            raise check.fail(key, f"{name!r} is a word [profiles.*] tables use", "name the axis otherwise")
        entry = check.table(entry, key, AXIS_KEYS)
        prefix = entry.get("prefix")
        if not isinstance(prefix, str) or not prefix.isalnum():
            raise check.fail(f"{key}.prefix", f"{prefix!r} is not a short alphanumeric prefix", 'write e.g. prefix = "np"')
        if any(a.prefix == prefix for a in axes.values()):
            raise check.fail(f"{key}.prefix", f"{prefix!r} is used by another axis", "cell ids must tell axes apart: pick another")
        dists = check.table(entry.get("distributions", {}), f"{key}.distributions")
        for dist, module in dists.items():
            if not isinstance(module, str) or not module:
                raise check.fail(
                    f"{key}.distributions.{dist}", f"{module!r} is not a module name", 'write the module to import, e.g. "numpy"'
                )
        every_cell = check.flag(entry.get("every_cell", False), f"{key}.every_cell")
        runtime = check.flag(entry.get("device_runtime", False), f"{key}.device_runtime")
        if (every_cell or runtime) and not dists:
            raise check.fail(f"{key}.{'every_cell' if every_cell else 'device_runtime'}", "set on the interpreter axis", "remove it")
        if runtime and any(a.device_runtime for a in axes.values()):
            other = next(a.name for a in axes.values() if a.device_runtime)
            raise check.fail(f"{key}.device_runtime", f"axes.{other} is the device runtime already", "mark one axis only")
        versions = check.versions(entry.get("versions"), f"{key}.versions")
        axes[name] = Axis(name, prefix, versions, tuple(dists.items()), every_cell=every_cell, device_runtime=runtime)
    interpreters = [f"axes.{a.name}" for a in axes.values() if a.is_interpreter]
    if not interpreters:
        raise check.fail("axes", "no interpreter axis", 'declare one without distributions: [axes.python] prefix = "py", versions = [...]')
    if len(interpreters) > 1:
        fix = 'only the interpreter axis has none: give the others theirs, e.g. distributions = { numpy = "numpy" }'
        raise check.fail(" and ".join(f"{k}.distributions" for k in interpreters), "missing", fix)
    return axes


def _base(check: _Checker, data: Any, axes: Mapping[str, Axis]) -> dict[str, str]:
    base_table = check.table(data, "base", set(axes))
    base = {}
    for axis in axes:
        if axis not in base_table:
            raise check.fail(f"base.{axis}", "missing", "pin the version used where a case does not span this axis")
        base[axis] = check.version(base_table[axis], f"base.{axis}")
        if base[axis] not in axes[axis].versions:
            raise check.fail(f"base.{axis}", f"{base[axis]!r} is not in axes.{axis}.versions", "add it to the axis or pin a listed version")
    return base


def _profiles(
    check: _Checker, data: Any, axes: Mapping[str, Axis], base: Mapping[str, str]
) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, str]]:
    """``[profiles.<name>]``: any names, the first the default; ``within`` checked axis-wise here (cell-wise by the planner)."""
    if not isinstance(data, dict) or not data:
        raise check.fail(
            "profiles", f"{data!r} is not a table of profiles", 'declare at least one, e.g. [profiles.smoke] torch = ["2.5.1"]'
        )
    profiles: dict[str, dict[str, tuple[str, ...]]] = {}
    within: dict[str, str] = {}
    for name, entry in data.items():
        key = f"profiles.{name}"
        if not PROFILE_NAME.fullmatch(name) or name.startswith("gpu-"):
            raise check.fail(
                key, f"{name!r} is not a usable profile name", "use lowercase letters, digits, - and _, not starting with gpu-"
            )
        table = check.table(entry, key, set(axes) | PROFILE_KEYS)
        profiles[name] = {}
        for axis, values in table.items():
            if axis in PROFILE_KEYS:
                continue
            listed = check.versions(values, f"{key}.{axis}", symbolic=not axes[axis].is_interpreter)
            unknown = [v for v in listed if v not in axes[axis].versions and v not in SYMBOLIC]
            if unknown:
                raise check.fail(
                    f"{key}.{axis}", f"{unknown[0]!r} is not in axes.{axis}.versions", f"add it to axes.{axis}.versions or remove it"
                )
            profiles[name][axis] = listed
        if "within" in table:
            within[name] = table["within"]
    for name, larger in within.items():
        key = f"profiles.{name}.within"
        if not isinstance(larger, str) or larger not in profiles or larger == name:
            others = ", ".join(p for p in profiles if p != name) or "none"
            raise check.fail(key, f"{larger!r} is not another profile", f"name one of {others}, or remove within")
        seen = [name]
        while seen[-1] in within:
            seen.append(within[seen[-1]])
            if seen[-1] in seen[:-1]:
                raise check.fail(key, f"the relation loops ({' within '.join(seen)})", "remove within from one of them")
        for axis, values in profiles[name].items():
            missing = [v for v in values if v not in profiles[larger].get(axis, (base[axis],))]
            if missing:
                raise check.fail(
                    f"profiles.{name}.{axis}", f"{missing[0]!r} is not in profiles.{larger}", f"{name} is declared within {larger}"
                )
    return profiles, within


def _base_when(check: _Checker, data: Any, axes: Mapping[str, Axis]) -> list[BaseWhen]:
    base_when = []
    names = set(axes)
    for i, entry in enumerate(check.array(data, "base_when")):
        key = f"base_when[{i}]"
        table = check.table(entry, key, {"when", "pins", "why"})
        when = check.specifiers(table.get("when", {}), f"{key}.when", names)
        pins_table = check.table(table.get("pins", {}), f"{key}.pins", names - set(when))
        if not pins_table:
            raise check.fail(f"{key}.pins", "empty", 'name the base pins that stand in, e.g. pins = { torch = "2.14.1" }')
        stand_in = {a: check.version(v, f"{key}.pins.{a}") for a, v in pins_table.items()}
        for axis, version in stand_in.items():
            if version not in axes[axis].versions:
                raise check.fail(f"{key}.pins.{axis}", f"{version!r} is not in axes.{axis}.versions", "pin a listed version")
        why = table.get("why")
        if not isinstance(why, str) or not why.strip():
            raise check.fail(f"{key}.why", "missing", "say why the base cannot be used there (e.g. no wheel for that Python)")
        base_when.append(BaseWhen(when, stand_in, why))
    return base_when


def _include(
    check: _Checker, data: Any, axes: Mapping[str, Axis], base: Mapping[str, str], profiles: Mapping[str, Any]
) -> list[tuple[dict[str, str], tuple[str, ...]]]:
    """``[[include]]`` cells: what they list, with the interpreter and every ``every_cell`` axis they leave out at base."""
    include = []
    held = [name for name, axis in axes.items() if axis.is_interpreter or axis.every_cell]
    for i, cell in enumerate(check.array(data, "include")):
        key = f"include[{i}]"
        table = check.table(cell, key, {*axes, "profiles"})
        pins = {a: check.version(v, f"{key}.{a}") for a, v in table.items() if a != "profiles"}
        for axis, version in pins.items():
            if version not in axes[axis].versions:
                raise check.fail(
                    f"{key}.{axis}", f"{version!r} is not in axes.{axis}.versions", "an include can only combine listed versions"
                )
        if not pins:
            raise check.fail(key, "pins nothing", 'list the versions of the cell to add, e.g. torch = "2.5.1"')
        full = {**{a: base[a] for a in held}, **pins}
        ordered = {a: full[a] for a in axes if a in full}
        include.append((ordered, check.profile_names(table.get("profiles", list(profiles)), f"{key}.profiles", profiles)))
    return include


def _constraints(check: _Checker, data: Any, axes: Mapping[str, Axis]) -> list[Constraint]:
    constraints = []
    names = set(axes)
    packages = {name for name, axis in axes.items() if not axis.is_interpreter}
    for i, entry in enumerate(check.array(data, "constraints")):
        key = f"constraints[{i}]"
        table = check.table(entry, key, {"when", "requires", "distribution", "why", "allow_direct"})
        allow_direct = table.get("allow_direct", False) is True
        if allow_direct and not str(table.get("why", "")).strip():
            raise check.fail(f"{key}.allow_direct", "true without a why", "say why a direct URL is needed in why = ...")
        dist = check.table(table.get("distribution", {}), f"{key}.distribution", packages)
        for axis, name in dist.items():
            known = [d for d, _ in axes[axis].distributions]
            if name not in known:
                raise check.fail(
                    f"{key}.distribution.{axis}", f"{name!r} is not a distribution of {axis}", f"use one of {', '.join(known)}"
                )
        requires = check.requirements(table.get("requires", []), f"{key}.requires", allow_direct=allow_direct)
        when = check.specifiers(table.get("when", {}), f"{key}.when", names)
        constraints.append(Constraint(when, requires, dist, str(table.get("why", "")), key=key))
    return constraints


def _gpu(check: _Checker, data: Any, axes: Mapping[str, Axis]) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    packages = {name for name, axis in axes.items() if not axis.is_interpreter}
    gpu = check.table(data, "gpu", packages | {"runner"})
    gpu_select = {axis: check.versions(gpu[axis], f"gpu.{axis}") for axis in axes if axis in gpu}
    for axis, values in gpu_select.items():
        unknown = [v for v in values if v not in axes[axis].versions]
        if unknown:
            raise check.fail(
                f"gpu.{axis}", f"{unknown[0]!r} is not in axes.{axis}.versions", "list versions the matrix has, or no GPU cell matches"
            )
    runner = gpu.get("runner", ["self-hosted", "gpu"])
    if not isinstance(runner, list) or not runner or not all(isinstance(r, str) for r in runner):
        raise check.fail("gpu.runner", f"{runner!r} is not a list of runner labels", 'write e.g. ["self-hosted", "gpu"]')
    return gpu_select, tuple(runner)


def parse_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Validate parsed TOML; every rule of the file format is enforced here."""
    check = _Checker(path)
    check.table(data, "", TOP_KEYS)
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise check.fail("schema", f"{data.get('schema')!r} is not a known matrix schema", f"set schema = {SCHEMA}")
    axes = _axes(check, data.get("axes", {}))
    base = _base(check, data.get("base", {}), axes)
    profiles, within = _profiles(check, data.get("profiles", {}), axes, base)
    exclude = []
    for i, rule in enumerate(check.array(data.get("exclude", []), "exclude")):
        key = f"exclude[{i}]"
        table = check.table(rule, key, {"when", "profiles", "why"})
        when = check.specifiers(table.get("when", {}), f"{key}.when", set(axes))
        exclude.append(Rule(when, check.profile_names(table.get("profiles", list(profiles)), f"{key}.profiles", profiles)))
    harness_table = check.table(data.get("harness", {}), "harness", {"requires", "source_builds"})
    harness = check.requirements(harness_table.get("requires", []), "harness.requires")
    source_builds = harness_table.get("source_builds", "allow")
    if source_builds not in ("allow", "refuse"):
        raise check.fail("harness.source_builds", f"{source_builds!r} is not allow or refuse", 'write source_builds = "refuse"')
    gpu_select, runner = _gpu(check, data.get("gpu", {}), axes)
    reuse = check.table(data.get("reuse", {}), "reuse", {"max_age_days"})
    max_age = reuse.get("max_age_days", DEFAULT_REUSE_MAX_AGE_DAYS)
    if not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0:
        raise check.fail("reuse.max_age_days", f"{max_age!r} is not a whole number of days", "write e.g. max_age_days = 7 (0: never reuse)")
    return Matrix(
        path, axes, base, profiles, tuple(exclude), tuple(_include(check, data.get("include", []), axes, base, profiles)),
        tuple(_constraints(check, data.get("constraints", []), axes)), harness, gpu_select, runner,
        tuple(_base_when(check, data.get("base_when", []), axes)), within, max_age, source_builds == "refuse",
    )  # fmt: skip
