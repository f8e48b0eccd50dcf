"""Why a variant cannot run here, as a list of reasons (after Lightning's ``RunIf``).

Each reason names the requirement *and* what is installed, so a skipped cell in
the table always says why ("needs torch.amp.GradScaler (absent in torch 2.2.2)").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from bugmatrix.cell.case import Variant
from bugmatrix.versions import base_version

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


@dataclass(frozen=True)
class GpuFacts:
    """What torch sees of the GPU. Asking initializes CUDA, so the fork runner asks once, in a child, and passes this on."""

    available: bool
    bf16: bool = False
    name: str = ""


def gpu_facts() -> GpuFacts:
    """Ask torch now (this process's CUDA gets initialized where a GPU is present)."""
    import torch

    if not torch.cuda.is_available():
        return GpuFacts(False)
    return GpuFacts(True, bool(torch.cuda.is_bf16_supported()), torch.cuda.get_device_name(0))


def unmet_requirements(variant: Variant, versions: Mapping[str, str], gpu: GpuFacts | None = None) -> list[str]:
    """All reasons this variant cannot run with these installed axis versions (``gpu``: facts already known, else asked)."""
    reasons = [f"needs {axis} (not installed here)" for axis in variant.axes if axis not in versions]
    if reasons:
        return reasons
    torch_version = versions.get("torch", "(not installed)")
    if variant.device == "cuda":
        facts = gpu if gpu is not None else gpu_facts()
        if not facts.available:
            reasons.append(f"needs a CUDA GPU (torch {torch_version} sees none)")
        elif variant.dtype == "bfloat16" and not facts.bf16:
            reasons.append(f"needs bf16 on {facts.name}")
    need = variant.requires
    for axis, minimum in (("torch", need.min_torch), ("lightning", need.min_lightning)):
        if minimum and axis in versions and base_version(versions[axis]) < base_version(minimum):
            reasons.append(f"needs {axis}>={minimum} (installed {versions[axis]})")
    if need.api and resolve_attribute(need.api) is None:
        reasons.append(f"needs {need.api} (absent in torch {torch_version})")
    return reasons
