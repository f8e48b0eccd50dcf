"""``python -m bugmatrix report``: run files (+ the plan) -> compat.json, compat.md, index.html.

Reads only what earlier stages wrote: the cells' run files
(``<reports>/runs/*.json``) and, when given, the plan document that says what
should be there. It never re-plans from matrix.toml or the cases, so the
report of a nightly is the report of what that nightly planned and ran. Every
output is written atomically, so an interrupted report leaves the previous one
intact. The committed reference (``reports/``) changes only with
``--publish`` / ``--update-baseline``; the history (``--history``, default
``<reports>/history.jsonl``) is appended to on every run, so it belongs
beside the report, never in ``reports/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bugmatrix.cell.runfile import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic, write_text_atomic
from bugmatrix.paths import REFERENCE
from bugmatrix.plan.cells import PLAN_SCHEMA
from bugmatrix.report.boundaries import pictures
from bugmatrix.report.diff import diff_against_baseline, flaky_lines, summary_lines
from bugmatrix.report.explain import explain
from bugmatrix.report.history import append_night, flaky_pairs, load_history, night_from_compat, nights_of, summarise, write_history
from bugmatrix.report.merge import load_compat, merge_runs, version_order
from bugmatrix.report.readme import check_readme, update_readme
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown, render_step_summary
from bugmatrix.report.terminal import render_terminal, use_colour

__all__ = ["git_commit", "load_plan", "night_date", "run_report"]

OUTPUTS = ("compat.json", "compat.md", "index.html")


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


def load_plan(path: Path) -> dict[str, Any]:
    """A plan document written by ``plan --out`` (or the nox report sessions); a defect is one line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"--plan {path}: cannot read the plan ({exc}); write it with: python -m bugmatrix plan --profile P --out {path}"
        raise BugmatrixError(msg) from None
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA or not isinstance(data.get("cells"), list):
        msg = f"--plan {path}: not a {PLAN_SCHEMA} document; write it with: python -m bugmatrix plan --profile P --out {path}"
        raise BugmatrixError(msg)
    return data


def _baseline(args: argparse.Namespace) -> tuple[Path, dict[str, Any] | None]:
    if args.baseline is not None:
        if not args.baseline.exists():
            msg = f"--baseline {args.baseline}: no such file; pass an existing compat.json or leave --baseline out"
            raise BugmatrixError(msg)
        return args.baseline, load_compat(args.baseline)
    path = REFERENCE / "baseline.json"
    return path, load_compat(path) if path.exists() else None


def _publish(reports: Path, runs: list[str]) -> None:
    """Copy this report and its run files over the committed reference (an explicit step, never the default)."""
    if reports.resolve() == REFERENCE.resolve():
        return
    (REFERENCE / "runs").mkdir(parents=True, exist_ok=True)
    for stale in (REFERENCE / "runs").glob("*.json"):
        stale.unlink()
    for cell in runs:
        shutil.copy2(reports / "runs" / f"{cell}.json", REFERENCE / "runs" / f"{cell}.json")
    for name in OUTPUTS:
        shutil.copy2(reports / name, REFERENCE / name)


def night_date(value: str | None, now: dt.datetime) -> str:
    """``--date`` checked (history lines sort by it), or today in UTC."""
    if value is None:
        return now.date().isoformat()
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        msg = f"--date {value!r} is not a date; use YYYY-MM-DD, e.g. --date {now.date().isoformat()}"
        raise BugmatrixError(msg) from None


def run_report(args: argparse.Namespace) -> int:
    """Merge, render, diff; exit 1 on a regression or a missing result when ``--fail-on-regression``."""
    readme = getattr(args, "readme", None)
    if readme is not None:
        if not args.publish:
            msg = f"--readme {readme}: only with --publish (the README's table is generated from the committed reference)"
            raise BugmatrixError(msg)
        check_readme(readme)
    plan = load_plan(args.plan) if args.plan else None
    found = load_run_dir(args.reports / "runs")
    if plan is not None:
        planned = {c["id"] for c in plan["cells"]} | {"system"}
        runs = [r for r in found if r.cell in planned]
        ignored = sorted(r.cell for r in found if r.cell not in planned)
        if ignored:
            print(f"report: left out {len(ignored)} run file(s) of cells not in this plan: {', '.join(ignored)}", file=sys.stderr)
    else:
        runs = sorted(found, key=version_order)
    now = dt.datetime.now(dt.UTC)
    compat = merge_runs(runs, profile=args.profile, commit=git_commit(args.root), generated=now.isoformat(timespec="seconds"), plan=plan)
    baseline_path, baseline = _baseline(args)
    # Tonight joins the history before the diff, so a flap that came back tonight is already called flaky.
    history_path = getattr(args, "history", None) or args.reports / "history.jsonl"
    tonight = night_from_compat(compat, night_date(getattr(args, "date", None), now))
    nights = append_night(load_history(history_path), tonight)
    own = nights_of(nights, tonight.profile)  # profiles share the file, not their story
    history = summarise(own)
    changes = diff_against_baseline(compat, baseline, flaky_pairs(history))
    explain(compat, baseline)  # new releases vs their predecessors; what moved under changed outcomes

    boundary = pictures(compat)  # computed once for the page, compat.md and the terminal
    write_json_atomic(args.reports / "compat.json", compat)
    write_text_atomic(args.reports / "compat.md", render_markdown(compat, changes, boundary))
    write_text_atomic(args.reports / "index.html", render_html(compat, changes, history, boundary))
    write_history(history_path, nights)
    if args.step_summary:
        with args.step_summary.open("a", encoding="utf-8") as handle:
            handle.write(render_step_summary(compat, changes, history))
    if args.publish:
        _publish(args.reports, [r.cell for r in runs])
        if readme is not None:
            update_readme(readme, compat, boundary)
    if args.update_baseline:
        write_json_atomic(REFERENCE / "baseline.json" if args.baseline is None else args.baseline, compat)

    failing, flaky = summary_lines(changes), flaky_lines(changes)
    print(render_terminal(compat, history, colour=use_colour(sys.stdout), boundary=boundary))
    print(f"report: {len(runs)} cells ({args.profile}), {len(compat['variants'])} variants -> {args.reports / 'index.html'}")
    print(
        f"baseline: {baseline_path if baseline else 'none'}; {len(changes)} change(s), {len(failing)} missing or regressed,"
        f" {len(flaky)} flaky; history: {history_path} ({len(own)} {args.profile} night(s))"
    )
    if compat["stale"]:
        print(
            f"note: {len(compat['stale'])} recorded variant(s) are not in the plan (renamed or removed?): {', '.join(compat['stale'][:5])}"
        )
    for line in [*failing, *flaky][:50]:
        print(f"  {line}", file=sys.stderr)
    return 1 if (args.fail_on_regression and failing) else 0
