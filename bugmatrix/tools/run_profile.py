"""``python -m bugmatrix run``: a profile's cells side by side, through the run stage's pool (``nox -s run`` calls it).

It sits above the report stage: a night's reuse asks the previous night's history which results were flaky."""

from __future__ import annotations

import argparse
import os
import time

from bugmatrix import values
from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import output_dir
from bugmatrix.report.history import reuse_facts
from bugmatrix.run.diskbudget import free_gib, uv_cache_dir
from bugmatrix.run.pool import JOBS_ENV, WORKERS_ENV, run_cells, slots
from bugmatrix.run.runner import CellSpec

__all__ = ["add_arguments", "run"]


#: Option help texts too long for their option's line.
GPU_DESC = "run the profile's CUDA twins (nox's gpu-<profile> tag) instead of its CPU cells"
JOBS_DESC = f"cells at once (default: ${JOBS_ENV}, else the cores, fewer where the disk is short)"
REUSE_FROM_DESC = "previous results to reuse (default: $BUGMATRIX_PREVIOUS)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix run`` options."""
    parser.add_argument("--profile", type=values.profile, help="the [profiles.<name>] whose cells run (default: the matrix's first)")
    parser.add_argument("--gpu", action="store_true", help=GPU_DESC)
    parser.add_argument("--cell", type=values.name, action="append", default=[], metavar="ID", help="only this cell (repeatable)")
    parser.add_argument("--jobs", type=values.count, help=JOBS_DESC)
    parser.add_argument("--no-reuse", action="store_true", help="run every cell, even where a previous run of the same inputs exists")
    parser.add_argument("--reuse-from", type=values.existing_dir, metavar="DIR", help=REUSE_FROM_DESC)


def run(args: argparse.Namespace) -> int:
    """Plan the profile, run its cells side by side into <reports>/runs/; exit 1 when a cell's pytest did not run to its end."""
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.releases.registry import warn
    from bugmatrix.releases.tracking import load_plan, tracked_for
    from bugmatrix.run.reuse import ReuseOptions, reuse_policy

    plan = load_plan(load_matrix(args.matrix), args.cases, fallback=True)
    profile = args.profile or plan.declared.default_profile
    wanted = {c.id for c in plan.profile_cells(profile)}  # an unknown profile is a one-line error here
    cells = [c for c in plan.cells if c.id in wanted and (c.device != "cpu") == args.gpu]  # as planned: what `nox -s "cell(<id>)"` runs
    if args.cell:
        unknown = sorted(set(args.cell) - {c.id for c in cells})
        if unknown:
            msg = f"--cell {unknown[0]}: not a {'CUDA' if args.gpu else 'CPU'} cell of the {profile} profile; `nox -l` lists them"
            raise BugmatrixError(msg)
        cells = [c for c in cells if c.id in args.cell]
    specs = [CellSpec.of(c, tracked_for(plan.declared, plan.resolution, c.pins, c.profiles)) for c in cells]
    chosen = slots(
        len(specs),
        cores=len(os.sched_getaffinity(0)),
        free=free_gib(uv_cache_dir()),
        jobs=args.jobs or os.environ.get(JOBS_ENV) or None,
        workers=os.environ.get(WORKERS_ENV) or None,
    )
    policy = reuse_policy(
        plan.matrix.file.reuse.max_age_days, ReuseOptions(args.no_reuse, args.reuse_from), warn=warn, history_of=reuse_facts
    )
    reports = output_dir()
    print(f"bugmatrix: {len(specs)} {profile} cell(s), {chosen.jobs} at once x {chosen.workers} variant process(es) ({chosen.why})")
    started = time.perf_counter()
    order = [CellSpec.of(c) for c in plan.cells]
    done = run_cells(plan.matrix, specs, reports, jobs=chosen.jobs, workers=chosen.workers, reuse=policy, order=order)
    broken = [d.run_file.stem for d in done if d.unfinished is not None]
    print(f"bugmatrix: {len(done)} cell(s) in {time.perf_counter() - started:.1f} s -> {reports / 'runs'}")
    if broken:
        print(f"bugmatrix: {len(broken)} cell(s) did not run to the end: {', '.join(broken)} (their logs: {reports / 'logs'})")
    return 1 if broken else 0
