"""Why a variant cannot run here, as a list of reasons naming the requirement and what is installed (after ``RunIf``).

Version requirements are ``Requires(<axis>=<specifier>)``, the GPU questions go to the device runtime axis, and an
``api`` is attributed to the axis whose distribution provides its top-level module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from bugmatrix.cell.axes import active_spec, device_runtime, device_runtime_axis
from bugmatrix.cell.case import Variant

__all__ = ["GpuFacts", "gpu_facts", "resolve_attribute", "unmet_requirements"]


def resolve_attribute(dotted: str) -> object | None:
    """Import ``a.b.C`` attribute by attribute; None where any part is absent."""
    parts = dotted.split(".")
    try:
        obj: object = importlib.import_module(parts[0])
    except ImportError:
        return None
    for index, part in enumerate(parts[1:], start=1):
        if not hasattr(obj, part):
            try:
                obj = importlib.import_module(".".join(parts[: index + 1]))
                continue
            except ImportError:
                return None
        obj = getattr(obj, part)
    return obj


def _provider_of(module: str) -> str | None:
    """The axis whose distribution provides the top-level module ``module`` in this cell (``torch.amp`` -> the torch axis)."""
    root = module.partition(".")[0]
    for axis, providers in active_spec().items():
        if any(name.partition(".")[0] == root for _, name in providers):
            return axis
    return None


@dataclass(frozen=True)
class GpuFacts:
    """What the device runtime sees of the GPU. Asking initializes CUDA, so the fork runner asks once, in a child, and passes this on."""

    available: bool
    bf16: bool = False
    name: str = ""


def gpu_facts() -> GpuFacts | None:
    """Ask the device runtime axis's module now (this process's CUDA gets initialized where a GPU is present); None where the cell does not install one."""
    runtime = device_runtime()
    if runtime is None:
        return None
    if not runtime.cuda.is_available():
        return GpuFacts(False)
    return GpuFacts(True, bool(runtime.cuda.is_bf16_supported()), runtime.cuda.get_device_name(0))


def unmet_requirements(variant: Variant, versions: Mapping[str, str], gpu: GpuFacts | None = None) -> list[str]:
    """All reasons this variant cannot run with these installed axis versions (``gpu``: facts already known, else asked)."""
    reasons = [f"needs {axis} (not installed here)" for axis in variant.axes if axis not in versions]
    if reasons:
        return reasons
    if variant.device == "cuda":
        axis = device_runtime_axis()
        facts = gpu if gpu is not None else gpu_facts()
        if facts is None or axis is None:
            reasons.append("needs a CUDA GPU, and no device runtime (matrix.toml: device_runtime = true) is installed here to look for one")
        elif not facts.available:
            reasons.append(f"needs a CUDA GPU ({axis} {versions.get(axis, '?')} sees none)")
        elif variant.dtype == "bfloat16" and not facts.bf16:
            reasons.append(f"needs bf16 on {facts.name}")
    need = variant.requires
    reasons += need.unmet(versions)
    if need.api and resolve_attribute(need.api) is None:
        owner = _provider_of(need.api)
        where = f"{owner} {versions[owner]}" if owner in versions else "this cell"
        reasons.append(f"needs {need.api} (absent in {where})")
    return reasons
