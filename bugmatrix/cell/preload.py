"""Import, once and before any variant runs, what the selected variants will import.

Two reasons, one list. Speed: the fork runner forks every variant from the
cell process, so whatever that process has imported each child gets for free
(transformers' T5 classes alone take seconds; imported in every child they
would be paid per variant). Honest leaks: state a library sets at import
(Lightning's ``lightning_fabric`` sets ``PYTORCH_NVML_BASED_CUDA_CHECK``) then
belongs to the baseline every variant's snapshot is taken from, so it is
never blamed on whichever variant imported the library first, and the same
run twice names the same leakers.

What is imported is data, nothing here names a library: the module of every
axis the selected variants span (``matrix.toml``'s ``[axes.<name>]``), the
device runtime axis's module wherever the cell installs it (every child seeds
it and takes its dtypes from it, whatever axes its variant spans: imported in
the child, it would be paid per variant, inside the variant's timeout), and the
dotted names a case lists in ``Case(imports=...)`` for what it imports lazily.
A variant whose own imports are not covered still runs (it pays for them in
its child); the plugin names those modules at the end of the run so the case
can declare them.

Importing must not initialize CUDA, start a parallel torch op or a thread:
importing a library does none of those (the tests check the first two).

The same import is the environment's import check (:func:`import_check`):
the runner (``bugmatrix.run.runner``) names the modules every pinned
distribution must provide in ``$BUGMATRIX_IMPORT_CHECK``, and the process that
runs the variants imports them before anything else. A separate check process
would import the whole stack a second time (seconds per cell, every cell in
lean mode); this way the import that is checked is the one the variants fork
from. A stack that installed but does not import is an observation, not an
install failure (an old release that imports ``pkg_resources``, a NumPy-2
alias gone, ``-W error`` meeting a deprecation): :class:`ImportFailure` keeps
the module, the exception, its first line and the file:line that raised it,
and the plugin classifies from it every variant whose bug is raised at that
import (``at_import=True``) and records the others as skipped with it.
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


@dataclass(frozen=True)
class Preloaded:
    """What was imported, how long it took, and what failed to import (each variant will say so itself)."""

    names: tuple[str, ...]
    seconds: float
    failed: tuple[str, ...] = ()


def checked_modules(environ: dict[str, str] | None = None) -> list[str]:
    """The modules ``$BUGMATRIX_IMPORT_CHECK`` names (none: this run checks nothing)."""
    text = (environ if environ is not None else os.environ).get(IMPORT_CHECK_ENV, "")
    return [name.strip() for name in text.split(",") if name.strip()]


def import_check(modules: Iterable[str]) -> ImportFailure | None:
    """Import ``modules`` in order; the first failure (a warning turned into an error by ``-W error`` too), else None."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any import failure is what this environment does: observed, never raised
            return ImportFailure(name, exc, _where(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return None


def preload(variants: Iterable[Variant], cases: Iterable[Case]) -> Preloaded:
    """Import the axis modules of ``variants`` and the ``imports`` of their ``cases`` (each once; failures noted, not raised)."""
    from bugmatrix.cell.requirements import resolve_attribute

    variants = list(variants)
    wanted = {v.case_id for v in variants}
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
    for case in cases:
        if case.id not in wanted:
            continue
        for dotted in case.imports:
            try:
                found = resolve_attribute(dotted)
            except Exception as exc:  # noqa: BLE001 - same: a broken import is the variant's outcome to record
                failed.append(f"{dotted}: {type(exc).__name__}: {exc}")
                continue
            (names if found is not None else failed).append(dotted if found is not None else f"{dotted}: not importable here")
    return Preloaded(tuple(dict.fromkeys(names)), time.perf_counter() - started, tuple(failed))


#: A variant that imports this many modules of one package in its child pays for an import worth declaring
#: (Lightning or transformers' T5: hundreds); a few lazily loaded internals (torch.nested at a first backward) are not.
MANY_MODULES = 50


def uncovered_imports(imported: Iterable[str], roots: Iterable[str]) -> list[str]:
    """The subpackages a variant imported itself, one per package in ``roots`` of which it imported :data:`MANY_MODULES`
    or more (paid per variant): the subpackage (two levels, ``torch._dynamo``) that pulled in the most of them."""
    roots = set(roots)
    counts: dict[str, Counter[str]] = {}
    for name in imported:
        parts = name.split(".")
        if parts[0] in roots:
            counts.setdefault(parts[0], Counter())[".".join(parts[:2])] += 1
    return sorted(c.most_common(1)[0][0] for c in counts.values() if sum(c.values()) >= MANY_MODULES)
