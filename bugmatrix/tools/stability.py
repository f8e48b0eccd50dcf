"""``python -m bugmatrix stability --repeat 20 [--cell ID] [-k EXPR]`` (``nox -s stability``): same cell, same outcomes, every time?

Runs one cell's cases N times (``--system``: in this interpreter) and compares the outcomes per variant; exit 1 when
any varies (a variant missing from a run too): bisect and the baseline diff assume none does."""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from bugmatrix import values
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.run import load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, find_cell, plan_all, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.runner import CellSpec, run_cell

__all__ = ["ABSENT", "add_arguments", "outcomes_by_variant", "run", "run_repeatedly", "stability_table", "unstable"]

#: The outcome recorded for a variant that a run did not report at all.
ABSENT = "absent"


def outcomes_by_variant(runs: Sequence[RunRecord]) -> dict[str, list[str]]:
    """Each variant's outcome in every run, in run order; ABSENT where a run did not report it."""
    ids = sorted({record.id for run in runs for record in run.results})
    by_run = [{record.id: record.outcome for record in run.results} for run in runs]
    return {variant: [outcomes.get(variant, ABSENT) for outcomes in by_run] for variant in ids}


def unstable(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    """The variants whose outcomes were not all the same."""
    return {variant: outcomes for variant, outcomes in seen.items() if len(set(outcomes)) > 1}


def stability_table(seen: dict[str, list[str]]) -> str:
    """variant | outcomes seen (with counts) | stable?"""
    width = max((len(v) for v in seen), default=len("variant"))
    counts = {variant: ", ".join(f"{o} x{n}" for o, n in sorted(Counter(outcomes).items())) for variant, outcomes in seen.items()}
    middle = max((len(c) for c in counts.values()), default=0)
    head = f"{'variant':{width}}  {'outcomes seen':{middle}}  stable?"
    rows = [f"{v:{width}}  {counts[v]:{middle}}  {'yes' if len(set(seen[v])) == 1 else 'NO'}" for v in sorted(seen)]
    return "\n".join([head, "-" * len(head), *rows])


def run_repeatedly(
    root: Path, matrix: Matrix, cell: Cell | None, repeat: int, extra: Sequence[str], *, python: Path | None = None
) -> tuple[list[RunRecord], list[float]]:
    """Run the cell's cases ``repeat`` times: the runs and their wall times (``cell=None``: ``python`` as it is, default this one)."""
    spec = CellSpec.of(cell) if cell else CellSpec("system", None, interpreter=python)
    runs: list[RunRecord] = []
    seconds: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bugmatrix-stability-") as tmp:
        for index in range(repeat):
            run_file = Path(tmp) / f"run-{index}.json"
            output: list[str] = []

            def execute(command: Sequence[str], env: Mapping[str, str], output: list[str] = output) -> int:
                done = subprocess.run(list(command), cwd=root, env=dict(env), capture_output=True, text=True, check=False)
                output.append(done.stdout + done.stderr)
                return done.returncode

            start = time.perf_counter()
            done = run_cell(matrix, spec, run_file, execute=execute, root=root, extra=extra)
            seconds.append(time.perf_counter() - start)
            if done.install_failed:
                why = done.install_failed.splitlines()[-1]
                msg = f"cell {spec.id}: its environment cannot be built ({why}); see nox -s 'cell({spec.id})'"
                raise BugmatrixError(msg)
            if not run_file.exists():  # collection or startup failed: nothing ran, nothing to compare
                interpreter = done.environment.python if done.environment else "?"
                lines = [line.strip() for line in "".join(output).splitlines() if line.strip()] or ["no output"]
                said = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1])  # pytest's last error line
                why = f"pytest exit {done.returncode}: {said}"
                msg = f"run {index + 1} recorded nothing ({why}); check that the cases run in {interpreter}"
                raise BugmatrixError(msg)
            runs.append(load_run_file(run_file))
            print(f"  run {index + 1}/{repeat}: {seconds[-1]:.1f}s, pytest exit {done.returncode}", flush=True)
    return runs, seconds


def _choose_cell(matrix: Matrix, cases: Path, name: str | None) -> Cell:
    catalog = load_catalog(cases, matrix)
    if name:
        return find_cell(plan_all(matrix, catalog), name)
    smoke = [c for c in plan_cells(matrix, "smoke", catalog) if c.device == "cpu"]
    if not smoke:
        msg = f"{matrix.path}: the smoke profile has no CPU cell; pass --cell ID or --system"
        raise BugmatrixError(msg)
    return smoke[0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix stability`` options."""
    parser.add_argument("--repeat", type=values.count, default=20, help="runs to compare (default 20)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cell", type=values.name, help="cell id (default: the first CPU cell of the smoke profile)")
    where.add_argument("--system", action="store_true", help="use the current interpreter as it is instead of a cell's venv")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression to narrow the variants")


def run(args: argparse.Namespace) -> int:
    """Run, compare, print, write <output>/stability.json; 1: something varied (bad input raises BugmatrixError: 2)."""
    if args.repeat < 2:
        msg = f"--repeat {args.repeat}: comparing outcomes needs at least 2 runs"
        raise BugmatrixError(msg)
    matrix = load_resolved_matrix(args.matrix)
    cell = None if args.system else _choose_cell(matrix, args.cases, args.cell)
    name = cell.id if cell else "system"
    print(f"stability: {args.repeat} runs of {name}", flush=True)
    runs, seconds = run_repeatedly(args.root, matrix, cell, args.repeat, ["-k", args.keyword] if args.keyword else [])
    seen = outcomes_by_variant(runs)
    flaky = unstable(seen)
    print(stability_table(seen))
    out = output_dir() / "stability.json"
    variants = {v: {"outcomes": dict(Counter(o)), "stable": v not in flaky} for v, o in seen.items()}
    document = {"cell": name, "repeat": args.repeat, "keyword": args.keyword, "seconds": [round(s, 1) for s in seconds]}
    write_json_atomic(out, document | {"variants": variants, "unstable": sorted(flaky)})
    print(f"{len(seen)} variants, {len(flaky)} unstable, {sum(seconds):.0f}s in all -> {out}")
    return 1 if flaky else 0
