"""``matrix.toml`` as decoded from its parsed TOML: msgspec checks each table's keys and types, the rules between tables
are :meth:`MatrixFile.__post_init__`'s. A rule raises ``ValueError("key: problem; fix")``, as :func:`explain` tells msgspec's."""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bugmatrix.values import PROFILE_RULE, profile_name

__all__ = ["PROFILE_KEYS", "SCHEMA", "SYMBOLIC", "AxisTable", "ConstraintTable", "MatrixFile", "explain", "holds"]

SCHEMA = 2
#: Profile values resolved by the registry when a plan is made (``bugmatrix.releases.tracking``); the value says if pre-releases count.
SYMBOLIC = {"latest": False, "latest-pre": True}
#: The keys of a ``[profiles.<name>]`` table besides the axes (so no axis may be named so).
PROFILE_KEYS = ("within", "computed")
_GPU_RUNNER = ["self-hosted", "gpu"]


class Table(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A table of the file: an unknown key is an error."""


class AxisTable(Table):
    """``[axes.<name>]``: releases, cell-id prefix, distribution -> module (none: the interpreter), and the axis's role."""

    prefix: str
    versions: list[str]
    distributions: dict[str, str] = {}
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


@functools.cache
def _specifier(text: str) -> SpecifierSet:
    return SpecifierSet(text)


class _WhenTable(Table):
    when: dict[str, str] = {}

    @property
    def specifiers(self) -> dict[str, SpecifierSet]:
        """``when`` parsed, axis by axis."""
        return {axis: _specifier(text) for axis, text in self.when.items()}

    def matches(self, pins: Mapping[str, str]) -> bool:
        """``when`` holds at ``pins``."""
        return holds(self.specifiers, pins)


class ExcludeTable(_WhenTable):
    """``[[exclude]]``: a cell matching every specifier of ``when`` is dropped from ``profiles`` (default: all)."""

    profiles: list[str] | None = None
    why: str = ""


class BaseWhenTable(_WhenTable):
    """``[[base_when]]``: base pins that stand in where ``when`` holds and the usual base cannot exist."""

    pins: dict[str, str] = {}
    why: str = ""

    def apply(self, pins: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with every axis that is held at base (not spanned) replaced, when ``when`` matches."""
        if not self.matches(pins):
            return dict(pins)
        return {a: self.pins[a] if a in self.pins and v == base.get(a) else v for a, v in pins.items()}


class ConstraintTable(_WhenTable):
    """``[[constraints]]``: extra requirements (and distributions) where ``when`` holds at a cell's effective pins."""

    requires: list[str] = []
    distribution: dict[str, str] = {}
    why: str = ""
    allow_direct: bool = False


class HarnessTable(Table):
    """``[harness]``: what every cell installs besides its pins, and how it builds and ends."""

    requires: list[str] = []
    source_builds: Literal["allow", "refuse"] = "allow"
    cell_deadline_s: Annotated[float, msgspec.Meta(ge=0)] = 0

    @property
    def no_build(self) -> bool:
        """A cell with no wheel to install is its install failure, never a source build."""
        return self.source_builds == "refuse"


class ReuseTable(Table):
    """``[reuse]``: results older than ``max_age_days`` are observed again."""

    max_age_days: Annotated[int, msgspec.Meta(ge=0)] = 7  # not said: every cell really runs at least once a week


class MatrixFile(Table):
    """The whole file; tables keyed by axis (``[base]``, a profile, ``[gpu]``, ``when``, ``pins``) are checked here."""

    schema: Literal[2]
    axes: dict[str, AxisTable] = {}
    base: dict[str, str] = {}
    profiles: dict[str, dict[str, list[str] | str]] = {}
    base_when: list[BaseWhenTable] = []
    exclude: list[ExcludeTable] = []
    include: list[dict[str, str | list[str]]] = []
    constraints: list[ConstraintTable] = []
    harness: HarnessTable = HarnessTable()
    gpu: dict[str, list[str]] = {}
    reuse: ReuseTable = ReuseTable()

    @property
    def packages(self) -> list[str]:
        """Every axis but the interpreter (the one without distributions)."""
        return [name for name, axis in self.axes.items() if not axis.is_interpreter]

    @property
    def runner(self) -> list[str]:
        """``[gpu] runner``: the labels a CUDA cell's job runs on."""
        return self.gpu.get("runner", _GPU_RUNNER)

    @property
    def gpu_select(self) -> dict[str, list[str]]:
        """``[gpu]`` by axis: the versions a CUDA twin is planned at (none named: every version)."""
        return {axis: self.gpu[axis] for axis in self.axes if axis in self.gpu}

    @property
    def within(self) -> dict[str, Any]:
        """profile -> the profile whose cells it must be a subset of."""
        return {name: table["within"] for name, table in self.profiles.items() if "within" in table}

    def listed(self, profile: str) -> dict[str, Any]:
        """A profile's versions by axis (its ``within`` and ``computed`` left out)."""
        return {axis: values for axis, values in self.profiles[profile].items() if axis not in PROFILE_KEYS}

    def __post_init__(self) -> None:
        self._check_axes()
        _keys(self.base, "base", self.axes)
        for axis in self.axes:
            if axis not in self.base:
                raise _fail(f"base.{axis}", "missing", "pin the version used where a case does not span this axis")
            self._pinned([self.base[axis]], f"base.{axis}", axis, "add it to the axis or pin a listed version")
        self._check_profiles()
        for i, rule in enumerate(self.exclude):
            _specifiers(rule.when, f"exclude[{i}].when", self.axes)
            self._profile_names(rule.profiles, f"exclude[{i}].profiles")
        _requirements(self.harness.requires, "harness.requires")
        if not math.isfinite(self.harness.cell_deadline_s):
            raise _told("*.cell_deadline_s", "harness.cell_deadline_s", self.harness.cell_deadline_s)
        self._check_gpu()
        self._check_include()
        self._check_constraints()
        self._check_base_when()

    def _check_axes(self) -> None:
        for i, (name, axis) in enumerate(self.axes.items()):
            key, before = f"axes.{name}", list(self.axes)[:i]
            if name in PROFILE_KEYS:
                raise _fail(key, f"{name!r} is a word [profiles.*] tables use", "name the axis otherwise")
            if not axis.prefix.isalnum():
                raise _told("*.prefix", f"{key}.prefix", axis.prefix)
            if any(self.axes[n].prefix == axis.prefix for n in before):
                raise _fail(f"{key}.prefix", f"{axis.prefix!r} is used by another axis", "cell ids must tell axes apart: pick another")
            for dist, module in axis.distributions.items():
                if not module:
                    raise _told("*.distributions.*", f"{key}.distributions.{dist}", module)
            if (axis.every_cell or axis.device_runtime) and axis.is_interpreter:
                raise _fail(f"{key}.{'every_cell' if axis.every_cell else 'device_runtime'}", "set on the interpreter axis", "remove it")
            if axis.device_runtime and (other := next((n for n in before if self.axes[n].device_runtime), None)):
                raise _fail(f"{key}.device_runtime", f"axes.{other} is the device runtime already", "mark one axis only")
            _versions(axis.versions, f"{key}.versions")
        interpreters = [f"axes.{name}" for name, axis in self.axes.items() if axis.is_interpreter]
        if not interpreters:
            raise _fail("axes", "no interpreter axis", 'declare one without distributions: [axes.python] prefix = "py", versions = [...]')
        if len(interpreters) > 1:
            fix = 'only the interpreter axis has none: give the others theirs, e.g. distributions = { numpy = "numpy" }'
            raise _fail(" and ".join(f"{k}.distributions" for k in interpreters), "missing", fix)

    def _pinned(self, values: Iterable[str], key: str, axis: str, fix: str) -> None:
        for value in values:
            _version(value, key)
            if value not in self.axes[axis].versions and value not in SYMBOLIC:
                raise _fail(key, f"{value!r} is not in axes.{axis}.versions", fix)

    def _profile_names(self, value: Any, key: str) -> None:
        bad = [n for n in value if n not in self.profiles] if isinstance(value, list) and value else [value]
        if value is not None and bad:
            raise _told("*.profiles*", key, bad[0], self.profiles)

    def _check_profiles(self) -> None:
        """``within`` is checked axis-wise here (cell-wise by the planner)."""
        if not self.profiles:
            raise _told("profiles", "profiles", self.profiles)
        for name, table in self.profiles.items():
            key = f"profiles.{name}"
            try:
                profile_name(name, key, ValueError)
            except ValueError:
                raise _fail(key, f"{name!r} is not a usable profile name", f"use {PROFILE_RULE}") from None
            _keys(table, key, [*self.axes, *PROFILE_KEYS])
            listed = self.listed(name)
            for axis, values in listed.items():
                if not isinstance(values, list):
                    raise _told("*.versions|profiles.*.*|gpu.*", f"{key}.{axis}", values)
                _versions(values, f"{key}.{axis}", symbolic=not self.axes[axis].is_interpreter)
                self._pinned(
                    [v for v in values if v not in SYMBOLIC], f"{key}.{axis}", axis, f"add it to axes.{axis}.versions or remove it"
                )
            computed = table.get("computed")
            if not listed and computed is None:
                example = next(iter(self.packages), next(iter(self.axes)))
                fix = f'list the versions it runs, e.g. {example} = ["{self.axes[example].versions[-1]}"], or remove it'
                raise _fail(key, "lists no versions (and is not computed): it would plan the base cells alone", fix)
            if computed is not None:
                if not isinstance(computed, str) or not computed.endswith(".json") or "/" in computed or computed.startswith("."):
                    raise _told("profiles.*.computed", f"{key}.computed", computed)
                if listed:
                    raise _fail(
                        key, "is computed and lists versions too", "remove the version lists (the cells come from its within profile)"
                    )
                if "within" not in table:
                    raise _fail(f"{key}.computed", "without within", 'name the profile it picks its cells from: within = "nightly"')
        within = self.within
        for name, larger in within.items():
            key = f"profiles.{name}.within"
            if not isinstance(larger, str) or larger not in self.profiles or larger == name:
                raise _told("profiles.*.within", key, larger, self.profiles)
            seen = [name]
            while seen[-1] in within:
                seen.append(str(within[seen[-1]]))
                if seen[-1] in seen[:-1]:
                    raise _fail(key, f"the relation loops ({' within '.join(seen)})", "remove within from one of them")
            for axis, values in self.listed(name).items():
                missing = [v for v in values if v not in self.listed(larger).get(axis, (self.base[axis],))]
                if missing:
                    raise _fail(
                        f"profiles.{name}.{axis}", f"{missing[0]!r} is not in profiles.{larger}", f"{name} is declared within {larger}"
                    )

    def _check_gpu(self) -> None:
        _keys(self.gpu, "gpu", [*self.packages, "runner"])
        for axis, versions in self.gpu_select.items():
            _versions(versions, f"gpu.{axis}")
            self._pinned(versions, f"gpu.{axis}", axis, "list versions the matrix has, or no GPU cell matches")
        if not self.runner:
            raise _told("gpu.runner*", "gpu.runner", self.runner)

    def _check_include(self) -> None:
        for i, table in enumerate(self.include):
            key = f"include[{i}]"
            _keys(table, key, [*self.axes, "profiles"])
            pins = {axis: version for axis, version in table.items() if axis != "profiles"}
            for axis, version in pins.items():
                if not isinstance(version, str):
                    raise _told("*]|base.*|*.pins.*|include*.*", f"{key}.{axis}", version)
                self._pinned([version], f"{key}.{axis}", axis, "an include can only combine listed versions")
            if not pins:
                raise _fail(key, "pins nothing", 'list the versions of the cell to add, e.g. torch = "2.5.1"')
            self._profile_names(table.get("profiles"), f"{key}.profiles")

    def _check_constraints(self) -> None:
        for i, constraint in enumerate(self.constraints):
            key = f"constraints[{i}]"
            if constraint.allow_direct and not constraint.why.strip():
                raise _fail(f"{key}.allow_direct", "true without a why", "say why a direct URL is needed in why = ...")
            _keys(constraint.distribution, f"{key}.distribution", self.packages)
            for axis, name in constraint.distribution.items():
                known = list(self.axes[axis].distributions)
                if name not in known:
                    raise _fail(f"{key}.distribution.{axis}", f"{name!r} is not a distribution of {axis}", f"use one of {', '.join(known)}")
            _requirements(constraint.requires, f"{key}.requires", allow_direct=constraint.allow_direct)
            _specifiers(constraint.when, f"{key}.when", self.axes)

    def _check_base_when(self) -> None:
        for i, rule in enumerate(self.base_when):
            key = f"base_when[{i}]"
            _specifiers(rule.when, f"{key}.when", self.axes)
            _keys(rule.pins, f"{key}.pins", [a for a in self.axes if a not in rule.when])
            if not rule.pins:
                raise _fail(f"{key}.pins", "empty", 'name the base pins that stand in, e.g. pins = { torch = "2.14.1" }')
            for axis, version in rule.pins.items():
                self._pinned([version], f"{key}.pins.{axis}", axis, "pin a listed version")
            if not rule.why.strip():
                raise _fail(f"{key}.why", "missing", "say why the base cannot be used there (e.g. no wheel for that Python)")


def _fail(key: str, problem: str, fix: str) -> ValueError:
    return ValueError(f"{key}: {problem}; {fix}")


def _keys(table: Mapping[str, Any], key: str, allowed: Iterable[str]) -> None:
    allowed = set(allowed)
    for name in table:
        if name not in allowed:
            raise _fail(f"{key}.{name}", "unknown key", f"use one of {', '.join(sorted(allowed))}")


def _version(value: str, key: str) -> None:
    try:
        canonical = str(Version(value))
    except InvalidVersion:
        raise _fail(key, f"{value!r} is not a valid version", 'use a released version such as "2.4.1"') from None
    if canonical != value:
        raise _fail(key, f"{value!r} is not written canonically", f'write "{canonical}" (no spaces, prefixes or leading zeros)')


def _versions(values: list[str], key: str, *, symbolic: bool = False) -> None:
    """A non-empty list of canonical versions, each once; with ``symbolic`` (a profile's package axis) ``latest`` too."""
    if not values:
        raise _fail(key, "empty list", "list at least one version, or remove the key")
    for i, value in enumerate(values):
        if not (symbolic and value in SYMBOLIC):
            _version(value, f"{key}[{i}]")
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise _fail(key, f"duplicate version(s) {', '.join(duplicates)}", "list each version once")


def _specifiers(when: Mapping[str, str], key: str, axes: Iterable[str]) -> None:
    _keys(when, key, axes)
    if not when:
        raise _fail(key, "empty condition", 'name at least one axis, e.g. { torch = "<2.3" }')
    for axis, text in when.items():
        try:
            _specifier(text)
        except InvalidSpecifier:
            raise _told("*.when.*", f"{key}.{axis}", text) from None


def _requirements(values: list[str], key: str, *, allow_direct: bool = False) -> None:
    for i, value in enumerate(values):
        try:
            direct = Requirement(value).url
        except InvalidRequirement:
            raise _fail(f"{key}[{i}]", f"{value!r} is not a requirement", 'write it as pip would take it, e.g. "numpy<2"') from None
        if direct and not allow_direct:
            problem = f"{value!r} is a direct URL or path, which no lock or registry can reproduce"
            raise _fail(f"{key}[{i}]", problem, "use a released version, or add allow_direct = true with a why to this entry")


#: How a bad value is told, by its key (``fnmatch`` patterns, ``|`` between alternatives): msgspec's type errors take the
#: first entry that matches, a rule names its entry.
_TOLD = {
    "schema": ("{value!r} is not a known matrix schema", f"set schema = {SCHEMA}"),
    "profiles": ("{value!r} is not a table of profiles", 'declare at least one, e.g. [profiles.smoke] torch = ["2.5.1"]'),
    "gpu.runner*": ("{value!r} is not a list of runner labels", 'write e.g. ["self-hosted", "gpu"]'),
    "*.prefix": ("{value!r} is not a short alphanumeric prefix", 'write e.g. prefix = "np"'),
    "*.distributions.*": ("{value!r} is not a module name", 'write the module to import, e.g. "numpy"'),
    "*.every_cell|*.device_runtime|*.allow_direct": ("{value!r} is not true or false", "write {name} = true, or leave it out"),
    "*.requires*": ("{value!r} is not a list of requirements", 'write e.g. ["numpy<2"]'),
    "*.source_builds": ("{value!r} is not allow or refuse", 'write source_builds = "refuse"'),
    "*.cell_deadline_s": ("{value!r} is not a number of seconds", "write e.g. cell_deadline_s = 3600 (0: none)"),
    "*.max_age_days": ("{value!r} is not a whole number of days", "write e.g. max_age_days = 7 (0: never reuse)"),
    "*.when.*": ("{value!r} is not a version specifier", 'write e.g. "<2.1" or ">=2.3,<2.6"'),
    "*.profiles*": ("{value!r} is not a profile", "use a list of {profiles} (the [profiles.*] tables)"),
    "profiles.*.computed": ("{value!r} is not a .json file name", 'write e.g. computed = "{parts[1]}.json" (beside the matrix)'),
    "profiles.*.within": ("{value!r} is not another profile", "name one of {others}, or remove within"),
    "base_when[[]*]|exclude[[]*]|include[[]*]|constraints[[]*]": ("expected a table, got {type}", "see the comments in matrix.toml"),
    "*]|base.*|*.pins.*|include*.*": ("{value!r} is not a version string", 'write it quoted, e.g. "2.4.1"'),
    "*.versions|profiles.*.*|gpu.*": ("expected a list of versions, got {value!r}", 'write e.g. ["2.4.1", "2.5.1"]'),
    "base_when|exclude|include|constraints": ("expected an array of tables, got {type}", "write [[{key}]] blocks"),
    "*": ("expected a table, got {type}", "see the comments in matrix.toml"),
}


def _told(entry: str, key: str, value: Any, profiles: Iterable[str] = ()) -> ValueError:
    """``key: problem; fix`` for a bad ``value``, as :data:`_TOLD`'s ``entry`` tells it (``profiles``: the declared ones)."""
    told, fix = _TOLD[entry]
    parts, profiles = key.split("."), list(profiles)
    facts = {"value": value, "type": type(value).__name__, "key": key, "name": parts[-1], "parts": parts}
    facts |= {"profiles": ", ".join(profiles), "others": ", ".join(p for p in profiles if p not in parts[1:2]) or "none"}
    return ValueError(f"{key}: {told.format(**facts)}; {fix.format(**facts)}")


def _fields(model: Any) -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(model)}


def _inner(hint: Any, kind: type) -> Any:
    """``hint``, or the member of its union that is a ``kind`` (dict or list)."""
    if get_origin(hint) is kind:
        return hint
    return next(h for h in get_args(hint) if get_origin(h) is kind)


def _fits(value: Any, hint: Any) -> bool:
    try:
        msgspec.convert(value, hint)
    except msgspec.ValidationError:
        return False
    return True


def explain(exc: msgspec.ValidationError, data: Mapping[str, Any]) -> str:
    """``key: problem; fix`` for a :class:`MatrixFile` decoding error of ``data``: a rule's own text, or msgspec's told as one."""
    text = str(exc)
    problem, _, path = text.partition(" - at `$")
    key, value, hint = "", data, MatrixFile
    outer: tuple[str, Any] = (key, value)
    for name, index in re.findall(r"\.(\w+)|\[([^\]]+)\]", path.rstrip("`")):
        if name:  # a struct's field
            key, value, hint = f"{key}.{name}".lstrip("."), value.get(name), _fields(hint)[name]
        elif index == "...":  # msgspec does not say which key of a dict: the first whose value does not fit
            hint = get_args(_inner(hint, dict))[1]
            name = next(k for k, v in value.items() if not _fits(v, hint))
            key, value = f"{key}.{name}", value[name]
        else:
            outer = key, value
            key, value, hint = f"{key}[{index}]", value[int(index)], get_args(_inner(hint, list))[0]
    if found := re.fullmatch(r"Object contains unknown field `(.+)`", problem):
        return f"{key}.{found[1]}".lstrip(".") + f": unknown key; use one of {', '.join(sorted(_fields(hint)))}"
    if found := re.fullmatch(r"Object missing required field `(.+)`", problem):
        key, value = f"{key}.{found[1]}".lstrip("."), None
    elif not path:
        return text  # a rule's own: already "key: problem; fix"
    entry = next(keys for keys in _TOLD if any(fnmatch.fnmatchcase(key, k) for k in keys.split("|")))
    if "list of" in _TOLD[entry][0] and key.endswith("]"):  # a list of requirements or labels is named whole
        key, value = outer
    return str(_told(entry, key, value, data["profiles"] if isinstance(data.get("profiles"), dict) else ()))
