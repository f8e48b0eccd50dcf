"""``python -m bugmatrix report``: run files -> compat.json, compat.md, index.html.

Reads only what the cells wrote (``<reports>/runs/*.json``), keeps the cells of
the named profile (plus ``system``), diffs against the baseline and writes every
output atomically, so an interrupted report leaves the previous one intact.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys

from bugmatrix.discover import discover_variants, projections
from bugmatrix.matrix import load_matrix
from bugmatrix.plan import plan_cells
from bugmatrix.report.diff import diff_against_baseline, summary_lines
from bugmatrix.report.merge import load_compat, merge_runs
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown, render_step_summary
from bugmatrix.runfile import load_run_dir, write_json_atomic, write_text_atomic

__all__ = ["git_commit", "run_report"]


def git_commit(root: object) -> str:
    """The checkout's short commit (-dirty if code changed; reports/ are outputs), or "unknown" outside git."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def run_report(args: argparse.Namespace) -> int:
    """Merge, render, diff; exit 1 on a regression when ``--fail-on-regression``."""
    matrix = load_matrix(args.matrix)
    # Planned order is version order (2.5.1 before 2.10.0); the system cell goes first.
    order = {"system": -1} | {c.id: i for i, c in enumerate(plan_cells(matrix, args.profile, projections(discover_variants(args.cases))))}
    found = load_run_dir(args.reports / "runs")
    runs = sorted((r for r in found if r.cell in order), key=lambda r: order[r.cell])
    ignored = sorted(r.cell for r in found if r.cell not in order)
    if ignored:
        print(f"report: left out {len(ignored)} run file(s) of cells not in profile {args.profile}: {', '.join(ignored)}", file=sys.stderr)
    generated = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    compat = merge_runs(runs, profile=args.profile, commit=git_commit(args.root), generated=generated)
    baseline_path = args.baseline or args.reports / "baseline.json"
    baseline = load_compat(baseline_path) if baseline_path.exists() else None
    changes = diff_against_baseline(compat, baseline)

    write_json_atomic(args.reports / "compat.json", compat)
    write_text_atomic(args.reports / "compat.md", render_markdown(compat, changes))
    write_text_atomic(args.reports / "index.html", render_html(compat, changes))
    if args.step_summary:
        with args.step_summary.open("a", encoding="utf-8") as handle:
            handle.write(render_step_summary(compat, changes))
    if args.update_baseline:
        write_json_atomic(baseline_path, compat)

    regressions = summary_lines(changes)
    print(f"report: {len(runs)} cells ({args.profile}), {len(compat['variants'])} variants -> {args.reports}/index.html")
    print(f"baseline: {baseline_path if baseline else 'none'}; {len(changes)} change(s), {len(regressions)} regression(s)")
    for line in regressions:
        print(f"  REGRESSION {line}", file=sys.stderr)
    return 1 if (args.fail_on_regression and regressions) else 0
