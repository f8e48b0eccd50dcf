"""Which distribution provides each axis inside this cell, and which module to import for it.

The registry itself lives in ``matrix.toml`` (``[axes.<name>]``, read on the
host by :mod:`bugmatrix.plan.matrix`). A cell learns its part from the pytest
option ``--bugmatrix-axis-spec`` (JSON, passed by the one command builder in
:mod:`bugmatrix.run.command`); a run without it (``python -m pytest cases/`` on a
GPU runner's baked image) reads ``matrix.toml`` itself where ``tomllib``
exists. Nothing in the harness names an axis: adding one is a ``matrix.toml``
entry.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import ModuleType

from bugmatrix.errors import BugmatrixError

__all__ = [
    "AxisSpec",
    "active_spec",
    "import_axis",
    "installed_axis_versions",
    "parse_spec",
    "set_active_spec",
    "spec_from_matrix_file",
]

#: axis -> ((distribution, import module), ...), in display order; the first installed one counts.
AxisSpec = Mapping[str, Sequence[tuple[str, str]]]

_ACTIVE: dict[str, tuple[tuple[str, str], ...]] = {}


def parse_spec(text: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """``{"torch": [["torch", "torch"]], ...}`` -> the spec; a malformed one is a one-line error."""
    try:
        data = json.loads(text)
        spec = {str(axis): tuple((str(d), str(m)) for d, m in providers) for axis, providers in data.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"--bugmatrix-axis-spec: not an axis spec ({exc}); it is written by bugmatrix.run.command, do not hand-edit it"
        raise BugmatrixError(msg) from None
    return spec


def spec_from_matrix_file(path: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """The package axes of a ``matrix.toml`` (all providers of each), for runs started without the option."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: nox passes the spec on the command line instead
        msg = f"cannot read {path} on Python < 3.11; pass --bugmatrix-axis-spec (the nox sessions do)"
        raise BugmatrixError(msg) from None
    try:
        axes = tomllib.loads(path.read_text(encoding="utf-8"))["axes"]
        return {name: tuple(table["distributions"].items()) for name, table in axes.items() if "distributions" in table}
    except (OSError, KeyError, TypeError, AttributeError, tomllib.TOMLDecodeError) as exc:
        msg = f"{path}: cannot read the axes ({exc}); run `nox -s plan` to see the matrix error"
        raise BugmatrixError(msg) from None


def set_active_spec(spec: AxisSpec) -> None:
    """Make ``spec`` the registry this process consults (the plugin calls it at configure)."""
    _ACTIVE.clear()
    _ACTIVE.update({axis: tuple(providers) for axis, providers in spec.items()})


def active_spec() -> dict[str, tuple[tuple[str, str], ...]]:
    """The registry in force; empty before the plugin configured it."""
    return dict(_ACTIVE)


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def installed_axis_versions(spec: AxisSpec | None = None) -> dict[str, tuple[str, str]]:
    """axis -> (distribution, version) for every axis whose package is installed here."""
    found: dict[str, tuple[str, str]] = {}
    for axis, providers in (spec if spec is not None else _ACTIVE).items():
        for distribution, _ in providers:
            version = _installed(distribution)
            if version is not None:
                found[axis] = (distribution, version)
                break
    return found


def import_axis(axis: str) -> ModuleType:
    """The module of the distribution that provides ``axis`` here (``lightning.pytorch`` or ``pytorch_lightning``).

    There is deliberately no fallback on ImportError: every ``lightning``
    release pulls in an unpinned ``pytorch-lightning``, so falling back would
    silently run another Lightning than the one the cell pins and records.
    """
    providers = _ACTIVE.get(axis)
    if not providers:
        msg = f"axis {axis!r} is not in this run's axis spec ({', '.join(_ACTIVE) or 'none'}); declare it in matrix.toml [axes.{axis}]"
        raise BugmatrixError(msg)
    for distribution, module in providers:
        if _installed(distribution) is not None:
            return importlib.import_module(module)
    msg = f"axis {axis!r}: none of {', '.join(d for d, _ in providers)} is installed here"
    raise BugmatrixError(msg)
