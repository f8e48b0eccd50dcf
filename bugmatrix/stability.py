"""``nox -s stability -- --repeat 20 [--cell ID]``: same cell, same outcomes, every time?

Runs one cell's cases N times in that cell's environment (built with uv if it
is not there yet), each run writing its own run file, and reports every
variant whose outcome varied. Exit 1 when something is unstable: a flaky
reproduction is worse than none, since bisect and the baseline diff assume
"same environment, same outcome".
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from bugmatrix.bisect import env_dir
from bugmatrix.discover import discover_variants, projections
from bugmatrix.envbuild import prepare_environment, uv_command
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.matrix import load_matrix
from bugmatrix.plan import Cell, find_cell, import_modules, plan_all, plan_cells, requirements_for
from bugmatrix.runfile import load_run_file, write_json_atomic

__all__ = ["main", "stability_table", "unstable"]


def unstable(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    """The variants whose outcomes were not all the same."""
    return {variant: outcomes for variant, outcomes in seen.items() if len(set(outcomes)) > 1}


def stability_table(seen: dict[str, list[str]]) -> str:
    """variant | outcomes seen (with counts) | stable?"""
    width = max((len(v) for v in seen), default=10)
    lines = [f"{'variant':{width}}  outcomes over {max((len(o) for o in seen.values()), default=0)} runs  stable"]
    for variant, outcomes in sorted(seen.items()):
        counts = ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
        lines.append(f"{variant:{width}}  {counts:40}  {'yes' if len(set(outcomes)) == 1 else 'NO'}")
    return "\n".join(lines)


def _python_for(root: Path, cell: Cell) -> Path:
    matrix = load_matrix(root / "matrix.toml")
    venv = env_dir(root, cell.pins)
    if not (venv / "bin" / "python").exists():
        subprocess.run([*uv_command(), "venv", "-q", "-p", cell.python, str(venv)], check=True)
    prepare_environment(venv, requirements_for(matrix, cell.pins), import_modules(matrix, cell.pins))
    return venv / "bin" / "python"


def run_repeatedly(
    root: Path, python: Path, cell: Cell | None, repeat: int, extra: Sequence[str]
) -> tuple[dict[str, list[str]], list[float]]:
    """Run the cases ``repeat`` times; outcomes per variant and wall time per run."""
    seen: dict[str, list[str]] = defaultdict(list)
    seconds: list[float] = []
    axes = ["--bugmatrix-axes", ",".join(cell.axes)] if cell else []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(repeat):
            run_file = Path(tmp) / f"run-{index}.json"
            start = time.perf_counter()
            subprocess.run(
                [str(python), "-m", "pytest", str(root / "cases"), "-q", "-p", "no:cacheprovider", "-n", "2",
                 "--bugmatrix-cell", f"stability-{index}", "--bugmatrix-run-file", str(run_file), *axes, *extra],
                cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=False,
            )  # fmt: skip
            seconds.append(time.perf_counter() - start)
            for record in load_run_file(run_file).results:
                seen[record.id].append(record.outcome)
            print(f"  run {index + 1}/{repeat}: {seconds[-1]:.1f}s", flush=True)
    return dict(seen), seconds


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; one-line errors exit 2, instability exits 1."""
    parser = argparse.ArgumentParser(prog="nox -s stability --", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cell", help="cell id (default: the first CPU cell of the smoke profile)")
    parser.add_argument("--system", action="store_true", help="use the current interpreter instead of a cell's venv")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression to narrow the variants")
    args = parser.parse_args(argv)
    try:
        if args.repeat < 2:
            msg = f"--repeat {args.repeat}: stability needs at least 2 runs"
            raise BugmatrixError(msg)
        cell = None
        if not args.system:
            matrix = load_matrix(args.root / "matrix.toml")
            declared = projections(discover_variants(args.root / "cases"))
            cell = (
                find_cell(plan_all(matrix, declared), args.cell)
                if args.cell
                else next(c for c in plan_cells(matrix, "smoke", declared) if c.device == "cpu")
            )
        python = Path(sys.executable) if cell is None else _python_for(args.root, cell)
    except BugmatrixError as exc:
        print(f"bugmatrix: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    name = cell.id if cell else "system"
    print(f"stability: {args.repeat} runs of {name}")
    seen, seconds = run_repeatedly(args.root, python, cell, args.repeat, ["-k", args.keyword] if args.keyword else [])
    print(stability_table(seen))
    flaky = unstable(seen)
    write_json_atomic(args.root / "reports" / "stability.json", {
        "cell": name, "repeat": args.repeat, "seconds": [round(s, 1) for s in seconds],
        "variants": len(seen), "unstable": flaky, "outcomes": {v: sorted(set(o)) for v, o in seen.items()},
    })  # fmt: skip
    print(f"{len(seen)} variants, {len(flaky)} unstable, {sum(seconds):.0f}s in all")
    return 1 if flaky else 0


if __name__ == "__main__":
    sys.exit(main())
