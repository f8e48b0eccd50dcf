"""Which distribution provides each axis inside this cell, which module to import for it, and which is the device runtime.

The registry is ``matrix.toml``'s ``[axes.<name>]``, handed over as the spec file's ``axis_spec``; nothing in the
harness names an axis.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from bugmatrix.errors import BugmatrixError

__all__ = [
    "AxisSpec",
    "active_spec",
    "device_runtime",
    "device_runtime_axis",
    "import_axis",
    "installed_axis_versions",
    "parse_spec",
    "set_active_spec",
    "spec_from_matrix_file",
]

Providers = Mapping[str, Sequence[tuple[str, str]]]


@dataclass(frozen=True)
class AxisSpec:
    """axis -> ((distribution, import module), ...) in display order (the first installed one counts), and the device runtime axis."""

    providers: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    device_runtime: str | None = None


_ACTIVE = AxisSpec()


def _spec(providers: Providers, device_runtime: object = None) -> AxisSpec:
    table = {str(axis): tuple((str(d), str(m)) for d, m in listed) for axis, listed in providers.items()}
    return AxisSpec(table, str(device_runtime) if device_runtime else None)


def parse_spec(text: str | dict[str, Any]) -> AxisSpec:
    """``{"axes": {"torch": [["torch", "torch"]]}, "device_runtime": "torch"}`` (text or parsed; or bare axes) -> the spec."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
        if isinstance(data.get("axes"), dict):
            return _spec(data["axes"], data.get("device_runtime"))
        return _spec(data)
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"axis_spec: not an axis spec ({exc}); it is written by bugmatrix.run.command, do not hand-edit it"
        raise BugmatrixError(msg) from None


def spec_from_matrix_file(path: Path) -> AxisSpec:
    """The package axes of a ``matrix.toml`` (all providers of each), for runs started without the option."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: nox passes the spec on the command line instead
        msg = f"cannot read {path} on Python < 3.11; pass --bugmatrix-spec with an axis_spec (the runner does)"
        raise BugmatrixError(msg) from None
    try:
        axes = tomllib.loads(path.read_text(encoding="utf-8"))["axes"]
        providers = {name: tuple(table["distributions"].items()) for name, table in axes.items() if "distributions" in table}
        return _spec(providers, next((name for name, table in axes.items() if table.get("device_runtime") is True), None))
    except (OSError, KeyError, TypeError, AttributeError, tomllib.TOMLDecodeError) as exc:
        msg = f"{path}: cannot read the axes ({exc}); run `nox -s plan` to see the matrix error"
        raise BugmatrixError(msg) from None


def set_active_spec(spec: AxisSpec) -> None:
    """Make ``spec`` the registry this process consults (the plugin calls it at configure)."""
    global _ACTIVE  # one registry per process, set once at configure
    _ACTIVE = spec


def active_spec() -> dict[str, tuple[tuple[str, str], ...]]:
    """The registry in force; empty before the plugin configured it."""
    return dict(_ACTIVE.providers)


def device_runtime_axis() -> str | None:
    """The axis the matrix marks ``device_runtime`` when this cell installs it; None otherwise."""
    runtime = _ACTIVE.device_runtime
    providers = _ACTIVE.providers.get(runtime or "", ())
    return runtime if any(_installed(distribution) is not None for distribution, _ in providers) else None


def device_runtime() -> ModuleType | None:
    """The device runtime's module (what answers ``.cuda.is_available()``), or None where the cell does not install it."""
    axis = device_runtime_axis()
    return import_axis(axis) if axis else None


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def installed_axis_versions() -> dict[str, tuple[str, str]]:
    """axis -> (distribution, version) for every axis whose package is installed here."""
    found: dict[str, tuple[str, str]] = {}
    for axis, providers in _ACTIVE.providers.items():
        for distribution, _ in providers:
            version = _installed(distribution)
            if version is not None:
                found[axis] = (distribution, version)
                break
    return found


def import_axis(axis: str) -> ModuleType:
    """The module of the distribution that provides ``axis`` here; no fallback on ImportError (another Lightning would run)."""
    providers = _ACTIVE.providers.get(axis)
    if not providers:
        declared = ", ".join(_ACTIVE.providers) or "none"
        msg = f"axis {axis!r} is not in this run's axis spec ({declared}); declare it in matrix.toml [axes.{axis}]"
        raise BugmatrixError(msg)
    for distribution, module in providers:
        if _installed(distribution) is not None:
            return importlib.import_module(module)
    msg = f"axis {axis!r}: none of {', '.join(d for d, _ in providers)} is installed here"
    raise BugmatrixError(msg)
