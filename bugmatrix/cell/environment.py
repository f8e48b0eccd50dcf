"""The environment as observed inside the running interpreter, not as requested.

A cell asks for ``torch==2.4.1``; the report must say what was really there
(``2.4.1+cu121``, CUDA 12.1, which GPU), and also everything the cell did not
pin (numpy, setuptools, tokenizers, ...): an outcome can change overnight with
no pin changed, and only the full list of installed distributions can say why.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

from packaging.utils import canonicalize_name

from bugmatrix.cell.axes import device_runtime, device_runtime_axis, installed_axis_versions

__all__ = ["describe_environment", "installed_distributions", "observe_environment", "wheel_builds"]


def installed_distributions() -> dict[str, str]:
    """Every distribution importable here and its version, names normalised (PEP 503), as ``uv pip freeze`` lists them."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return dict(sorted(found.items()))


def wheel_builds() -> dict[str, str]:
    """Build tags of installed wheels that carry one (``Build:`` in ``WHEEL``), names normalised.

    A build tag replaces a release's binary under the same version (torch
    2.10.0 gained ``torch-2.10.0-3-...whl`` weeks after release): only this
    says that ``torch==2.10.0`` installed another file.
    """
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name, wheel = (dist.metadata["Name"] if dist.metadata else None), dist.read_text("WHEEL") or ""
        build = next((line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Build:")), "")
        if name and build:
            found.setdefault(canonicalize_name(name), build)
    return dict(sorted(found.items()))


def observe_environment() -> dict[str, Any]:
    """Versions, CUDA and GPU as this process sees them (CUDA and GPU asked of the device runtime axis's module, if installed)."""
    build, built = platform.python_build()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "python_build": f"{platform.python_implementation()} {build} ({built}), {platform.python_compiler()}",
        "platform": f"{platform.system()}-{platform.machine()}",
        "executable": sys.executable,
        "distributions": installed_distributions(),
        "wheel_builds": wheel_builds(),
    }
    for axis, (dist, version) in installed_axis_versions().items():
        env[axis] = version
        env[f"{axis}_package"] = dist
    runtime = device_runtime()
    if runtime is not None:
        env["cuda"] = runtime.version.cuda
        env["cuda_available"] = bool(runtime.cuda.is_available())
        env["gpu"] = runtime.cuda.get_device_name(0) if env["cuda_available"] else None
    return env


def describe_environment(env: dict[str, Any]) -> str:
    """One line for pytest's header and the report."""
    parts = [f"python {env.get('python')}"]
    axes = [k[: -len("_package")] for k in env if k.endswith("_package")]
    runtime = device_runtime_axis()
    for axis in axes:
        text = f"{env[axis + '_package']} {env[axis]}"
        if axis == runtime:
            text += f" (CUDA {env['cuda']}, {env['gpu'] or 'no GPU'})" if env.get("cuda") else " (CPU build)"
        parts.append(text)
    return ", ".join(parts)
