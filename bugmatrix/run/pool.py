"""Cells side by side (``python -m bugmatrix run``): each in a pool process through the one runner, so results and locks
are those of a sequential run; each cell's own output goes to ``<reports>/logs/<cell>.log``."""

from __future__ import annotations

import multiprocessing
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runners import WORKERS_ENV, chosen_runner
from bugmatrix.documents.run import load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.command import run_file_path
from bugmatrix.run.diskbudget import MARGIN_GIB, STACK_GIB
from bugmatrix.run.reuse import ReusePolicy
from bugmatrix.run.runner import CellRun, CellSpec, release, run_cell

__all__ = ["JOBS_ENV", "WORKERS_ENV", "Slots", "describe", "log_path", "run_cells", "run_job", "slots"]

JOBS_ENV = "BUGMATRIX_JOBS"


@dataclass(frozen=True)
class Slots:
    """Cells at once, and variant processes per cell (jobs x workers <= cores), with why."""

    jobs: int
    workers: int
    why: str


def _count(name: str, text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        msg = f"{name}={text!r} is not a number of processes; set it to 1 or more"
        raise BugmatrixError(msg)
    return int(text)


def slots(cells: int, *, cores: int, free: float, jobs: str | None = None, workers: str | None = None) -> Slots:
    """Cells at once and variant processes per cell (``jobs``/``workers`` as given, None: choose): the cores, at most one
    cell per torch stack the ``free`` GiB hold beside the margin, at most the cells."""
    cores, cells = max(1, cores), max(1, cells)
    by_disk = max(1, int((free - MARGIN_GIB) // STACK_GIB))
    if jobs is not None:
        chosen_jobs, why = _count(JOBS_ENV, jobs), "as asked"
    elif workers is not None:
        chosen_jobs = max(1, cores // _count(WORKERS_ENV, workers))
        why = f"{cores} cores / {WORKERS_ENV}={workers}"
    else:
        chosen_jobs, why = cores, f"{cores} cores"
    if jobs is None and by_disk < chosen_jobs:
        chosen_jobs, why = by_disk, f"{why}, {free:.0f} GiB free holds {by_disk} torch stack(s) at once"
    chosen_jobs = min(chosen_jobs, cells)
    if workers is None:
        return Slots(chosen_jobs, max(1, cores // chosen_jobs), why)
    per_cell = _count(WORKERS_ENV, workers)
    if chosen_jobs * per_cell > cores:
        msg = (
            f"{JOBS_ENV}={chosen_jobs} x {WORKERS_ENV}={per_cell} is more than this machine's {cores} cores; "
            f"lower one of them (or unset {WORKERS_ENV} to share the cores)"
        )
        raise BugmatrixError(msg)
    return Slots(chosen_jobs, per_cell, why)


def log_path(reports: Path, cell_id: str) -> Path:
    """``<reports>/logs/<cell>.log``: a cell's own output when it runs in a pool process."""
    return reports / "logs" / f"{cell_id}.log"


def run_job(matrix: Matrix, spec: CellSpec, reports: Path, root: Path, reuse: ReusePolicy | None) -> CellRun:
    """Run one cell through the one runner in this (pool) process, timed; its output goes to its log file."""
    started, path = time.perf_counter(), log_path(reports, spec.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as log:

        def said(line: str) -> None:
            log.write(line + "\n")
            log.flush()

        def execute(command: Sequence[str], env: Mapping[str, str]) -> int:
            said("$ " + " ".join(command))
            return subprocess.run(list(command), env=dict(env), cwd=root, stdout=log, stderr=subprocess.STDOUT, check=False).returncode

        run_file, junit = run_file_path(reports, spec.id), reports / "junit" / f"{spec.id}.xml"
        done = run_cell(matrix, spec, run_file, execute=execute, root=root, junit=junit, reuse=reuse, log=said)
    return replace(done, seconds=time.perf_counter() - started)


def describe(cell: str, finished: CellRun, log: Path) -> str:
    """The cell's line (without its count): outcomes counted, reuse, an install failure's reason, a broken run's log."""
    timing = f"({finished.seconds:.1f} s)"
    if finished.install_failed is not None:
        return f"{cell} install-failed: {finished.install_failed.strip().splitlines()[-1]} {timing}"
    if finished.unfinished is not None:
        return f"{cell} did not finish (pytest exited {finished.returncode}): {finished.unfinished}; see {log} {timing}"
    try:
        record = load_run_file(finished.run_file)
    except (OSError, ValueError, BugmatrixError) as exc:
        return f"{cell} no run file ({exc}), see {log} {timing}"
    counts = Counter(r.outcome for r in record.results)
    said = ", ".join(f"{o.value} {counts[o]}" for o in Outcome if counts[o]) or "no variants"
    flagged = Counter(r.verdict.value for r in record.results if r.verdict.flagged)
    extra = "".join(f"; {n} {verdict}" for verdict, n in sorted(flagged.items()))
    return f"{cell} {'reused: ' if finished.reused else ''}{said}{extra} {timing}"


def run_cells(
    matrix: Matrix,
    specs: Sequence[CellSpec],
    reports: Path,
    *,
    jobs: int,
    workers: int,
    root: Path = ROOT,
    reuse: ReusePolicy | None = None,
    order: Sequence[CellSpec] | None = None,
    say: Callable[[str], None] = print,
) -> list[CellRun]:
    """Run ``specs`` up to ``jobs`` at once, one line per finished cell, lean disk given back (``order``: every planned cell)."""
    made = [replace(spec, runner=chosen_runner(spec.runner.name, workers)) for spec in specs]
    unfinished = {spec.id: spec for spec in made}
    finished: list[CellRun] = []
    # spawn, not fork: the pool's own threads are running when it starts processes.
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_job, matrix, spec, reports, root, reuse): spec for spec in made}
        for future in as_completed(futures):
            spec, done = futures[future], future.result()
            del unfinished[spec.id]
            others = list(unfinished.values())
            cleaned = [] if done.reused else release(matrix, spec, order or specs, root=root, others=others, jobs=jobs)
            finished.append(done)
            lean = f"; lean: cleaned {', '.join(cleaned)}" if cleaned else ""
            say(f"[{len(finished)}/{len(made)}] {describe(spec.id, done, log_path(reports, spec.id))}{lean}")
    return finished
