"""The environment as observed inside the running interpreter, not as requested.

A cell asks for ``torch==2.4.1``; the report must say what was really there
(``2.4.1+cu121``, CUDA 12.1, which GPU), so readers can trust a column.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from bugmatrix.versions import installed_axis_versions

__all__ = ["describe_environment", "observe_environment"]


def observe_environment() -> dict[str, Any]:
    """Versions, CUDA and GPU as this process sees them (imports torch if present)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "executable": sys.executable,
    }
    for axis, (dist, version) in installed_axis_versions().items():
        env[axis] = version
        if axis == "lightning":
            env["lightning_package"] = dist
    if "torch" in env:
        import torch

        env["cuda"] = torch.version.cuda
        env["cuda_available"] = bool(torch.cuda.is_available())
        env["gpu"] = torch.cuda.get_device_name(0) if env["cuda_available"] else None
    return env


def describe_environment(env: dict[str, Any]) -> str:
    """One line for pytest's header and the report."""
    parts = [f"python {env.get('python')}"]
    if env.get("torch"):
        cuda = f" (CUDA {env['cuda']}, {env['gpu'] or 'no GPU'})" if env.get("cuda") else " (CPU build)"
        parts.append(f"torch {env['torch']}{cuda}")
    if env.get("lightning"):
        parts.append(f"{env.get('lightning_package', 'lightning')} {env['lightning']}")
    if env.get("transformers"):
        parts.append(f"transformers {env['transformers']}")
    return ", ".join(parts)
