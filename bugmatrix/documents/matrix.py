"""``matrix.toml`` as decoded from its parsed TOML: msgspec checks each table's keys, types and ranges (a field's ``Meta``
says what a good value is and how to write one), the rules between tables are :meth:`MatrixFile.__post_init__`'s. Every
defect is one line, ``key: problem; fix``, built by :func:`_fail` (:func:`explain` tells msgspec's errors so too)."""

from __future__ import annotations

import functools
import re
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

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


def _told(what: str, fix: str, **constraints: Any) -> msgspec.Meta:
    """A field's ``constraints``, what a good value is (the schema's description) and how to write one (``{name}``: the key's
    last part): a bad value is ``key: {value!r} is not {what}; {fix}``."""
    return msgspec.Meta(**constraints, description=what, extra={"fix": fix})


_VERSION = _told("a version string", 'write it quoted, e.g. "2.4.1"')
_VERSIONS = _told("a non-empty list of versions", 'write e.g. ["2.4.1", "2.5.1"]', min_length=1)
_SPECIFIER = _told("a version specifier", 'write e.g. "<2.1" or ">=2.3,<2.6"')
_PROFILES = _told("a non-empty list of profiles", 'name [profiles.*] tables, e.g. profiles = ["full"]', min_length=1)
_PROFILE_VALUE = _told(
    "a non-empty list of versions (or, for within and computed, a name)", 'write e.g. torch = ["2.4.1"], within = "full"'
)
_WHY = _told("a sentence", 'write it quoted, e.g. why = "no wheel for that Python"')
Versions = Annotated[list[Annotated[str, _VERSION]], _VERSIONS]
Flag = Annotated[bool, _told("true or false", "write {name} = true, or leave it out")]
Requirements = Annotated[list[str], _told("a list of requirements", 'write e.g. ["numpy<2"]')]


class Table(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A table of the file: an unknown key is an error."""


class AxisTable(Table):
    """``[axes.<name>]``: releases, cell-id prefix, distribution -> module (none: the interpreter), and the axis's role."""

    prefix: Annotated[str, _told("a short alphanumeric prefix", 'write e.g. prefix = "np"', pattern=r"^[^\W_]+$")]
    versions: Versions
    distributions: Annotated[
        dict[str, Annotated[str, _told("a module name", 'write the module to import, e.g. "numpy"', min_length=1)]],
        _told("a table of distributions", 'write e.g. distributions = { numpy = "numpy" }'),
    ] = {}
    every_cell: Flag = False
    device_runtime: Flag = False

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
    when: Annotated[
        dict[str, Annotated[str, _SPECIFIER]],
        _told("a non-empty condition", 'name at least one axis, e.g. { torch = "<2.3" }', min_length=1),
    ]

    @property
    def specifiers(self) -> dict[str, SpecifierSet]:
        """``when`` parsed, axis by axis."""
        return {axis: _specifier(text) for axis, text in self.when.items()}

    def matches(self, pins: Mapping[str, str]) -> bool:
        """``when`` holds at ``pins``."""
        return holds(self.specifiers, pins)


class ExcludeTable(_WhenTable):
    """``[[exclude]]``: a cell matching every specifier of ``when`` is dropped from ``profiles`` (default: all)."""

    profiles: Annotated[list[str], _PROFILES] | None = None
    why: Annotated[str, _WHY] = ""


class BaseWhenTable(_WhenTable):
    """``[[base_when]]``: base pins that stand in where ``when`` holds and the usual base cannot exist."""

    pins: Annotated[
        dict[str, Annotated[str, _VERSION]],
        _told("a table of base pins", 'name the pins that stand in, e.g. pins = { torch = "2.14.1" }', min_length=1),
    ]
    why: Annotated[str, _told("a sentence", "say why the base cannot be used there (e.g. no wheel for that Python)", pattern=r"\S")]

    def apply(self, pins: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        """``pins`` with every axis that is held at base (not spanned) replaced, when ``when`` matches."""
        if not self.matches(pins):
            return dict(pins)
        return {a: self.pins[a] if a in self.pins and v == base.get(a) else v for a, v in pins.items()}


class ConstraintTable(_WhenTable):
    """``[[constraints]]``: extra requirements (and distributions) where ``when`` holds at a cell's effective pins."""

    requires: Requirements = []
    distribution: dict[str, str] = {}
    why: Annotated[str, _WHY] = ""
    allow_direct: Flag = False


class HarnessTable(Table):
    """``[harness]``: what every cell installs besides its pins, and how it builds and ends."""

    requires: Requirements = []
    source_builds: Annotated[Literal["allow", "refuse"], _told("allow or refuse", 'write source_builds = "refuse"')] = "allow"
    cell_deadline_s: Annotated[
        float, _told("a number of seconds", "write e.g. cell_deadline_s = 3600 (0: none)", ge=0, le=sys.float_info.max)
    ] = 0

    @property
    def no_build(self) -> bool:
        """A cell with no wheel to install is its install failure, never a source build."""
        return self.source_builds == "refuse"


class ReuseTable(Table):
    """``[reuse]``: results older than ``max_age_days`` are observed again."""

    # not said: every cell really runs at least once a week
    max_age_days: Annotated[int, _told("a whole number of days", "write e.g. max_age_days = 7 (0: never reuse)", ge=0)] = 7


class MatrixFile(Table, kw_only=True):
    """The whole file; tables keyed by axis (``[base]``, a profile, ``[gpu]``, ``when``, ``pins``) are checked here."""

    schema: Annotated[Literal[2], _told("a known matrix schema", f"set schema = {SCHEMA}")]
    axes: dict[str, AxisTable] = {}
    base: dict[str, Annotated[str, _VERSION]] = {}
    profiles: Annotated[
        dict[str, dict[str, Annotated[Versions | str, _PROFILE_VALUE]]],
        _told("a table of profiles", 'declare at least one, e.g. [profiles.smoke] torch = ["2.5.1"]', min_length=1),
    ]
    base_when: list[BaseWhenTable] = []
    exclude: list[ExcludeTable] = []
    include: list[
        dict[str, Annotated[str | list[str], _told("a version string (profiles: a list of profiles)", 'write it quoted, e.g. "2.4.1"')]]
    ] = []
    constraints: list[ConstraintTable] = []
    harness: HarnessTable = HarnessTable()
    gpu: dict[
        str, Annotated[list[str], _told("a non-empty list", 'write e.g. torch = ["2.5.1"], runner = ["self-hosted", "gpu"]', min_length=1)]
    ] = {}
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
            self._pinned(self.base[axis], f"base.{axis}", axis)
        self._check_profiles()
        _requirements(self.harness.requires, "harness.requires")
        _keys(self.gpu, "gpu", [*self.packages, "runner"])
        for axis, versions in self.gpu_select.items():
            self._versions(versions, f"gpu.{axis}", axis)
        for name in ("exclude", "include", "constraints", "base_when"):  # each [[name]] table by its _check_<name>
            for i, table in enumerate(getattr(self, name)):
                if isinstance(table, _WhenTable):
                    _specifiers(table.when, f"{name}[{i}].when", self.axes)
                getattr(self, f"_check_{name}")(table, f"{name}[{i}]")

    def _check_axes(self) -> None:
        for i, (name, axis) in enumerate(self.axes.items()):
            key, before = f"axes.{name}", list(self.axes)[:i]
            if name in PROFILE_KEYS:
                raise _fail(key, f"{name!r} is a word [profiles.*] tables use", "name the axis otherwise")
            if any(self.axes[n].prefix == axis.prefix for n in before):
                raise _fail(f"{key}.prefix", f"{axis.prefix!r} is used by another axis", "cell ids must tell axes apart: pick another")
            if (axis.every_cell or axis.device_runtime) and axis.is_interpreter:
                raise _fail(f"{key}.{'every_cell' if axis.every_cell else 'device_runtime'}", "set on the interpreter axis", "remove it")
            if axis.device_runtime and (other := next((n for n in before if self.axes[n].device_runtime), None)):
                raise _fail(f"{key}.device_runtime", f"axes.{other} is the device runtime already", "mark one axis only")
            self._versions(axis.versions, f"{key}.versions")
        interpreters = [f"axes.{name}" for name, axis in self.axes.items() if axis.is_interpreter]
        if not interpreters:
            raise _fail("axes", "no interpreter axis", 'declare one without distributions: [axes.python] prefix = "py", versions = [...]')
        if len(interpreters) > 1:
            fix = 'only the interpreter axis has none: give the others theirs, e.g. distributions = { numpy = "numpy" }'
            raise _fail(" and ".join(f"{k}.distributions" for k in interpreters), "missing", fix)

    def _pinned(self, value: str, key: str, axis: str = "") -> None:
        """A canonical version (one of ``axis``'s, when named)."""
        _version(value, key)
        if axis and value not in self.axes[axis].versions:
            raise _fail(key, f"{value!r} is not in axes.{axis}.versions", f"use one of them, or add it to axes.{axis}.versions")

    def _versions(self, values: list[str], key: str, axis: str = "", *, symbolic: bool = False) -> None:
        """Canonical versions, each once (with ``symbolic``, a profile's package axis: ``latest`` too), all of ``axis``'s."""
        for i, value in enumerate(values):
            if not (symbolic and value in SYMBOLIC):
                self._pinned(value, f"{key}[{i}]", axis)
        if duplicates := sorted({v for v in values if values.count(v) > 1}):
            raise _fail(key, f"duplicate version(s) {', '.join(duplicates)}", "list each version once")

    def _profile_names(self, names: list[str], key: str) -> None:
        if bad := [n for n in names if n not in self.profiles]:
            raise _fail(key, f"{bad[0]!r} is not a profile", f"use a list of {', '.join(self.profiles)} (the [profiles.*] tables)")

    def _check_profiles(self) -> None:
        """``within`` is checked axis-wise here (cell-wise by the planner)."""
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
                    raise _bad(f"{key}.{axis}", values, _VERSIONS)
                self._versions(values, f"{key}.{axis}", axis, symbolic=not self.axes[axis].is_interpreter)
            computed = table.get("computed")
            if not listed and computed is None:
                example = next(iter(self.packages), next(iter(self.axes)))
                fix = f'list the versions it runs, e.g. {example} = ["{self.axes[example].versions[-1]}"], or remove it'
                raise _fail(key, "lists no versions (and is not computed): it would plan the base cells alone", fix)
            if computed is not None:
                if not isinstance(computed, str) or not re.fullmatch(r"[^./][^/]*\.json", computed):
                    fix = f'write e.g. computed = "{name}.json" (beside the matrix)'
                    raise _fail(f"{key}.computed", f"{computed!r} is not a .json file name", fix)
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
                others = ", ".join(p for p in self.profiles if p != name) or "none"
                raise _fail(key, f"{larger!r} is not another profile", f"name one of {others}, or remove within")
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

    def _check_exclude(self, rule: ExcludeTable, key: str) -> None:
        self._profile_names(rule.profiles or [], f"{key}.profiles")

    def _check_include(self, table: dict[str, str | list[str]], key: str) -> None:
        _keys(table, key, [*self.axes, "profiles"])
        pins = {axis: version for axis, version in table.items() if axis != "profiles"}
        for axis, version in pins.items():
            if not isinstance(version, str):
                raise _bad(f"{key}.{axis}", version, _VERSION)
            self._pinned(version, f"{key}.{axis}", axis)
        if not pins:
            raise _fail(key, "pins nothing", 'list the versions of the cell to add, e.g. torch = "2.5.1"')
        if not isinstance(names := table.get("profiles", []), list):
            raise _bad(f"{key}.profiles", names, _PROFILES)
        self._profile_names(names, f"{key}.profiles")

    def _check_constraints(self, constraint: ConstraintTable, key: str) -> None:
        if constraint.allow_direct and not constraint.why.strip():
            raise _fail(f"{key}.allow_direct", "true without a why", "say why a direct URL is needed in why = ...")
        _keys(constraint.distribution, f"{key}.distribution", self.packages)
        for axis, name in constraint.distribution.items():
            known = list(self.axes[axis].distributions)
            if name not in known:
                raise _fail(f"{key}.distribution.{axis}", f"{name!r} is not a distribution of {axis}", f"use one of {', '.join(known)}")
        _requirements(constraint.requires, f"{key}.requires", allow_direct=constraint.allow_direct)

    def _check_base_when(self, rule: BaseWhenTable, key: str) -> None:
        _keys(rule.pins, f"{key}.pins", [a for a in self.axes if a not in rule.when])
        for axis, version in rule.pins.items():
            self._pinned(version, f"{key}.pins.{axis}", axis)


def _fail(key: str, problem: str, fix: str) -> ValueError:
    """The one form of every defect: ``key: problem; fix``."""
    return ValueError(f"{key}: {problem}; {fix}")


def _bad(key: str, value: Any, meta: msgspec.Meta) -> ValueError:
    """``key: {value!r} is not {what}; {fix}``, as a field's ``meta`` (made by :func:`_told`) says."""
    return _fail(key, f"{value!r} is not {meta.description}", meta.extra["fix"].replace("{name}", key.rpartition(".")[2]))


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


def _specifiers(when: Mapping[str, str], key: str, axes: Iterable[str]) -> None:
    _keys(when, key, axes)
    for axis, text in when.items():
        try:
            _specifier(text)
        except InvalidSpecifier:
            raise _bad(f"{key}.{axis}", text, _SPECIFIER) from None


def _requirements(values: list[str], key: str, *, allow_direct: bool = False) -> None:
    for i, value in enumerate(values):
        try:
            direct = Requirement(value).url
        except InvalidRequirement:
            raise _fail(f"{key}[{i}]", f"{value!r} is not a requirement", 'write it as pip would take it, e.g. "numpy<2"') from None
        if direct and not allow_direct:
            problem = f"{value!r} is a direct URL or path, which no lock or registry can reproduce"
            raise _fail(f"{key}[{i}]", problem, "use a released version, or add allow_direct = true with a why to this entry")


def _fields(model: Any) -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(model)}


def _meta(hint: Any) -> msgspec.Meta | None:
    """What ``hint`` (or, for a union, its annotated member) says a good value is, if it says."""
    for one in (hint, *(get_args(hint) if get_origin(hint) in (Union, types.UnionType) else ())):
        if get_origin(one) is Annotated:
            return one.__metadata__[0]
    return None


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _item(hint: Any, kind: type) -> Any:
    """The value type of ``hint`` (or of its union's member) that is a ``kind`` (dict or list)."""
    hint = _bare(hint)
    return get_args(next(h for h in (hint, *map(_bare, get_args(hint))) if get_origin(h) is kind))[-1]


def _fits(value: Any, hint: Any) -> bool:
    try:
        msgspec.convert(value, hint)
    except msgspec.ValidationError:
        return False
    return True


def explain(exc: msgspec.ValidationError, data: Mapping[str, Any]) -> str:
    """``key: problem; fix`` for a :class:`MatrixFile` decoding error of ``data``: a rule's own, or msgspec's told by the ``Meta``
    of the field that failed (a list or table whose items have none is named whole)."""
    problem, _, path = str(exc).partition(" - at `$")
    if not path and not problem.startswith("Object "):
        return problem  # a rule's own: already "key: problem; fix"
    key, value, hint = "", data, MatrixFile
    told: tuple[str, Any, msgspec.Meta] | None = None
    for name, index in re.findall(r"\.(\w+)|\[([^\]]+)\]", path.rstrip("`")):
        if name:  # a struct's field: told on its own
            key, value, hint, told = f"{key}.{name}".lstrip("."), value.get(name), _fields(hint)[name], None
        elif index == "...":  # msgspec does not say which key of a dict: the first whose value does not fit
            hint = _item(hint, dict)
            name = next(k for k, v in value.items() if not _fits(v, hint))
            key, value = f"{key}.{name}", value[name]
        else:
            key, value, hint = f"{key}[{index}]", value[int(index)], _item(hint, list)
        told = (key, value, meta) if (meta := _meta(hint)) else told
    if found := re.fullmatch(r"Object contains unknown field `(.+)`", problem):
        return str(_fail(f"{key}.{found[1]}".lstrip("."), "unknown key", f"use one of {', '.join(sorted(_fields(hint)))}"))
    if found := re.fullmatch(r"Object missing required field `(.+)`", problem):
        return str(_fail(f"{key}.{found[1]}".lstrip("."), "missing", _meta(_fields(hint)[found[1]]).extra["fix"]))
    return str(_bad(*told) if told else _fail(key, f"{value!r} is not valid here ({problem})", "see the comments in matrix.toml"))
