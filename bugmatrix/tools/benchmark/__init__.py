"""``nox -s benchmark`` (``python -m bugmatrix benchmark``): what a matrix run costs, against its floor and the alternatives.

Every number is a ratio measured in one run on one machine, one module per kind of cost. Rows are saved after
every step, so a late failure loses nothing."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bugmatrix import values
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import check_output_file, check_writable_dir, write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import find_cell, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.tools.benchmark import cells
from bugmatrix.tools.benchmark.nightly import measure_nightly_reuse
from bugmatrix.tools.benchmark.reports import measure_report, measure_report_with_history
from bugmatrix.tools.benchmark.table import CommandFailed, Measurement, format_table, skipped

__all__ = ["add_arguments", "run"]


#: Option help texts too long for their option's line.
CELL_DESC = "cell for the build and reuse measurements (default: the smoke CPU cell with the fewest packages)"
FULL_DESC = "also run the whole full profile, cells side by side (cold downloads every wheel; warm: also against its floor)"
FULL_KEEP_DESC = "copy the last full run's reports here (publish them with nox -s report-full)"
FULL_ONLY_DESC = "with --full: only the full-profile runs (the other steps rebuild and may prune the cache)"
REPEAT_DESC = "run each smoke cell N times per runner, alternating, and keep the fastest (a shared machine)"
NIGHTLY_REUSE_DESC = (
    "also time nights with reuse and the re-resolve lane: (a) nothing moved, (b) a new axis release, (c) a new transitive release"
)
FRESH_SETUP_DESC = "redo the nights' setup (a full run) even when .nox/benchmark-nightly has one"
NEW_RELEASE_DESC = "(b)'s new release (default: the newest real release no axis lists)"
MOVED_DESC = "(c)'s transitive distribution (default: the one the fewest cells' locks hold)"
OUT_DESC = "where the JSON goes (default: <output>/benchmark.json; the committed one is reports/benchmark.json)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix benchmark`` options."""
    parser.add_argument("--cell", type=values.name, help=CELL_DESC)
    parser.add_argument("--quick", action="store_true", help="skip the cold pip build (a cold CUDA torch install downloads ~3 GB)")
    parser.add_argument("--smoke", action="store_true", help="time `nox -t smoke` now instead of reading the last run's run files")
    parser.add_argument("--full", choices=("cold", "warm", "both"), help=FULL_DESC)
    parser.add_argument("--full-keep", type=Path, metavar="DIR", help=FULL_KEEP_DESC)
    parser.add_argument("--skip-builds", action="store_true", help="skip the uv vs virtualenv+pip builds altogether")
    parser.add_argument("--full-only", action="store_true", help=FULL_ONLY_DESC)
    parser.add_argument("--repeat", type=values.count, default=1, metavar="N", help=REPEAT_DESC)
    parser.add_argument("--nightly-reuse", action="store_true", help=NIGHTLY_REUSE_DESC)
    parser.add_argument("--nightly-profile", type=values.profile, default="full", help="the profile of those nights (default: full)")
    parser.add_argument("--fresh-setup", action="store_true", help=FRESH_SETUP_DESC)
    parser.add_argument("--new-release", type=_axis_release, metavar="AXIS=VERSION", help=NEW_RELEASE_DESC)
    parser.add_argument("--moved", type=values.name, metavar="DIST", help=MOVED_DESC)
    parser.add_argument("--out", type=Path, help=OUT_DESC)


def _axis_release(text: str) -> tuple[str, str]:
    axis, sep, version = text.partition("=")
    if not sep or not axis:
        msg = f"{text!r} is not AXIS=VERSION, e.g. torch=2.16.0"
        raise argparse.ArgumentTypeError(msg)
    return axis, values.version(version)


def _check(args: argparse.Namespace, matrix: Matrix, out: Path) -> None:
    """Every option against the matrix and the disk, before the first measurement builds anything."""
    check_output_file(out, "--out", forbidden=(args.cases,))
    if args.full_keep is not None:
        check_writable_dir(args.full_keep, "--full-keep")
    nightly = {"--new-release": args.new_release, "--moved": args.moved, "--fresh-setup": args.fresh_setup or None}
    given = [option for option, value in nightly.items() if value is not None]
    if given and not args.nightly_reuse:
        msg = f"{given[0]}: only with --nightly-reuse (it describes one of its nights); add --nightly-reuse or leave it out"
        raise BugmatrixError(msg)
    if args.full_only and not args.full:
        msg = "--full-only needs --full cold|warm|both"
        raise BugmatrixError(msg)
    axis, version = args.new_release or (None, None)
    if axis is not None and axis not in matrix.axes:
        msg = f"--new-release {axis}={version}: {axis} is not an axis of {matrix.path} (axes: {', '.join(matrix.axes)})"
        raise BugmatrixError(msg)
    if args.nightly_reuse and args.nightly_profile not in matrix.profiles:
        msg = f"--nightly-profile {args.nightly_profile}: not a profile of {matrix.path} (profiles: {', '.join(matrix.profiles)})"
        raise BugmatrixError(msg)


def run(args: argparse.Namespace) -> int:
    """Measure, print the table, write <output>/benchmark.json (after every row, so a failure loses nothing)."""
    root, out = args.root, args.out or output_dir() / "benchmark.json"
    matrix = load_resolved_matrix(args.matrix)
    _check(args, matrix, out)
    catalog = load_catalog(args.cases, matrix)  # imports every case module: once, for every step
    smoke = [c for c in plan_cells(matrix, "smoke", catalog) if c.device == "cpu"]
    cell = find_cell(smoke, args.cell) if args.cell else min(smoke, key=lambda c: len(matrix.requirements_for(c.pins)))
    no_builds = [skipped("env builds: uv vs virtualenv+pip", "skipped (--skip-builds)")]
    steps: list[tuple[str, Callable[[], list[Measurement]]]] = [
        ("env builds", lambda: no_builds if args.skip_builds else cells.measure_builds(root, matrix, cell, args.quick)),
        ("smoke cells: fork runner and xdist vs floor", lambda: cells.measure_runners(root, matrix, catalog, smoke, args.repeat)),
        ("smoke cells: whole nox session vs one import", lambda: cells.measure_sessions(root, matrix, catalog, smoke, max(2, args.repeat))),
        ("smoke profile", lambda: [cells.measure_smoke(root, matrix, catalog, smoke, now=args.smoke)]),
        ("lean vs kept environments", lambda: cells.measure_lean_cost(root, matrix, smoke)),
        ("report", lambda: [measure_report(), measure_report_with_history()]),
        ("disk", lambda: cells.measure_disk(root)),
        ("nightly download and CI cache", lambda: cells.measure_ci_cache(matrix, catalog)),
    ]
    if args.full_only:
        steps = []
    if args.full:
        kinds = {"cold": (True,), "warm": (False,), "both": (True, False)}[args.full]
        # both: warm starts from the cache the cold run filled (a cache of the benchmark's own, under .nox)
        shared = root / ".nox" / "benchmark-uv-cache" if args.full == "both" else None
        steps += [
            (
                f"full profile ({'cold' if c else 'warm'})",
                lambda c=c: cells.measure_full(root, matrix, catalog, c, cache=shared, keep=args.full_keep if c == kinds[-1] else None),
            )
            for c in kinds
        ]
    if args.nightly_reuse:
        steps.append((f"nightly reuse ({args.nightly_profile})", lambda: measure_nightly_reuse(root, catalog, args)))
    rows: list[Measurement] = []
    document = {"cell": cell.id, "quick": args.quick, "cores": os.cpu_count()}
    for label, measure in steps:
        print(f"benchmark: {label} ...", flush=True)
        try:
            rows += measure()
        except (CommandFailed, BugmatrixError, subprocess.CalledProcessError) as exc:
            rows.append(skipped(label, f"failed: {exc}"))
        write_json_atomic(out, document | {"rows": [asdict(r) | {"ratio": r.ratio and round(r.ratio, 3), "met": r.met} for r in rows]})
    print(format_table(rows))
    print(f"-> {out}")
    return 0
