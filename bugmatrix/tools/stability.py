"""``nox -s stability -- --repeat 20 [--cell ID] [-k EXPR]``: same cell, same outcomes, every time?

Runs one cell's cases N times in that cell's environment (its nox venv, built
with uv if it is not there yet; ``--system`` uses the current interpreter),
each run writing its own run file, then compares the outcomes per variant.
Exit 1 when any variant's outcome varies: a flaky reproduction is worse than
none, because bisect and the baseline diff both assume "same environment,
same outcome". A variant missing from some runs counts as varying too.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bugmatrix.cell.runfile import RunRecord, load_run_file
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import ROOT, output_dir
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, find_cell, plan_all, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.command import cell_env, pytest_command
from bugmatrix.run.envbuild import InstallFailed, cell_venv, ensure_environment
from bugmatrix.run.lock import lock_for

__all__ = ["ABSENT", "cell_python", "outcomes_by_variant", "stability_table", "unstable"]

#: The outcome recorded for a variant that a run did not report at all.
ABSENT = "absent"


def cell_python(root: Path, matrix: Matrix, cell: Cell) -> Path:
    """The cell's interpreter; builds its venv first when it is missing or stale."""
    venv, requirements = cell_venv(root, cell.id), matrix.requirements_for(cell.pins)
    lock, _ = lock_for(root, cell.id, requirements, cell.python)  # as the cell session builds it, or it would rebuild unlocked
    try:
        ensure_environment(venv, cell.python, requirements, matrix.import_modules(cell.pins), lock=lock)
    except InstallFailed as exc:
        msg = f"cell {cell.id}: its environment cannot be built ({str(exc).splitlines()[-1]}); see nox -s 'cell({cell.id})'"
        raise BugmatrixError(msg) from exc
    return venv / "bin" / "python"


def outcomes_by_variant(runs: Sequence[RunRecord]) -> dict[str, list[str]]:
    """Each variant's outcome in every run, in run order; ABSENT where a run did not report it."""
    ids = sorted({record.id for run in runs for record in run.results})
    by_run = [{record.id: record.outcome for record in run.results} for run in runs]
    return {variant: [outcomes.get(variant, ABSENT) for outcomes in by_run] for variant in ids}


def unstable(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    """The variants whose outcomes were not all the same."""
    return {variant: outcomes for variant, outcomes in seen.items() if len(set(outcomes)) > 1}


def _counts(outcomes: list[str]) -> str:
    return ", ".join(f"{outcome} x{count}" for outcome, count in sorted(Counter(outcomes).items()))


def stability_table(seen: dict[str, list[str]]) -> str:
    """variant | outcomes seen (with counts) | stable?"""
    width = max((len(v) for v in seen), default=len("variant"))
    counts = {variant: _counts(outcomes) for variant, outcomes in seen.items()}
    middle = max((len(c) for c in counts.values()), default=0)
    head = f"{'variant':{width}}  {'outcomes seen':{middle}}  stable?"
    lines = [head, "-" * len(head)]
    for variant in sorted(seen):
        verdict = "yes" if len(set(seen[variant])) == 1 else "NO"
        lines.append(f"{variant:{width}}  {counts[variant]:{middle}}  {verdict}")
    return "\n".join(lines)


def _why(output: str) -> str:
    """pytest's own reason: its last line naming an error, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()] or ["no output"]
    return next((line for line in reversed(lines) if "error" in line.lower()), lines[-1])


def run_repeatedly(
    root: Path, matrix: Matrix, python: Path, cell: Cell | None, repeat: int, extra: Sequence[str]
) -> tuple[list[RunRecord], list[float]]:
    """Run the cases ``repeat`` times, each into its own run file; the runs and their wall times."""
    runs: list[RunRecord] = []
    seconds: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bugmatrix-stability-") as tmp:
        for index in range(repeat):
            run_file = Path(tmp) / f"run-{index}.json"
            start = time.perf_counter()
            done = subprocess.run(
                pytest_command(
                    python,
                    matrix,
                    cell_id=cell.id if cell else "system",
                    pins=cell.pins if cell else None,
                    run_file=run_file,
                    extra=extra,
                    root=root,
                ),
                cwd=root,
                env=cell_env(root),
                capture_output=True,
                text=True,
                check=False,
            )
            seconds.append(time.perf_counter() - start)
            if not run_file.exists():  # collection or startup failed: nothing ran, nothing to compare
                msg = f"run {index + 1} recorded nothing (pytest exit {done.returncode}: {_why(done.stdout + done.stderr)}); check that the cases run in {python}"
                raise BugmatrixError(msg)
            runs.append(load_run_file(run_file))
            print(f"  run {index + 1}/{repeat}: {seconds[-1]:.1f}s, pytest exit {done.returncode}", flush=True)
    return runs, seconds


def _choose_cell(matrix: Matrix, root: Path, name: str | None) -> Cell:
    catalog = load_catalog(root / "cases", matrix)
    if name:
        return find_cell(plan_all(matrix, catalog), name)
    smoke = [c for c in plan_cells(matrix, "smoke", catalog) if c.device == "cpu"]
    if not smoke:
        msg = f"{matrix.path}: the smoke profile has no CPU cell; pass --cell ID or --system"
        raise BugmatrixError(msg)
    return smoke[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nox -s stability --", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--repeat", type=int, default=20, help="runs to compare (default 20)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cell", help="cell id (default: the first CPU cell of the smoke profile)")
    where.add_argument("--system", action="store_true", help="use the current interpreter as it is instead of a cell's venv")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression to narrow the variants")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run, compare, print, write <output>/stability.json; 1: something varied, 2: bad input."""
    args = _parser().parse_args(argv)
    try:
        if args.repeat < 2:
            msg = f"--repeat {args.repeat}: comparing outcomes needs at least 2 runs"
            raise BugmatrixError(msg)
        cell, python = None, Path(sys.executable)
        matrix = load_resolved_matrix(args.root / "matrix.toml")
        if not args.system:
            cell = _choose_cell(matrix, args.root, args.cell)
            python = cell_python(args.root, matrix, cell)
        name = cell.id if cell else "system"
        print(f"stability: {args.repeat} runs of {name} ({python})", flush=True)
        runs, seconds = run_repeatedly(args.root, matrix, python, cell, args.repeat, ["-k", args.keyword] if args.keyword else [])
    except BugmatrixError as exc:
        print(f"bugmatrix: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    seen = outcomes_by_variant(runs)
    flaky = unstable(seen)
    print(stability_table(seen))
    out = output_dir() / "stability.json"
    write_json_atomic(out, {
        "cell": name, "repeat": args.repeat, "keyword": args.keyword, "seconds": [round(s, 1) for s in seconds],
        "variants": {v: {"outcomes": dict(Counter(o)), "stable": v not in flaky} for v, o in seen.items()},
        "unstable": sorted(flaky),
    })  # fmt: skip
    print(f"{len(seen)} variants, {len(flaky)} unstable, {sum(seconds):.0f}s in all -> {out}")
    return 1 if flaky else 0


if __name__ == "__main__":
    sys.exit(main())
