"""What one import of a cell's stack is, and how long it takes: the floor's first term, shared by the cells' and the profile's floors."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.runner import bytecode_env
from bugmatrix.tools.benchmark.table import timed

__all__ = ["import_seconds", "stack_imports"]


def stack_imports(matrix: Matrix, catalog: Catalog, cell: Cell) -> tuple[list[str], list[str]]:
    """What a cell's process imports once: its axis modules, and the ``Case(imports=...)`` of the cases it runs."""
    runs = set(cell.variants)
    declared = [name for case in catalog.cases if any(v.id in runs for v in case.variants) for name in case.imports]
    return matrix.import_modules(cell.pins), list(dict.fromkeys(declared))


def import_seconds(python: Path, modules: Sequence[str], declared: Sequence[str] = (), root: Path | None = None) -> float:
    """Wall time of a fresh interpreter importing the cell's stack once (the best of two: the first may read a cold disk).

    ``declared`` names are resolved by the function the fork runner's preload uses (``root`` puts it on the path).
    It ends with ``os._exit`` as the fork runner's cell process does: neither pays for tearing the stack down;
    its bytecode is the venv's cache, as the cell's (neither compiles the stack again).
    """
    code = "import os, " + ", ".join(modules)
    if declared:
        code += f"; from bugmatrix.cell.requirements import resolve_attribute; [resolve_attribute(n) for n in {list(declared)!r}]"
    code += "; os._exit(0)"
    # As the cell's pytest runs it: bytecode cached in the venv (bugmatrix.run.runner.bytecode_env); the first of two may write it.
    env = bytecode_env({**os.environ, **({"PYTHONPATH": str(root)} if root else {})}, python.parent.parent)
    return min(timed([str(python), "-c", code], env) for _ in range(2))
