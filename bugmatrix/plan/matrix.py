"""``matrix.toml``: the axis registry, profiles, rules and install constraints.

Parsed with ``tomllib`` and validated strictly: any defect becomes a one-line
:class:`BugmatrixError` naming the file, the key and the value, and what to do.
Nothing about versions or axes lives in code: each ``[axes.<name>]`` table says
an axis's releases, the prefix of its part of a cell id, and the
distributions that provide it with the module a cell must import for each.
Adding an axis (numpy, accelerate, ...) is an entry here and nothing else.
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

__all__ = [
    "DEFAULT_REUSE_MAX_AGE_DAYS",
    "INTERPRETER",
    "PROFILES",
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
INTERPRETER = "python"  # the one axis that is an interpreter, not a distribution
PROFILES = ("smoke", "nightly", "full")  # each a subset of the next
#: Profile values resolved by the registry when a plan is made (``bugmatrix.releases.tracking``); the value says if pre-releases count.
SYMBOLIC = {"latest": False, "latest-pre": True}
TOP_KEYS = {"schema", "base", "base_when", "axes", "profiles", "exclude", "include", "constraints", "harness", "gpu", "reuse"}
#: ``[reuse] max_age_days`` when the file does not say: every cell really runs at least once a week.
DEFAULT_REUSE_MAX_AGE_DAYS = 7


@dataclass(frozen=True)
class Axis:
    """One axis: its releases, its cell-id prefix, and (distribution, import module) pairs, the default first."""

    name: str
    prefix: str
    versions: tuple[str, ...]
    distributions: tuple[tuple[str, str], ...]

    def id_part(self, version: str) -> str:
        """``torch2.5.1``; the interpreter drops its dots (``py311``)."""
        return f"{self.prefix}{version.replace('.', '') if self.name == INTERPRETER else version}"


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

    def apply(self, pins: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with every axis that is held at base (not spanned) replaced, when ``when`` matches."""
        if not _matches(self.when, pins):
            return dict(pins)
        return {a: self.pins[a] if a in self.pins and v == base.get(a) else v for a, v in pins.items()}


@dataclass(frozen=True)
class Constraint:
    """Extra install requirements (and distribution names) for a version range."""

    when: Mapping[str, SpecifierSet]
    requires: tuple[str, ...]
    distribution: Mapping[str, str]
    why: str

    def matches(self, pins: Mapping[str, str]) -> bool:
        return _matches(self.when, pins)


@dataclass(frozen=True)
class Matrix:
    """The validated contents of ``matrix.toml``."""

    path: Path
    axes: Mapping[str, Axis]  # display order = file order
    base: Mapping[str, str]
    profiles: Mapping[str, Mapping[str, tuple[str, ...]]]
    exclude: tuple[Rule, ...]
    include: tuple[tuple[Mapping[str, str], tuple[str, ...]], ...]
    constraints: tuple[Constraint, ...]
    harness: tuple[str, ...]
    gpu_select: Mapping[str, tuple[str, ...]]
    gpu_runner: tuple[str, ...]
    base_when: tuple[BaseWhen, ...] = ()
    reuse_max_age_days: int = DEFAULT_REUSE_MAX_AGE_DAYS  # results older than this are re-observed (bugmatrix/run/reuse.py)

    @property
    def package_axes(self) -> tuple[str, ...]:
        """Every axis but the interpreter, in display order."""
        return tuple(name for name in self.axes if name != INTERPRETER)

    def ordered(self, pins: Mapping[str, str]) -> dict[str, str]:
        """Pins in display order (the order of ``[axes]``)."""
        return {axis: pins[axis] for axis in self.axes if axis in pins}

    def rebased(self, pins: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with ``[[base_when]]`` applied: base-held axes swapped where the base cannot exist."""
        result = dict(pins)
        for rule in self.base_when:
            result = rule.apply(result, self.base)
        return self.ordered(result)

    def cell_id(self, pins: Mapping[str, str], device: str = "cpu") -> str:
        """Readable, stable id: ``py311-torch2.5.1-pl2.0.3-tf4.30.2`` (+ ``-cuda``)."""
        parts = [self.axes[axis].id_part(version) for axis, version in self.ordered(pins).items()]
        return "-".join(parts) + ("-cuda" if device == "cuda" else "")

    def providers(self, pins: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        """axis -> (distribution, module) for every pinned package axis, constraints applied."""
        chosen = {axis: self.axes[axis].distributions[0] for axis in self.package_axes if axis in pins}
        for constraint in self.constraints:
            if constraint.matches(pins):
                for axis, dist in constraint.distribution.items():
                    if axis in chosen:
                        chosen[axis] = next(p for p in self.axes[axis].distributions if p[0] == dist)
        return chosen

    def requirements_for(self, pins: Mapping[str, str], *, harness: bool = True) -> list[str]:
        """pip requirement strings that build this cell: pins, range constraints, (the harness's own)."""
        pinned = [f"{dist}=={pins[axis]}" for axis, (dist, _) in self.providers(pins).items()]
        extra = [r for c in self.constraints if c.matches(pins) for r in c.requires]
        return pinned + list(dict.fromkeys(extra)) + (list(self.harness) if harness else [])

    def import_modules(self, pins: Mapping[str, str]) -> list[str]:
        """The modules that must import in this cell (the pinned distributions' own, no fallback)."""
        return [module for _, module in self.providers(pins).values()]

    def axis_spec(self, pins: Mapping[str, str] | None = None) -> dict[str, list[tuple[str, str]]]:
        """What a cell's plugin needs: axis -> providers; for a cell only the one it pins, else all of them."""
        if pins is None:
            return {axis: list(self.axes[axis].distributions) for axis in self.package_axes}
        return {axis: [provider] for axis, provider in self.providers(pins).items()}


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

    def profile_names(self, value: Any, key: str) -> tuple[str, ...]:
        names = tuple(value) if isinstance(value, list) else ()
        bad = [n for n in names if n not in PROFILES] if names else [value]
        if bad:
            raise self.fail(key, f"{bad[0]!r} is not a profile", f"use a list of {', '.join(PROFILES)}")
        return names

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
    if INTERPRETER not in table:
        raise check.fail(f"axes.{INTERPRETER}", "missing", 'declare the interpreter axis: [axes.python] prefix = "py", versions = [...]')
    axes: dict[str, Axis] = {}
    for name, entry in table.items():
        key = f"axes.{name}"
        entry = check.table(entry, key, {"versions", "prefix", "distributions"})
        prefix = entry.get("prefix")
        if not isinstance(prefix, str) or not prefix.isalnum():
            raise check.fail(f"{key}.prefix", f"{prefix!r} is not a short alphanumeric prefix", 'write e.g. prefix = "np"')
        if any(a.prefix == prefix for a in axes.values()):
            raise check.fail(f"{key}.prefix", f"{prefix!r} is used by another axis", "cell ids must tell axes apart: pick another")
        dists = check.table(entry.get("distributions", {}), f"{key}.distributions")
        if (name == INTERPRETER) == bool(dists):
            fix = "the interpreter axis has none" if name == INTERPRETER else 'name them: distributions = { numpy = "numpy" }'
            raise check.fail(f"{key}.distributions", "wrong for this axis", fix)
        for dist, module in dists.items():
            if not isinstance(module, str) or not module:
                raise check.fail(
                    f"{key}.distributions.{dist}", f"{module!r} is not a module name", 'write the module to import, e.g. "numpy"'
                )
        axes[name] = Axis(name, prefix, check.versions(entry.get("versions"), f"{key}.versions"), tuple(dists.items()))
    return axes


def parse_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Validate parsed TOML; every rule of the file format is enforced here."""
    check = _Checker(path)
    check.table(data, "", TOP_KEYS)
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise check.fail("schema", f"{data.get('schema')!r} is not a known matrix schema", f"set schema = {SCHEMA}")
    axes = _axes(check, data.get("axes", {}))
    names = set(axes)

    base_table = check.table(data.get("base", {}), "base", names)
    base = {}
    for axis in axes:
        if axis not in base_table:
            raise check.fail(f"base.{axis}", "missing", "pin the version used where a case does not span this axis")
        base[axis] = check.version(base_table[axis], f"base.{axis}")
        if base[axis] not in axes[axis].versions:
            raise check.fail(f"base.{axis}", f"{base[axis]!r} is not in axes.{axis}.versions", "add it to the axis or pin a listed version")

    profiles_value = data.get("profiles", {})
    if not isinstance(profiles_value, dict):
        raise check.fail("profiles", f"{profiles_value!r} is not a table of profiles", f"write [profiles.{PROFILES[0]}] tables")
    profiles_table = check.table(profiles_value, "profiles", set(PROFILES))
    profiles: dict[str, dict[str, tuple[str, ...]]] = {}
    for name in PROFILES:
        if name not in profiles_table:
            raise check.fail(f"profiles.{name}", "missing", f"define all of {', '.join(PROFILES)}")
        table = check.table(profiles_table[name], f"profiles.{name}", names)
        profiles[name] = {}
        for axis, values in table.items():
            key = f"profiles.{name}.{axis}"
            listed = check.versions(values, key, symbolic=axis != INTERPRETER)
            unknown = [v for v in listed if v not in axes[axis].versions and v not in SYMBOLIC]
            if unknown:
                raise check.fail(key, f"{unknown[0]!r} is not in axes.{axis}.versions", f"add it to axes.{axis}.versions or remove it")
            profiles[name][axis] = listed
    for smaller, larger in itertools.pairwise(PROFILES):
        for axis, values in profiles[smaller].items():
            missing = [v for v in values if v not in profiles[larger].get(axis, (base[axis],))]
            if missing:
                raise check.fail(
                    f"profiles.{smaller}.{axis}", f"{missing[0]!r} is not in profiles.{larger}", f"{smaller} must be a subset of {larger}"
                )

    base_when = []
    for i, entry in enumerate(check.array(data.get("base_when", []), "base_when")):
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

    exclude = []
    for i, rule in enumerate(check.array(data.get("exclude", []), "exclude")):
        key = f"exclude[{i}]"
        table = check.table(rule, key, {"when", "profiles", "why"})
        exclude.append(
            Rule(
                check.specifiers(table.get("when", {}), f"{key}.when", names),
                check.profile_names(table.get("profiles", list(PROFILES)), f"{key}.profiles"),
            )
        )

    include = []
    for i, cell in enumerate(check.array(data.get("include", []), "include")):
        key = f"include[{i}]"
        table = check.table(cell, key, {*names, "profiles"})
        pins = {a: check.version(v, f"{key}.{a}") for a, v in table.items() if a != "profiles"}
        for axis, version in pins.items():
            if version not in axes[axis].versions:
                raise check.fail(
                    f"{key}.{axis}", f"{version!r} is not in axes.{axis}.versions", "an include can only combine listed versions"
                )
        if "torch" in axes and "torch" not in pins:
            raise check.fail(key, "no torch pin", 'every cell needs torch: add torch = "..."')
        include.append((pins, check.profile_names(table.get("profiles", list(PROFILES)), f"{key}.profiles")))

    constraints = []
    for i, entry in enumerate(check.array(data.get("constraints", []), "constraints")):
        key = f"constraints[{i}]"
        table = check.table(entry, key, {"when", "requires", "distribution", "why", "allow_direct"})
        allow_direct = table.get("allow_direct", False) is True
        if allow_direct and not str(table.get("why", "")).strip():
            raise check.fail(f"{key}.allow_direct", "true without a why", "say why a direct URL is needed in why = ...")
        dist = check.table(table.get("distribution", {}), f"{key}.distribution", names - {INTERPRETER})
        for axis, name in dist.items():
            known = [d for d, _ in axes[axis].distributions]
            if name not in known:
                raise check.fail(
                    f"{key}.distribution.{axis}", f"{name!r} is not a distribution of {axis}", f"use one of {', '.join(known)}"
                )
        requires = check.requirements(table.get("requires", []), f"{key}.requires", allow_direct=allow_direct)
        constraints.append(
            Constraint(check.specifiers(table.get("when", {}), f"{key}.when", names), requires, dist, str(table.get("why", "")))
        )

    harness = check.requirements(check.table(data.get("harness", {}), "harness", {"requires"}).get("requires", []), "harness.requires")
    gpu = check.table(data.get("gpu", {}), "gpu", (names - {INTERPRETER}) | {"runner"})
    gpu_select = {axis: check.versions(gpu[axis], f"gpu.{axis}") for axis in axes if axis in gpu}
    for axis, values in gpu_select.items():
        unknown = [v for v in values if v not in axes[axis].versions]
        if unknown:
            raise check.fail(
                f"gpu.{axis}", f"{unknown[0]!r} is not in axes.{axis}.versions", "list versions the matrix has, or no GPU cell matches"
            )
    reuse = check.table(data.get("reuse", {}), "reuse", {"max_age_days"})
    max_age = reuse.get("max_age_days", DEFAULT_REUSE_MAX_AGE_DAYS)
    if not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0:
        raise check.fail("reuse.max_age_days", f"{max_age!r} is not a whole number of days", "write e.g. max_age_days = 7 (0: never reuse)")
    runner = gpu.get("runner", ["self-hosted", "gpu"])
    if not isinstance(runner, list) or not runner or not all(isinstance(r, str) for r in runner):
        raise check.fail("gpu.runner", f"{runner!r} is not a list of runner labels", 'write e.g. ["self-hosted", "gpu"]')
    return Matrix(
        path, axes, base, profiles, tuple(exclude), tuple(include), tuple(constraints), harness, gpu_select, tuple(runner),
        tuple(base_when), max_age,
    )  # fmt: skip
