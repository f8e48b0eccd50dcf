"""How a case declares itself: variants, requirements and expectations as data.

A case module builds one :class:`Case` and decorates plain functions with
:meth:`Case.variant`. A variant function takes ``(device, dtype)`` and either
raises (the bug, or something else) or returns its positive checks as
``{"what was checked": bool}``. Requirements and expectations are declared
next to it, in the style of Lightning's ``RunIf`` and torch's
``@dtypes``: the same body runs once per declared device, and nothing in the
body branches on versions.

Declarations are validated when the module is imported, so a mistake is one
line at collection (pytest) and at planning (nox) alike: an unknown device or
dtype, the same ``(device, dtype)`` twice, a name declared twice. Two dtypes on
one device get distinct ids (``name[cpu-float16]``): a result is never lost to
an id collision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Kind, Outcome, Signature
from bugmatrix.errors import BugmatrixError
from bugmatrix.versions import base_version

__all__ = [
    "CPU_BF16",
    "CUDA_BF16",
    "CUDA_FP16",
    "DEVICES",
    "DTYPES",
    "Case",
    "CaseError",
    "Checks",
    "Expect",
    "Requires",
    "SkipVariant",
    "Variant",
    "case_of_module",
]

Checks = Mapping[str, bool]
VariantFn = Callable[[str, Any], Checks]

#: The usual device/dtype declarations: fp16 where the seed used ``16-mixed``,
#: bf16 where it used ``bf16-mixed``; the CPU analog is bf16 autocast.
CUDA_FP16 = ("cuda", "float16")
CUDA_BF16 = ("cuda", "bfloat16")
CPU_BF16 = ("cpu", "bfloat16")
DEVICES = ("cpu", "cuda")
#: dtypes are names (``torch.<name>``), so a declaration can be read without torch.
DTYPES = ("float16", "bfloat16", "float32", "float64")


class CaseError(BugmatrixError):
    """A case module declares something the harness cannot run as written."""


class SkipVariant(Exception):
    """Raised by a variant that finds at run time it cannot run here (with why)."""


@dataclass(frozen=True)
class Requires:
    """What a variant needs; each unmet need becomes a skip reason naming the version."""

    min_torch: str | None = None
    min_lightning: str | None = None  # e.g. "2.1" for precision="bf16-true"
    api: str | None = None  # dotted attribute, e.g. "torch.amp.GradScaler"


@dataclass(frozen=True)
class Expect:
    """One expected outcome and the environments it covers.

    ``when`` maps an axis (torch, lightning, transformers, ...) to a specifier;
    ``device`` limits it to one device. ``evidence`` says where the boundary
    comes from: the bisect result and the upstream issue/PR.
    """

    outcome: Outcome
    when: Mapping[str, SpecifierSet]
    device: str | None
    evidence: str

    def __init__(self, outcome: str | Outcome, *, device: str | None = None, evidence: str = "", **when: str) -> None:
        object.__setattr__(self, "outcome", Outcome(outcome))
        specs: dict[str, SpecifierSet] = {}
        for axis, spec in when.items():
            try:
                specs[axis] = SpecifierSet(spec)
            except InvalidSpecifier as exc:
                msg = f"Expect({outcome!r}): {axis}={spec!r} is not a version specifier"
                raise ValueError(msg) from exc
        object.__setattr__(self, "when", specs)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "evidence", evidence)

    def covers(self, versions: Mapping[str, str], device: str) -> bool:
        """True when every specifier holds for the installed versions."""
        if self.device is not None and self.device != device:
            return False
        for axis, spec in self.when.items():
            installed = versions.get(axis)
            if installed is None or not spec.contains(base_version(installed), prereleases=True):
                return False
        return True


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

    @property
    def id(self) -> str:
        """Stable id used in run files, reports and on the command line."""
        return str(VariantId(self.case_id, self.name, self.tag))

    def expectation(self, versions: Mapping[str, str]) -> Expect | None:
        """The first expectation covering these versions, or None ("new")."""
        return next((e for e in self.expect if e.covers(versions, self.device)), None)


@dataclass
class Case:
    """A documented failure: its story, its signature and its variants."""

    id: str
    title: str
    seed: str
    signature: Signature
    evidence: tuple[str, ...] = ()
    variants: list[Variant] = field(default_factory=list)
    #: What the variants import lazily, as dotted names (``"transformers.T5ForConditionalGeneration"``): imported once
    #: in the cell process before any variant runs, so each forked child finds it imported (an axis's own module,
    #: ``import torch`` and the like, needs no entry). One that is absent here is left to the variant to report.
    imports: tuple[str, ...] = ()

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
        axes: tuple[str, ...] = ("torch",),
        expect: tuple[Expect, ...] = (),
        requires: Requires = Requires(),
        workaround_for: str | None = None,
        counterpart: str | None = None,
        kind: str | Kind | None = None,
    ) -> Callable[[VariantFn], VariantFn]:
        """Register the decorated function once per ``(device, dtype)``."""

        def register(fn: VariantFn) -> VariantFn:
            name = fn.__name__
            if any(v.name == name for v in self.variants):
                raise self._fail(name, "is declared twice", "give each variant function its own name")
            try:
                resolved = Kind(kind) if kind else (Kind.WORKAROUND if workaround_for else Kind.CORE)
            except ValueError:
                raise self._fail(name, f"kind {kind!r} is unknown", f"use one of {', '.join(k.value for k in Kind)}") from None
            if not isinstance(axes, tuple) or not axes or not all(isinstance(a, str) for a in axes):
                raise self._fail(name, f"axes={axes!r} is not a tuple of axis names", 'write e.g. axes=("torch", "lightning")')
            for device, dtype, tag in self._tags(name, tuple(devices)):
                self.variants.append(
                    Variant(
                        case_id=self.id, name=name, device=device, dtype=dtype, tag=tag, fn=fn, axes=axes, kind=resolved,
                        workaround_for=workaround_for, counterpart=counterpart, requires=requires, expect=tuple(expect),
                        doc=(fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "",
                    )
                )  # fmt: skip
            return fn

        return register


def case_of_module(namespace: Mapping[str, Any], stem: str, path: object) -> Case:
    """The one :class:`Case` a case module defines; its id must be the file's name.

    The id doubles as the file name so that a result can always be traced back
    to its file (a crashed worker's report carries only the file path).
    """
    found = [v for v in namespace.values() if isinstance(v, Case)]
    if len(found) != 1:
        msg = f"{path}: defines {len(found)} Case objects; a case module defines exactly one (copy cases/autocast_cache.py)"
        raise CaseError(msg)
    if found[0].id != stem:
        msg = f"{path}: Case(id={found[0].id!r}) must equal the file name {stem!r}; rename one of them"
        raise CaseError(msg)
    if not isinstance(found[0].imports, tuple) or not all(isinstance(i, str) and i for i in found[0].imports):
        msg = f'{path}: imports={found[0].imports!r} is not a tuple of dotted names; write e.g. imports=("transformers.T5Config",)'
        raise CaseError(msg)
    for variant in found[0].variants:
        for target in (variant.workaround_for, variant.counterpart):
            if target and not any(v.name == target for v in found[0].variants):
                msg = f"{path}: variant {variant.name!r} refers to {target!r}, which the case does not declare; fix the name"
                raise CaseError(msg)
    return found[0]
