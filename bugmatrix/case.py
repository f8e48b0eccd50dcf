"""How a case declares itself: variants, requirements and expectations as data.

A case module builds one :class:`Case` and decorates plain functions with
:meth:`Case.variant`. A variant function takes ``(device, dtype)`` and either
raises (the bug, or something else) or returns its positive checks as
``{"what was checked": bool}``. Requirements and expectations are declared
next to it, in the style of Lightning's ``RunIf`` and torch's
``@dtypes``: the same body runs once per declared device, and nothing in the
body branches on versions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from bugmatrix.outcomes import Outcome, Signature
from bugmatrix.versions import base_version

__all__ = ["CPU_BF16", "CUDA_BF16", "CUDA_FP16", "Case", "Checks", "Expect", "Requires", "SkipVariant", "Variant"]

Checks = Mapping[str, bool]
VariantFn = Callable[[str, Any], Checks]

#: The usual device/dtype declarations: fp16 where the seed used ``16-mixed``,
#: bf16 where it used ``bf16-mixed``; the CPU analog is bf16 autocast.
CUDA_FP16 = ("cuda", "float16")
CUDA_BF16 = ("cuda", "bfloat16")
CPU_BF16 = ("cpu", "bfloat16")


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

    ``when`` maps an axis (torch, lightning, transformers) to a specifier;
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
    """One runnable program of a case, on one device."""

    case_id: str
    name: str
    device: str
    dtype: str
    fn: VariantFn = field(repr=False, compare=False)
    axes: tuple[str, ...]
    kind: str  # "core", "framework", "workaround" or "upstream"
    workaround_for: str | None
    requires: Requires
    expect: tuple[Expect, ...]
    doc: str
    #: For an ``upstream`` variant (an upstream issue's snippet or a fixing PR's
    #: regression test): the case's own variant whose outcome it should agree with.
    counterpart: str | None = None

    @property
    def id(self) -> str:
        """Stable id used in run files, reports and on the command line."""
        return f"{self.case_id}::{self.name}[{self.device}]"

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

    def variant(
        self,
        *,
        devices: tuple[tuple[str, str], ...],
        axes: tuple[str, ...] = ("torch",),
        expect: tuple[Expect, ...] = (),
        requires: Requires = Requires(),
        workaround_for: str | None = None,
        kind: str | None = None,
        counterpart: str | None = None,
    ) -> Callable[[VariantFn], VariantFn]:
        """Register the decorated function once per ``(device, dtype)``."""

        def register(fn: VariantFn) -> VariantFn:
            name = fn.__name__
            resolved_kind = kind or ("workaround" if workaround_for else "core")
            for device, dtype in devices:
                self.variants.append(
                    Variant(
                        case_id=self.id,
                        name=name,
                        device=device,
                        dtype=dtype,
                        fn=fn,
                        axes=axes,
                        kind=resolved_kind,
                        workaround_for=workaround_for,
                        requires=requires,
                        expect=expect,
                        doc=(fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "",
                        counterpart=counterpart,
                    )
                )
            return fn

        return register
