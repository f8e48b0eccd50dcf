"""A whole profile against its floor, what lean mode costs against kept environments, and one import of a stack.

A profile's floor, with ``jobs`` cells at once shared perfectly::

    floor = sum over cells (build from a warm cache + one import + the variants' compute) / jobs
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.documents.run import load_run_file
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.envbuild import InstallFailed, cell_venv
from bugmatrix.run.runner import CellSpec, bytecode_env, prepare, run_cell
from bugmatrix.tools.benchmark.table import CommandFailed, Measurement, timed

__all__ = [
    "FLOOR_BOUND",
    "CellFloor",
    "floor_rows",
    "import_seconds",
    "measure_floors",
    "measure_lean_cost",
    "profile_floor",
    "stack_imports",
    "timed_cell",
]

#: The full profile's wall time may be at most this many times its floor (issue 36).
FLOOR_BOUND = 1.5


def stack_imports(matrix: Matrix, catalog: Catalog, cell: Cell) -> tuple[list[str], list[str]]:
    """What a cell's process imports once: its axis modules, and the ``Case(imports=...)`` of the cases it runs."""
    runs = set(cell.variants)
    declared = [name for case in catalog.cases if any(v.id in runs for v in case.variants) for name in case.imports]
    return matrix.import_modules(cell.pins), list(dict.fromkeys(declared))


def import_seconds(python: Path, modules: Sequence[str], declared: Sequence[str] = (), root: Path | None = None) -> float:
    """Wall time of a fresh interpreter importing the stack as the fork runner's cell process does (``declared`` resolved
    by its preload, ``os._exit``); the best of two, since the first may read a cold disk."""
    code = "import os, " + ", ".join(modules)
    if declared:
        code += f"; from bugmatrix.cell.preload import resolve_attribute; [resolve_attribute(n) for n in {list(declared)!r}]"
    code += "; os._exit(0)"
    env = bytecode_env({**os.environ, **({"PYTHONPATH": str(root)} if root else {})}, python.parent.parent)
    return min(timed([str(python), "-c", code], env) for _ in range(2))


@dataclass(frozen=True)
class CellFloor:
    """What one cell cannot go below, in seconds: its build from a warm cache, one import of its stack, its variants' compute."""

    cell: str
    build_s: float
    import_s: float
    compute_s: float

    @property
    def total(self) -> float:
        return self.build_s + self.import_s + self.compute_s


def profile_floor(floors: Sequence[CellFloor], jobs: int) -> float:
    """Seconds a profile cannot go below with ``jobs`` cells at once: the cells' floors summed, shared perfectly."""
    if jobs < 1:
        msg = f"jobs={jobs}: a profile runs at least one cell at a time"
        raise ValueError(msg)
    return sum(f.total for f in floors) / jobs


def floor_rows(label: str, wall_s: float | None, floors: Sequence[CellFloor], jobs: int) -> list[Measurement]:
    """Two rows: the profile's floor (with its parts) and the measured wall time against it, in minutes."""
    floor = profile_floor(floors, jobs) / 60
    parts = {name: sum(getattr(f, f"{name}_s") for f in floors) / 60 for name in ("build", "import", "compute")}
    note = " + ".join(f"{name} {minutes:.1f}" for name, minutes in parts.items()) + f" min, / {jobs} at once"
    return [
        Measurement(f"{label}: floor ({len(floors)} cells)", floor, None, "min", note=note),
        Measurement(f"{label}: wall vs floor", None if wall_s is None else wall_s / 60, floor, "min", "<=", FLOOR_BOUND, note=note),
    ]


def measure_floors(root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], runs: Path) -> list[CellFloor]:
    """Each cell's floor after a run into ``runs``: a fresh build from the warm cache, one import, the run file's compute
    (a cell without a run file, or that does not install, is left out so the floor stays a floor)."""
    floors = []
    with tempfile.TemporaryDirectory(prefix="bugmatrix-floor-") as scratch:
        for cell in cells:
            path = runs / f"{cell.id}.json"
            if not path.exists():
                continue
            venv = Path(scratch) / "venv"
            started = time.perf_counter()
            try:
                environment = prepare(matrix, CellSpec.of(cell), root=root, venv=venv, check_imports=False)
            except InstallFailed:
                continue
            build = time.perf_counter() - started
            imports = import_seconds(environment.python, *stack_imports(matrix, catalog, cell), root=root)
            compute = sum(r.duration_s for r in load_run_file(path).results)
            floors.append(CellFloor(cell.id, build, imports, compute))
            shutil.rmtree(venv, ignore_errors=True)
    return floors


def timed_cell(root: Path, matrix: Matrix, spec: CellSpec, run_file: Path) -> tuple[float, float, Path]:
    """One whole cell through the runner (build or reuse, pytest, run file): (pytest's seconds, the whole run's, its interpreter)."""
    pytest_s = 0.0

    def execute(command: Sequence[str], env: Mapping[str, str]) -> int:
        nonlocal pytest_s
        pytest_s = timed(command, env, ok=(0, 1), cwd=root)  # 1: an outcome differs; still a full run
        return 0

    started = time.perf_counter()
    done = run_cell(matrix, spec, run_file, execute=execute, root=root)
    if done.environment is None:
        raise CommandFailed(f"cell {spec.id} cannot be built: {(done.install_failed or 'no environment').splitlines()[-1]}")
    return pytest_s, time.perf_counter() - started, done.environment.python


def measure_lean_cost(root: Path, matrix: Matrix, cells: Sequence[Cell]) -> list[Measurement]:
    """The smoke cells with their venvs kept (reused) against lean (each venv removed first: rebuilt from the warm cache)."""
    kept = lean = 0.0
    with tempfile.TemporaryDirectory(prefix="bugmatrix-lean-") as scratch:
        for cell in cells:
            spec = CellSpec.of(cell)
            timed_cell(root, matrix, spec, Path(scratch) / "warmup.json")  # the kept venv exists, built if it was not
            kept += timed_cell(root, matrix, spec, Path(scratch) / f"{cell.id}-kept.json")[1]
            shutil.rmtree(cell_venv(root, cell.id), ignore_errors=True)
            lean += timed_cell(root, matrix, spec, Path(scratch) / f"{cell.id}-lean.json")[1]
    note = "lean rebuilds each venv from the warm cache; a pruned torch stack is also downloaded again next run (not counted)"
    return [Measurement(f"lean vs kept environments: {len(cells)} smoke cells", lean, kept, "s", note=note)]
