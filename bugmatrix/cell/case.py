"""How a case declares itself: variants, requirements and expectations as data.

A case builds one :class:`Case` and decorates plain ``(device, dtype)`` functions with :meth:`Case.variant`; a variant
raises (the bug, or something else) or returns its positive checks as ``{"what": bool}``, never branching on versions.
Declarations are checked at import, so a mistake is one line at collection and at planning alike.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Kind, Outcome, Signature
from bugmatrix.errors import BugmatrixError
from bugmatrix.versions import base_version

__all__ = [
    "CPU_BF16",
    "CPU_FP16",
    "CPU_FP32",
    "CUDA_BF16",
    "CUDA_FP16",
    "CUDA_FP32",
    "DEVICES",
    "DEVICE_CONSTANTS",
    "DTYPES",
    "Case",
    "CaseError",
    "Checks",
    "Expect",
    "Requires",
    "SkipVariant",
    "Source",
    "Variant",
    "case_of_module",
    "observed",
]

Checks = Mapping[str, bool]
VariantFn = Callable[[str, Any], Checks]

#: The usual ``(device, dtype)`` declarations; any other pair of DEVICES x DTYPES is written as a tuple.
CUDA_FP16 = ("cuda", "float16")
CUDA_BF16 = ("cuda", "bfloat16")
CUDA_FP32 = ("cuda", "float32")
CPU_BF16 = ("cpu", "bfloat16")
CPU_FP16 = ("cpu", "float16")
CPU_FP32 = ("cpu", "float32")
#: The names above, for tools that read a case module (repro drops them: declarations only).
DEVICE_CONSTANTS = ("CPU_BF16", "CPU_FP16", "CPU_FP32", "CUDA_BF16", "CUDA_FP16", "CUDA_FP32")
DEVICES = ("cpu", "cuda")
#: dtypes are names (``torch.<name>``), so a declaration can be read without torch.
DTYPES = ("float16", "bfloat16", "float32", "float64")


class CaseError(BugmatrixError):
    """A case module declares something the harness cannot run as written."""


class SkipVariant(Exception):
    """Raised by a variant that finds at run time it cannot run here (with why)."""


def _specifiers(owner: str, when: Mapping[str, str]) -> dict[str, SpecifierSet]:
    """axis -> SpecifierSet, the grammar ``Expect`` and ``Requires`` share; a bad one is a one-line error."""
    specs: dict[str, SpecifierSet] = {}
    for axis, spec in when.items():
        try:
            specs[axis] = SpecifierSet(spec)
        except (InvalidSpecifier, TypeError) as exc:
            msg = f'{owner}: {axis}={spec!r} is not a version specifier; write e.g. {axis}=">=2.1"'
            raise CaseError(msg) from exc
    return specs


@dataclass(frozen=True, init=False)
class Requires:
    """What a variant needs: ``Requires(lightning=">=2.1", api="torch.amp.GradScaler")``; each unmet need is a skip reason."""

    versions: Mapping[str, SpecifierSet]
    api: str | None

    def __init__(self, *, api: str | None = None, **versions: str) -> None:
        object.__setattr__(self, "versions", _specifiers(f"Requires({api=!r})" if api else "Requires()", versions))
        object.__setattr__(self, "api", api)

    def unmet(self, installed: Mapping[str, str]) -> list[str]:
        """Why the installed axis versions fail the version requirements (the api is checked where it can be imported)."""
        reasons = []
        for axis, spec in self.versions.items():
            version = installed.get(axis)
            if version is None:
                reasons.append(f"needs {axis}{spec} (not installed here)")
            elif not spec.contains(base_version(version), prereleases=True):
                reasons.append(f"needs {axis}{spec} (installed {version})")
        return reasons


@dataclass(frozen=True)
class Expect:
    """One expected outcome where every ``when`` specifier holds (on ``device`` if given); ``evidence``: bisect, issue/PR."""

    outcome: Outcome
    when: Mapping[str, SpecifierSet]
    device: str | None
    evidence: str

    def __init__(self, outcome: str | Outcome, *, device: str | None = None, evidence: str = "", **when: str) -> None:
        object.__setattr__(self, "outcome", Outcome(outcome))
        object.__setattr__(self, "when", _specifiers(f"Expect({outcome!r})", when))
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "evidence", evidence)

    def covers(self, versions: Mapping[str, str], device: str) -> bool:
        """True when every specifier holds for the installed versions."""
        return (self.device is None or self.device == device) and all(
            axis in versions and spec.contains(base_version(versions[axis]), prereleases=True) for axis, spec in self.when.items()
        )


def observed(outcome: str | Outcome, *, device: str, evidence: str, **releases: str | tuple[str, ...]) -> tuple[Expect, ...]:
    """``outcome`` at exactly the releases a run observed on ``device`` (one ``==`` :class:`Expect` each), never a range."""
    axes = list(releases)
    values = [(v,) if isinstance(v, str) else tuple(v) for v in releases.values()]
    return tuple(
        Expect(outcome, device=device, evidence=evidence, **{a: f"=={v}" for a, v in zip(axes, combo, strict=True)})
        for combo in itertools.product(*values)
    )


@dataclass(frozen=True)
class Variant:
    """One runnable program of a case, on one device with one dtype."""

    case_id: str
    name: str
    device: str
    dtype: str
    tag: str  # what tells this declaration apart: the device, or device-dtype when one device has two
    fn: VariantFn = field(repr=False, compare=False)
    axes: tuple[str, ...]
    kind: Kind
    workaround_for: str | None
    counterpart: str | None  # for an upstream variant: the case's own variant it should agree with
    requires: Requires
    expect: tuple[Expect, ...]
    doc: str
    environment: str = ""  # the name of its case's Env it runs in ("": the cell's own environment)
    env: Env = field(default_factory=Env)  # that environment: what it has beyond the cell's pins
    at_import: bool = False  # its bug is raised while the cell imports its stack (a failure there is its outcome)
    #: Checks it made once and makes no more: a recorded result naming one is marked "under an old check" by the report.
    old_checks: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """Stable id used in run files, reports and on the command line."""
        return str(VariantId(self.case_id, self.name, self.tag))

    def expectation(self, versions: Mapping[str, str]) -> Expect | None:
        """The first expectation covering these versions, or None ("new")."""
        return next((e for e in self.expect if e.covers(versions, self.device)), None)


@dataclass(frozen=True)
class Source:
    """The document a case reproduces: a title, and a date and a link where known (never a path outside the repository)."""

    title: str
    date: str | None = None  # YYYY-MM-DD, as the document gives it
    link: str | None = None  # http(s)://...
    note: str = ""  # e.g. the language, where a copy was read, why there is no link

    def __post_init__(self) -> None:
        if not isinstance(self.title, str) or not self.title.strip():
            msg = "Source(title=...) is empty; give the document's own title"
            raise CaseError(msg)
        if self.date is not None:
            try:
                dt.date.fromisoformat(str(self.date))
            except ValueError:
                msg = f"Source(date={self.date!r}) is not a date; write it as YYYY-MM-DD, or leave it out where unknown"
                raise CaseError(msg) from None
        if self.link is not None and not str(self.link).startswith(("https://", "http://")):
            msg = f"Source(link={self.link!r}) is not a web address; cite an http(s) link, or leave it out where none is known"
            raise CaseError(msg)

    def cite(self) -> str:
        """``"title" (2025-05-05), https://...``: the one-line citation."""
        return f'"{self.title}"' + (f" ({self.date})" if self.date else "") + (f", {self.link}" if self.link else "")


def _names(value: object) -> bool:  # a tuple of non-empty strings: axis, check or module names
    return isinstance(value, tuple) and all(isinstance(a, str) and a for a in value)


@dataclass
class Case:
    """A documented failure: its story, its signature and its variants.

    ``cross`` narrows its cells to the versions it is about; ``versions`` adds releases matrix.toml does not list.
    """

    id: str
    title: str
    signature: Signature
    source: Source | None = None
    evidence: tuple[str, ...] = ()
    axes: tuple[str, ...] = ()
    variants: list[Variant] = field(default_factory=list)
    #: What the variants import lazily (dotted names): imported once in the cell process, before any variant is forked.
    imports: tuple[str, ...] = ()
    cross: Mapping[str, str] = field(default_factory=dict)
    versions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: name -> :class:`~bugmatrix.cell.caseenv.Env`: the environments its variants may name beyond the cell's own.
    environments: Mapping[str, Env] = field(default_factory=dict)
    seed: InitVar[object] = None

    def __post_init__(self, seed: object) -> None:
        if seed is not None:
            raise self._error(
                f"seed={seed!r} points outside the repository; cite the document as source=Source(title=..., date=..., link=...)"
            )
        if self.source is not None and not isinstance(self.source, Source):
            raise self._error(f"source={self.source!r} is not a Source; write source=Source(title=..., date=..., link=...)")
        if not _names(self.axes):
            raise self._error(f'axes={self.axes!r} is not a tuple of axis names; write e.g. axes=("torch",)')
        if not isinstance(self.cross, Mapping):
            raise self._error(f'cross={self.cross!r} is not a mapping; write e.g. cross={{"transformers": ">=4.46"}}')
        _specifiers(f"case {self.id!r}: cross", self.cross)
        self.versions = self._own_versions()
        if not isinstance(self.environments, Mapping):
            raise self._error(
                f'environments={self.environments!r} is not a mapping; write e.g. environments={{"bare": Env(absent=["setuptools"])}}'
            )
        for name, env in self.environments.items():
            problem = "is not an Env; write Env(requires=..., absent=...)" if not isinstance(env, Env) else env.problem()
            if not (isinstance(name, str) and name.isidentifier()):
                problem = "is not a name; use a Python identifier, e.g. without_setuptools"
            if problem:
                raise self._error(f"environments[{name!r}] {problem}")

    @property
    def narrowing(self) -> dict[str, SpecifierSet]:
        """``cross`` as specifiers: axis -> the versions of it the case's cells may pin."""
        return _specifiers(f"case {self.id!r}: cross", self.cross)

    @property
    def spans(self) -> tuple[str, ...]:
        """Every axis any of its variants spans, sorted: the axes its slice crosses."""
        return tuple(sorted({axis for variant in self.variants for axis in variant.axes}))

    def _own_versions(self) -> dict[str, tuple[str, ...]]:
        """``versions`` checked: axis -> canonical release strings, each once (a bad one is one line)."""
        example = 'write e.g. versions={"transformers": ("4.51.3", "4.52.1")}'
        if not isinstance(self.versions, Mapping):
            raise self._error(f"versions={self.versions!r} is not a mapping; {example}")
        for axis, listed in self.versions.items():
            if not isinstance(axis, str) or not isinstance(listed, (list, tuple)) or not listed:
                raise self._error(f"versions: {axis!r}: {listed!r} is not a list of versions; {example}")
            for text in listed:
                try:
                    canonical = str(Version(text))
                except (InvalidVersion, TypeError):
                    canonical = None
                if canonical != text or listed.count(text) > 1:
                    why = "is listed twice" if canonical == text else "is not a version written canonically"
                    raise self._error(f"versions: {axis}: {text!r} {why}; list each release once, as the registry spells it")
        return {axis: tuple(listed) for axis, listed in self.versions.items()}

    def _error(self, problem: str) -> CaseError:
        return CaseError(f"case {self.id!r}: {problem}")

    def _fail(self, name: str, problem: str, fix: str) -> CaseError:
        return CaseError(f"case {self.id!r}, variant {name!r}: {problem}; {fix}")

    def _tags(self, name: str, devices: tuple[tuple[str, str], ...]) -> list[tuple[str, str, str]]:
        """(device, dtype, tag) per declaration, validated; a device declared twice is tagged with its dtype."""
        if not devices:
            raise self._fail(name, "declares no devices", "pass devices=(CPU_BF16,) or similar")
        for declared in devices:
            if not (isinstance(declared, tuple) and len(declared) == 2):
                raise self._fail(name, f"{declared!r} is not a (device, dtype) pair", 'write e.g. ("cpu", "bfloat16")')
            device, dtype = declared
            if device not in DEVICES:
                raise self._fail(name, f"device {device!r} is unknown", f"use one of {', '.join(DEVICES)}")
            if dtype not in DTYPES:
                raise self._fail(name, f"dtype {dtype!r} is not a dtype name", f"use one of {', '.join(DTYPES)} (a string)")
        repeated = [d for d, n in Counter(devices).items() if n > 1]
        if repeated:
            raise self._fail(name, f"declares {repeated[0]!r} twice", "list each (device, dtype) once")
        per_device = Counter(device for device, _ in devices)
        return [(d, t, d if per_device[d] == 1 else f"{d}-{t}") for d, t in devices]

    def variant(
        self,
        *,
        devices: tuple[tuple[str, str], ...],
        axes: tuple[str, ...] | None = None,
        expect: tuple[Expect, ...] = (),
        requires: Requires = Requires(),
        workaround_for: str | None = None,
        counterpart: str | None = None,
        kind: str | Kind | None = None,
        environment: str = "",
        at_import: bool = False,
        old_checks: tuple[str, ...] = (),
    ) -> Callable[[VariantFn], VariantFn]:
        """Register the decorated function once per ``(device, dtype)``; ``axes`` defaults to the case's.

        ``environment`` names one of ``Case(environments=...)``; ``at_import``: a failed import of the stack is its outcome.
        """
        spans = self.axes if axes is None else axes

        def register(fn: VariantFn) -> VariantFn:
            name = fn.__name__
            if any(v.name == name for v in self.variants):
                raise self._fail(name, "is declared twice", "give each variant function its own name")
            try:
                resolved = Kind(kind) if kind else (Kind.WORKAROUND if workaround_for else Kind.CORE)
            except ValueError:
                raise self._fail(name, f"kind {kind!r} is unknown", f"use one of {', '.join(k.value for k in Kind)}") from None
            if not _names(spans):
                raise self._fail(name, f"axes={spans!r} is not a tuple of axis names", 'write e.g. axes=("torch", "lightning")')
            if not isinstance(requires, Requires):
                raise self._fail(name, f"requires={requires!r} is not a Requires", 'write e.g. requires=Requires(lightning=">=2.1")')
            if environment and environment not in self.environments:
                declared = ", ".join(self.environments) or "none"
                raise self._fail(
                    name, f"environment={environment!r} is not declared", f"add it to Case(environments=...) (declared: {declared})"
                )
            if not _names(old_checks):
                raise self._fail(
                    name, f"old_checks={old_checks!r} is not a tuple of check names", 'write e.g. old_checks=("output matches",)'
                )
            for device, dtype, tag in self._tags(name, tuple(devices)):
                self.variants.append(
                    Variant(
                        case_id=self.id,
                        name=name,
                        device=device,
                        dtype=dtype,
                        tag=tag,
                        fn=fn,
                        axes=spans,
                        kind=resolved,
                        workaround_for=workaround_for,
                        counterpart=counterpart,
                        requires=requires,
                        expect=tuple(expect),
                        doc=(fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "",
                        environment=environment,
                        env=self.environments.get(environment, Env()),
                        at_import=bool(at_import),
                        old_checks=old_checks,
                    )
                )
            return fn

        return register


def case_of_module(namespace: Mapping[str, Any], stem: str, path: object) -> Case:
    """The one :class:`Case` a case module defines; its id must be the file's name (a crash report carries only the path)."""
    found = [v for v in namespace.values() if isinstance(v, Case)]
    if len(found) != 1:
        msg = f"{path}: defines {len(found)} Case objects; a case module defines exactly one (copy cases/autocast_cache.py)"
        raise CaseError(msg)
    if found[0].id != stem:
        msg = f"{path}: Case(id={found[0].id!r}) must equal the file name {stem!r}; rename one of them"
        raise CaseError(msg)
    if not _names(found[0].imports):
        msg = f'{path}: imports={found[0].imports!r} is not a tuple of dotted names; write e.g. imports=("transformers.T5Config",)'
        raise CaseError(msg)
    for variant in found[0].variants:
        for target in (variant.workaround_for, variant.counterpart):
            if target and not any(v.name == target for v in found[0].variants):
                msg = f"{path}: variant {variant.name!r} refers to {target!r}, which the case does not declare; fix the name"
                raise CaseError(msg)
    return found[0]
