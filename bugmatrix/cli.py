"""Command line: ``python -m bugmatrix plan|report|bisect|repro``.

Every subcommand is a thin layer over a library function; a BugmatrixError
anywhere is printed as one line and exits with 2 — the single place where
errors meet people.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError

__all__ = ["ROOT", "main"]

ROOT = Path(__file__).resolve().parent.parent


def _plan(args: argparse.Namespace) -> int:
    from bugmatrix.discover import discover_variants, projections
    from bugmatrix.matrix import load_matrix
    from bugmatrix.plan import plan_cells

    matrix = load_matrix(args.matrix)
    cells = plan_cells(matrix, args.profile, projections(discover_variants(args.cases)))
    if args.json:
        include = [
            {
                "cell": c.id,
                "session": f"cell({c.id})",
                "python": c.python,
                "device": c.device,
                "runs-on": list(matrix.gpu_runner) if c.device == "cuda" else "ubuntu-latest",
            }
            for c in cells
        ]
        print(json.dumps({"include": include}, sort_keys=True))
    else:
        for c in cells:
            pins = " ".join(f"{k}={v}" for k, v in c.pins.items())
            print(f"{c.id:45} {c.device:5} {pins}")
        print(f"{len(cells)} cells in profile {args.profile}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bugmatrix", description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.toml", help="matrix file (default: %(default)s)")
    parser.add_argument("--cases", type=Path, default=ROOT / "cases", help="case directory (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", help="print the cells of a profile")
    plan.add_argument("--profile", default="smoke")
    plan.add_argument("--json", action="store_true", help='GitHub Actions matrix: {"include": [...]}')
    plan.set_defaults(func=_plan)

    from bugmatrix import commands

    commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input is one line on stderr and exit code 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BugmatrixError as exc:
        print(f"bugmatrix: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
