"""Cells: a re-run against its floor, the smoke profile against the sum of its floors, the full profile's wall time and disk.

A cell's *floor* is what it cannot go below: importing its stack once, plus the
variants' own ``duration_s``. Every cell here runs through the one runner
(:func:`bugmatrix.run.runner.run_cell`), so what is timed is what a cell
session does.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from bugmatrix.cell.runfile import RunRecord, load_run_file
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.matrix import INTERPRETER, Matrix
from bugmatrix.run.diskbudget import heavy_distributions
from bugmatrix.run.envbuild import uv_command
from bugmatrix.run.runner import CellSpec, built_python, run_cell
from bugmatrix.tools.benchmark.table import CommandFailed, Measurement, skipped, timed

__all__ = [
    "DiskPeak",
    "cached_wheel_sets",
    "heavy_wheels",
    "import_seconds",
    "measure_full",
    "measure_reuse",
    "measure_smoke",
    "smoke_floor",
    "smoke_from_runs",
]


def import_seconds(python: Path, modules: Sequence[str]) -> float:
    """Wall time of importing the cell's stack once, in a fresh interpreter."""
    return timed([str(python), "-c", "import " + ", ".join(modules)])


def smoke_floor(run: RunRecord, imports: float) -> float:
    """What a cell cannot go below: importing its stack plus its variants' own time."""
    return imports + sum(r.duration_s for r in run.results)


def measure_reuse(root: Path, matrix: Matrix, cell: Cell) -> Measurement:
    """A cell re-run with its env reused vs the floor (import + the variants' ``duration_s``)."""
    wall = 0.0

    def execute(command: Sequence[str], env: Mapping[str, str]) -> int:
        nonlocal wall
        wall = timed(command, env, ok=(0, 1), cwd=root)  # 1: an outcome differs; still a full run
        return 0

    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        run_file = Path(tmp) / "run.json"
        done = run_cell(matrix, CellSpec(cell.id, cell.pins), run_file, execute=execute, root=root)
        if done.environment is None:
            raise CommandFailed(f"cell {cell.id} cannot be built: {(done.install_failed or '').splitlines()[-1:]}")
        imports = import_seconds(done.environment.python, matrix.import_modules(cell.pins))
        floor = smoke_floor(load_run_file(run_file), imports)
    return Measurement(
        f"cell re-run, env reused ({cell.id}) vs floor", wall, floor, "s", "<=", 1.5, note=f"floor: import {imports:.1f}s + variants"
    )


def _wall(run: RunRecord) -> float | None:
    try:
        return (dt.datetime.fromisoformat(run.finished) - dt.datetime.fromisoformat(run.started)).total_seconds()
    except ValueError:
        return None


def smoke_from_runs(root: Path, matrix: Matrix, cells: Sequence[Cell], runs_dir: Path, wall: float | None, how: str) -> Measurement:
    """Smoke wall time (given, or the run files' started..finished) vs the sum of the cells' floors."""
    name = f"smoke profile ({len(cells)} cells) vs sum of floors"
    walls, floors, missing = 0.0, 0.0, []
    for cell in cells:
        path, python = runs_dir / f"{cell.id}.json", built_python(root, cell.id)
        run = load_run_file(path) if path.exists() else None
        seconds = _wall(run) if run else None
        if run is None or seconds is None or python is None:
            missing.append(cell.id)
            continue
        walls += seconds
        floors += smoke_floor(run, import_seconds(python, matrix.import_modules(cell.pins)))
    if missing:
        return skipped(name, f"no finished run file or env for {', '.join(missing)}: run nox -t smoke, or pass --smoke")
    return Measurement(name, wall if wall is not None else walls, floors, "s", "<=", 2, note=how)


def measure_smoke(root: Path, matrix: Matrix, cells: Sequence[Cell]) -> Measurement:
    """``nox -t smoke`` end to end (envs reused, report included) into a temporary reports dir."""
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp}
        wall = timed([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-t", "smoke"], env, cwd=root)
        return smoke_from_runs(root, matrix, cells, Path(tmp) / "runs", wall, "nox -t smoke measured now (--smoke)")


class DiskPeak:
    """Samples the disk in use (and the uv cache's filesystem) in a thread; ``peak`` - ``start`` is what a run added."""

    def __init__(self, path: Path, every: float = 5.0) -> None:
        self.path, self.every = path, every
        self.start = self.peak = shutil.disk_usage(path).used
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="disk-peak", daemon=True)

    def sample(self) -> None:
        """Take one sample now (the thread calls it every ``every`` seconds; a test calls it at the points it chooses)."""
        self.peak = max(self.peak, shutil.disk_usage(self.path).used)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    @property
    def added_gib(self) -> float:
        return (self.peak - self.start) / 2**30


def heavy_wheels(matrix: Matrix, cells: Iterable[Cell]) -> set[tuple[str, str, str]]:
    """(distribution, version, ``cpXY``) of every heavy pinned distribution the cells install (torch and the like)."""
    wanted = set()
    for cell in cells:
        for requirement in matrix.requirements_for(cell.pins):
            name, sep, version = requirement.partition("==")
            if sep and heavy_distributions([name]):
                wanted.add((heavy_distributions([name])[0], version, "cp" + cell.pins[INTERPRETER].replace(".", "")))
    return wanted


def cached_wheel_sets(cache: Path, wanted: Iterable[tuple[str, str, str]]) -> tuple[int, int]:
    """How many of ``wanted`` (distribution, version, cpXY) wheels uv's cache holds unpacked, of how many.

    Read from uv's cache layout (``wheels-v*/pypi/<name>/<version>-cp<XY>-<platform>/``,
    uv 0.5 and later); a layout it does not recognise reads as none held. It says how
    warm a "warm" run really was: the full profile's wheels (~34 GB zipped) do not
    fit beside everything else on a developer machine, so some are always fetched.
    """
    wanted = set(wanted)
    held = {
        (name, version, py) for name, version, py in wanted
        if any(p.is_dir() and p.name.startswith(f"{version}-{py}-") for p in cache.glob(f"wheels-v*/pypi/{name}/*"))
    }  # fmt: skip
    return len(held), len(wanted)


def _uv_cache_dir(env: Mapping[str, str]) -> Path:
    found = subprocess.run([*uv_command(), "cache", "dir"], capture_output=True, text=True, env=dict(env), check=False)
    return Path(found.stdout.strip())


def measure_full(root: Path, matrix: Matrix, cold: bool, cells: Sequence[Cell] = ()) -> list[Measurement]:
    """``BUGMATRIX_DISK=lean nox -t full`` end to end: wall time and the most disk it added at any moment.

    Cold: an empty uv cache of its own (every wheel downloaded) and no cell venvs; warm: the
    machine's uv cache as it is (the row says how many of the profile's heavy wheels it held).
    Lean either way: the full profile's ~18 torch wheel sets do not fit on this machine at
    once (see bugmatrix/run/diskbudget.py).
    """
    how = "cold (empty uv cache)" if cold else "warm (this machine's uv cache)"
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-full-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp, "BUGMATRIX_DISK": "lean"}
        if cold:
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            for venv in (root / ".nox").glob("cell-*"):
                shutil.rmtree(venv, ignore_errors=True)
        held, wanted = cached_wheel_sets(_uv_cache_dir(env), heavy_wheels(matrix, cells))
        with DiskPeak(Path(tmp)) as disk:
            started = time.perf_counter()
            timed([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-t", "full"], env, cwd=root, ok=(0, 1))
            wall = time.perf_counter() - started
        ran = len(list((Path(tmp) / "runs").glob("*.json")))
    start = f"; the uv cache held {held} of its {wanted} heavy wheels at the start" if cells else ""
    return [
        Measurement(f"full profile, {how}: wall ({ran} cells)", wall / 60, None, "min", note=f"BUGMATRIX_DISK=lean nox -t full{start}"),
        Measurement(f"full profile, {how}: most disk added at once", disk.added_gib, None, "GiB", note="sampled every 5 s"),
    ]
