"""Import, once and before any variant runs, what the selected variants will import; and the environment's import check.

Every forked child then finds it imported. A stack that installs but does not import (``$BUGMATRIX_IMPORT_CHECK``) is
an observation (:class:`ImportFailure`), not a failure.
"""

from __future__ import annotations

import importlib
import os
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bugmatrix.cell.axes import device_runtime_axis, import_axis, installed_axis_versions
from bugmatrix.cell.case import Case, Variant

__all__ = [
    "IMPORT_CHECK_ENV",
    "MANY_MODULES",
    "ImportFailure",
    "Preloaded",
    "checked_modules",
    "import_check",
    "preload",
    "resolve_attribute",
    "uncovered_imports",
]

#: Comma-separated modules the cell's environment must import (set by the runner; unset: no check).
IMPORT_CHECK_ENV = "BUGMATRIX_IMPORT_CHECK"
#: Frames of the import machinery itself: never where a failure was raised.
_MACHINERY = (str(Path(importlib.__file__).parent), __file__)


@dataclass(frozen=True)
class ImportFailure:
    """The stack's import that failed: the module asked for, the exception, where it was raised and its traceback."""

    module: str
    error: BaseException = field(compare=False)
    where: str = ""  # ``lightning_utilities/core/imports.py:13``: the last frame outside the import machinery ("" if none)
    log: str = ""

    @property
    def line(self) -> str:
        """``import x: ModuleNotFoundError: No module named 'pkg_resources' (x/core.py:13)``: what the records say."""
        first = next((part for part in str(self.error).strip().splitlines() if part.strip()), "")
        return f"import {self.module}: {type(self.error).__name__}: {first}" + (f" ({self.where})" if self.where else "")


def _where(error: BaseException) -> str:
    """The file:line that raised ``error``, relative to site-packages where it is there."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(("<", *_MACHINERY))]
    if not frames:
        return ""
    return f"{frames[-1].filename.rpartition('site-packages/')[2]}:{frames[-1].lineno}"


def resolve_attribute(dotted: str) -> object | None:
    """Import ``a.b.C`` attribute by attribute; None where any part is absent."""
    parts, obj = dotted.split("."), None
    for index, part in enumerate(parts):
        if index and hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: index + 1]))
        except ImportError:
            return None
    return obj


@dataclass(frozen=True)
class Preloaded:
    """What was imported, how long it took, and what failed to import (each variant will say so itself)."""

    names: tuple[str, ...]
    seconds: float
    failed: tuple[str, ...] = ()


def checked_modules() -> list[str]:
    """The modules ``$BUGMATRIX_IMPORT_CHECK`` names (none: this run checks nothing)."""
    return [name.strip() for name in os.environ.get(IMPORT_CHECK_ENV, "").split(",") if name.strip()]


def import_check(modules: Iterable[str]) -> ImportFailure | None:
    """Import ``modules`` in order; the first failure (a warning turned into an error by ``-W error`` too), else None."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any import failure is what this environment does: observed, never raised
            return ImportFailure(name, exc, _where(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return None


def preload(variants: Iterable[Variant], cases: Iterable[Case]) -> Preloaded:
    """Import the axis modules of ``variants`` and the ``imports`` of ``cases``, theirs (each once; failures noted, not raised)."""
    variants = list(variants)
    installed = installed_axis_versions()
    runtime = device_runtime_axis()  # every child seeds it (execution.seed_everything)
    spanned = {axis for v in variants for axis in v.axes} | ({runtime} if runtime and variants else set())
    axes = sorted(axis for axis in spanned if axis in installed)
    started = time.perf_counter()
    names, failed = [], []
    for axis in axes:
        try:
            names.append(import_axis(axis).__name__)
        except Exception as exc:  # noqa: BLE001 - the variants that need it record the failure themselves
            failed.append(f"{axis}: {type(exc).__name__}: {exc}")
    for dotted in (name for case in cases for name in case.imports):
        try:
            found = resolve_attribute(dotted)
        except Exception as exc:  # noqa: BLE001 - same: a broken import is the variant's outcome to record
            failed.append(f"{dotted}: {type(exc).__name__}: {exc}")
            continue
        (names if found is not None else failed).append(dotted if found is not None else f"{dotted}: not importable here")
    return Preloaded(tuple(dict.fromkeys(names)), time.perf_counter() - started, tuple(failed))


#: A variant that imports this many modules of one package in its child pays for an import worth declaring.
MANY_MODULES = 50


def uncovered_imports(imported: Iterable[str], roots: Iterable[str]) -> list[str]:
    """Per package of ``roots`` a variant imported :data:`MANY_MODULES` of itself, the subpackage that pulled in most."""
    roots = set(roots)
    counts: dict[str, Counter[str]] = {}
    for name in imported:
        parts = name.split(".")
        if parts[0] in roots:
            counts.setdefault(parts[0], Counter())[".".join(parts[:2])] += 1
    return sorted(c.most_common(1)[0][0] for c in counts.values() if sum(c.values()) >= MANY_MODULES)
