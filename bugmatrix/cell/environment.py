"""The environment as observed inside the running interpreter, not as requested.

Every distribution the cell did not pin is recorded too: an outcome can change overnight with no pin changed.
"""

from __future__ import annotations

import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from bugmatrix.cell.axes import device_runtime, device_runtime_axis, installed_axis_versions

__all__ = ["SOURCE_BUILDS", "describe_environment", "installed_distributions", "observe_environment", "source_builds", "wheel_builds"]

#: Written into a venv by its builder (``bugmatrix.run.envbuild``): the ``name==version`` uv said it built from source.
SOURCE_BUILDS = ".bugmatrix-source-builds"
#: What uv leaves in the ``.dist-info`` of a wheel it built from an sdist (also when the build came from its cache).
UV_BUILT = "uv_build.json"


def installed_distributions() -> dict[str, str]:
    """Every distribution importable here and its version, names normalised (PEP 503), as ``uv pip freeze`` lists them."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return dict(sorted(found.items()))


def wheel_builds() -> dict[str, str]:
    """Build tags of installed wheels that carry one (``Build:`` in ``WHEEL``): another binary under the same version."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name, wheel = (dist.metadata["Name"] if dist.metadata else None), dist.read_text("WHEEL") or ""
        build = next((line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Build:")), "")
        if name and build:
            found.setdefault(canonicalize_name(name), build)
    return dict(sorted(found.items()))


def source_builds(prefix: str | None = None) -> dict[str, str]:
    """Distributions this environment built from source: as the builder recorded (:data:`SOURCE_BUILDS`), or as uv's
    own record in the ``.dist-info`` says (it stays when uv served the build from its cache)."""
    found: dict[str, str] = {}
    root = Path(prefix or sys.prefix)
    recorded = root / SOURCE_BUILDS
    if recorded.is_file():
        for line in recorded.read_text(encoding="utf-8").splitlines():
            match = re.fullmatch(r"(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)", line.strip())
            if match:
                found[canonicalize_name(match["name"])] = match["version"]
    # Another environment's (``prefix``): its own site-packages; this one's: what this interpreter imports.
    where = {"path": [str(p) for p in root.glob("lib/python*/site-packages")]} if prefix else {}
    for dist in metadata.distributions(**where):
        name = dist.metadata["Name"] if dist.metadata else None
        if name and dist.read_text(UV_BUILT) is not None:
            found.setdefault(canonicalize_name(name), dist.version)
    return dict(sorted(found.items()))


def observe_environment() -> dict[str, Any]:
    """Versions, CUDA and GPU as this process sees them (CUDA and GPU from the device runtime axis's module)."""
    build, built = platform.python_build()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "python_build": f"{platform.python_implementation()} {build} ({built}), {platform.python_compiler()}",
        "platform": f"{platform.system()}-{platform.machine()}",
        "executable": sys.executable,
        "distributions": installed_distributions(),
        "wheel_builds": wheel_builds(),
        "source_builds": source_builds(),
    }
    for axis, (dist, version) in installed_axis_versions().items():
        env[axis] = version
        env[f"{axis}_package"] = dist
    try:
        runtime = device_runtime()
    except Exception:  # noqa: BLE001 - a stack that does not import is the import check's observation, not this one's
        runtime = None
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
    built = env.get("source_builds") or {}
    return ", ".join(parts) + ("; built from source: " + ", ".join(f"{n} {v}" for n, v in built.items()) if built else "")
