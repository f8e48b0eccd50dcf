"""The rules of ``matrix.toml``'s format: every defect is one line naming the file, the key, the value and the fix.

Hand-written on purpose (issue 35 measured it): a JSON Schema of the shape
catches 23 of ``tests/test_matrix.py``'s 39 broken inputs with generic fixes,
the rest are relations between tables that stay code, and the noxfile reads
this inside a bare ``pip install nox uv``, which brings no schema library.
:data:`KEYS` is the shape; :class:`Checker` the value checks that name the
file; one function per table checks it against the tables before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix_model import DEFAULT_REUSE_MAX_AGE_DAYS, SCHEMA, SYMBOLIC, Axis, BaseWhen, Constraint, Matrix, Rule
from bugmatrix.values import PROFILE_RULE, profile_name

__all__ = ["Checker", "check_matrix"]

#: The file's shape: the keys each table may hold. Tables keyed by axis (``[base]``, ``[[include]]``, a profile,
#: ``[gpu]``, ``when``, ``pins``, ``distribution``) take the axes' names besides these.
KEYS = {
    "": {"schema", "base", "base_when", "axes", "profiles", "exclude", "include", "constraints", "harness", "gpu", "reuse"},
    "axes": {"versions", "prefix", "distributions", "every_cell", "device_runtime"},
    "profiles": {"within", "computed"},  # so no axis may be named so
    "exclude": {"when", "profiles", "why"},
    "include": {"profiles"},
    "base_when": {"when", "pins", "why"},
    "constraints": {"when", "requires", "distribution", "why", "allow_direct"},
    "harness": {"requires", "source_builds", "cell_deadline_s"},
    "gpu": {"runner"},
    "reuse": {"max_age_days"},
}


class Checker:
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
        found = tuple(v if symbolic and v in SYMBOLIC else self.version(v, f"{key}[{i}]") for i, v in enumerate(value))
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

    def entries(self, value: Any, name: str, allowed: set[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        """``[[name]]`` blocks: each one's key (``name[i]``) and its table, holding only ``allowed`` keys."""
        for i, entry in enumerate(self.array(value, name)):
            yield f"{name}[{i}]", self.table(entry, f"{name}[{i}]", allowed)

    def listed(self, values: Iterable[str], key: str, axis: Axis, fix: str) -> None:
        """Every one of ``values`` is a version of ``axis`` (``latest`` stands for one)."""
        for value in values:
            if value not in axis.versions and value not in SYMBOLIC:
                raise self.fail(key, f"{value!r} is not in axes.{axis.name}.versions", fix)


def _axes(check: Checker, data: Any) -> dict[str, Axis]:
    table = check.table(data, "axes")
    axes: dict[str, Axis] = {}
    for name, entry in table.items():
        key = f"axes.{name}"
        if name in KEYS["profiles"]:
            raise check.fail(key, f"{name!r} is a word [profiles.*] tables use", "name the axis otherwise")
        entry = check.table(entry, key, KEYS["axes"])
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


def _base(check: Checker, data: Any, axes: Mapping[str, Axis]) -> dict[str, str]:
    base_table = check.table(data, "base", set(axes))
    base = {}
    for axis in axes:
        if axis not in base_table:
            raise check.fail(f"base.{axis}", "missing", "pin the version used where a case does not span this axis")
        base[axis] = check.version(base_table[axis], f"base.{axis}")
        check.listed([base[axis]], f"base.{axis}", axes[axis], "add it to the axis or pin a listed version")
    return base


def _profiles(
    check: Checker, data: Any, axes: Mapping[str, Axis], base: Mapping[str, str]
) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, str], dict[str, Path]]:
    """``[profiles.<name>]``: any names, the first the default; ``within`` checked axis-wise here (cell-wise by the planner)."""
    if not isinstance(data, dict) or not data:
        raise check.fail(
            "profiles", f"{data!r} is not a table of profiles", 'declare at least one, e.g. [profiles.smoke] torch = ["2.5.1"]'
        )
    profiles: dict[str, dict[str, tuple[str, ...]]] = {}
    within: dict[str, str] = {}
    computed: dict[str, Path] = {}
    for name, entry in data.items():
        key = f"profiles.{name}"
        try:
            profile_name(name, key)
        except BugmatrixError:
            raise check.fail(key, f"{name!r} is not a usable profile name", f"use {PROFILE_RULE}") from None
        table = check.table(entry, key, set(axes) | KEYS["profiles"])
        profiles[name] = {}
        for axis, values in table.items():
            if axis in KEYS["profiles"]:
                continue
            profiles[name][axis] = check.versions(values, f"{key}.{axis}", symbolic=not axes[axis].is_interpreter)
            check.listed(profiles[name][axis], f"{key}.{axis}", axes[axis], f"add it to axes.{axis}.versions or remove it")
        if not profiles[name] and "computed" not in table:
            example = next((a for a in axes.values() if not a.is_interpreter), next(iter(axes.values())))
            fix = f'list the versions it runs, e.g. {example.name} = ["{example.versions[-1]}"], or remove it'
            raise check.fail(key, "lists no versions (and is not computed): it would plan the base cells alone", fix)
        if "within" in table:
            within[name] = table["within"]
        if "computed" in table:
            value = table["computed"]
            if not isinstance(value, str) or not value.endswith(".json") or "/" in value or value.startswith("."):
                raise check.fail(
                    f"{key}.computed", f"{value!r} is not a .json file name", f'write e.g. computed = "{name}.json" (beside the matrix)'
                )
            if profiles[name]:
                raise check.fail(
                    key, "is computed and lists versions too", "remove the version lists (the cells come from its within profile)"
                )
            if "within" not in table:
                raise check.fail(f"{key}.computed", "without within", 'name the profile it picks its cells from: within = "nightly"')
            computed[name] = check.path.parent / value
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
    return profiles, within, computed


def _base_when(check: Checker, data: Any, axes: Mapping[str, Axis]) -> list[BaseWhen]:
    base_when = []
    names = set(axes)
    for key, table in check.entries(data, "base_when", KEYS["base_when"]):
        when = check.specifiers(table.get("when", {}), f"{key}.when", names)
        pins_table = check.table(table.get("pins", {}), f"{key}.pins", names - set(when))
        if not pins_table:
            raise check.fail(f"{key}.pins", "empty", 'name the base pins that stand in, e.g. pins = { torch = "2.14.1" }')
        stand_in = {a: check.version(v, f"{key}.pins.{a}") for a, v in pins_table.items()}
        for axis, version in stand_in.items():
            check.listed([version], f"{key}.pins.{axis}", axes[axis], "pin a listed version")
        why = table.get("why")
        if not isinstance(why, str) or not why.strip():
            raise check.fail(f"{key}.why", "missing", "say why the base cannot be used there (e.g. no wheel for that Python)")
        base_when.append(BaseWhen(when, stand_in, why))
    return base_when


def _include(
    check: Checker, data: Any, axes: Mapping[str, Axis], base: Mapping[str, str], profiles: Mapping[str, Any]
) -> list[tuple[dict[str, str], tuple[str, ...]]]:
    """``[[include]]`` cells: what they list, with the interpreter and every ``every_cell`` axis they leave out at base."""
    include = []
    held = [name for name, axis in axes.items() if axis.is_interpreter or axis.every_cell]
    for key, table in check.entries(data, "include", {*axes, *KEYS["include"]}):
        pins = {a: check.version(v, f"{key}.{a}") for a, v in table.items() if a != "profiles"}
        for axis, version in pins.items():
            check.listed([version], f"{key}.{axis}", axes[axis], "an include can only combine listed versions")
        if not pins:
            raise check.fail(key, "pins nothing", 'list the versions of the cell to add, e.g. torch = "2.5.1"')
        full = {**{a: base[a] for a in held}, **pins}
        ordered = {a: full[a] for a in axes if a in full}
        include.append((ordered, check.profile_names(table.get("profiles", list(profiles)), f"{key}.profiles", profiles)))
    return include


def _constraints(check: Checker, data: Any, axes: Mapping[str, Axis]) -> list[Constraint]:
    constraints = []
    names = set(axes)
    packages = {name for name, axis in axes.items() if not axis.is_interpreter}
    for key, table in check.entries(data, "constraints", KEYS["constraints"]):
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


def _gpu(check: Checker, data: Any, axes: Mapping[str, Axis]) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    packages = {name for name, axis in axes.items() if not axis.is_interpreter}
    gpu = check.table(data, "gpu", packages | KEYS["gpu"])
    gpu_select = {axis: check.versions(gpu[axis], f"gpu.{axis}") for axis in axes if axis in gpu}
    for axis, values in gpu_select.items():
        check.listed(values, f"gpu.{axis}", axes[axis], "list versions the matrix has, or no GPU cell matches")
    runner = gpu.get("runner", ["self-hosted", "gpu"])
    if not isinstance(runner, list) or not runner or not all(isinstance(r, str) for r in runner):
        raise check.fail("gpu.runner", f"{runner!r} is not a list of runner labels", 'write e.g. ["self-hosted", "gpu"]')
    return gpu_select, tuple(runner)


def check_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Validate parsed TOML into a :class:`~bugmatrix.plan.matrix.Matrix`; every rule of the file format is enforced here."""
    check = Checker(path)
    check.table(data, "", KEYS[""])
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise check.fail("schema", f"{data.get('schema')!r} is not a known matrix schema", f"set schema = {SCHEMA}")
    axes = _axes(check, data.get("axes", {}))
    base = _base(check, data.get("base", {}), axes)
    profiles, within, computed = _profiles(check, data.get("profiles", {}), axes, base)
    exclude = [
        Rule(
            check.specifiers(table.get("when", {}), f"{key}.when", set(axes)),
            check.profile_names(table.get("profiles", list(profiles)), f"{key}.profiles", profiles),
        )
        for key, table in check.entries(data.get("exclude", []), "exclude", KEYS["exclude"])
    ]
    harness_table = check.table(data.get("harness", {}), "harness", KEYS["harness"])
    harness = check.requirements(harness_table.get("requires", []), "harness.requires")
    source_builds = harness_table.get("source_builds", "allow")
    if source_builds not in ("allow", "refuse"):
        raise check.fail("harness.source_builds", f"{source_builds!r} is not allow or refuse", 'write source_builds = "refuse"')
    deadline = harness_table.get("cell_deadline_s", 0)
    if not isinstance(deadline, int | float) or isinstance(deadline, bool) or not 0 <= deadline < float("inf"):
        raise check.fail(
            "harness.cell_deadline_s", f"{deadline!r} is not a number of seconds", "write e.g. cell_deadline_s = 3600 (0: none)"
        )
    gpu_select, runner = _gpu(check, data.get("gpu", {}), axes)
    reuse = check.table(data.get("reuse", {}), "reuse", KEYS["reuse"])
    max_age = reuse.get("max_age_days", DEFAULT_REUSE_MAX_AGE_DAYS)
    if not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0:
        raise check.fail("reuse.max_age_days", f"{max_age!r} is not a whole number of days", "write e.g. max_age_days = 7 (0: never reuse)")
    return Matrix(
        path,
        axes,
        base,
        profiles,
        tuple(exclude),
        tuple(_include(check, data.get("include", []), axes, base, profiles)),
        tuple(_constraints(check, data.get("constraints", []), axes)),
        harness,
        gpu_select,
        runner,
        tuple(_base_when(check, data.get("base_when", []), axes)),
        within,
        max_age,
        computed,
        source_builds == "refuse",
        float(deadline) or None,
    )
