"""bugmatrix: executable reproductions of mixed-precision/autograd bugs, run across versions."""

from __future__ import annotations

from bugmatrix.cell.case import (
    CPU_BF16,
    CPU_FP16,
    CPU_FP32,
    CUDA_BF16,
    CUDA_FP16,
    CUDA_FP32,
    Case,
    Checks,
    Expect,
    Requires,
    SkipVariant,
    Source,
    observed,
)
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Outcome, Signature

__all__ = [
    "CPU_BF16",
    "CPU_FP16",
    "CPU_FP32",
    "CUDA_BF16",
    "CUDA_FP16",
    "CUDA_FP32",
    "Case",
    "Checks",
    "Env",
    "Expect",
    "Outcome",
    "Requires",
    "Signature",
    "SkipVariant",
    "Source",
    "observed",
]
