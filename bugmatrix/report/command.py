"""``python -m bugmatrix report``: run files (+ the plan) -> compat.json, compat.md, index.html, the history, and more on request.

Reads only what earlier stages wrote: the cells' run files
(``<reports>/runs/*.json``), the plan document when given, the baseline and
the history, and the re-resolve lane's ``<reports>/fresh/`` when it ran. It never re-plans from matrix.toml or the cases, so the report
of a nightly is the report of what that nightly planned and ran.

Nothing is silent and nothing is half-written:

1. every input and every output path is checked before anything is written
   (a bad one is one line, exit 2);
2. the report holds an exclusive lock on each directory it reads outputs from
   and writes them to (the reports directory, the history's, ``reports/``
   with ``--publish``/``--update-baseline``): a second report into the same
   place says it waits, and then works from the first one's history;
3. every output -- compat.json, compat.md, index.html, the history, and
   ``--step-summary``, ``--publish``, ``--update-baseline``, ``--readme`` --
   is written to a temporary beside it and all are renamed only when all are
   written; a full disk or a permission error is one line naming the path,
   exit 3, with every previous output byte for byte as it was.

Exit codes: 0 ok; 1 with ``--fail-on-regression`` when a result is missing,
regressed, or a cell (of the baseline, or of a new release) does not install;
2 bad input; 3 could not write. ``--issue-bodies DIR`` also writes one
issue body per finding (:mod:`bugmatrix.publish`), in the same all-or-nothing
write; nothing is sent anywhere. The committed reference (``reports/``)
changes only with ``--publish`` / ``--update-baseline``; the history
(``--history``, default ``<reports>/history.jsonl``) grows on every run, so
it belongs beside the report, never in ``reports/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from bugmatrix.cell.runfile import RunRecord, load_run_dir
from bugmatrix.errors import FINDINGS_EXIT_CODE, BugmatrixError
from bugmatrix.files import check_output_file, locked_directories, write_files
from bugmatrix.paths import REFERENCE
from bugmatrix.provenance import git_commit
from bugmatrix.report.compat_file import load_compat
from bugmatrix.report.expectation import choose_profile, expect, load_plan
from bugmatrix.report.fresh import load_fresh_lane
from bugmatrix.report.history import Night, append_night, history_text, load_history, night_from_compat
from bugmatrix.report.merge import merge_runs, version_order
from bugmatrix.report.model import Compat
from bugmatrix.report.night import NightReport, analyse
from bugmatrix.report.readme import check_readme, readme_text
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown, render_step_summary
from bugmatrix.report.terminal import render_terminal, use_colour

__all__ = ["OUTPUTS", "git_commit", "night_date", "run_report"]

OUTPUTS = ("compat.json", "compat.md", "index.html")


def night_date(value: str | None, now: dt.datetime) -> str:
    """``--date`` checked (history lines sort by it), or today in UTC."""
    if value is None:
        return now.date().isoformat()
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        msg = f"--date {value!r} is not a date; use YYYY-MM-DD, e.g. --date {now.date().isoformat()}"
        raise BugmatrixError(msg) from None


def _baseline(args: argparse.Namespace) -> tuple[Path, Compat | None]:
    if args.baseline is not None:
        if not args.baseline.exists():
            msg = f"--baseline {args.baseline}: no such file; pass an existing compat.json or leave --baseline out"
            raise BugmatrixError(msg)
        return args.baseline, load_compat(args.baseline)
    path = REFERENCE / "baseline.json"
    return path, load_compat(path) if path.exists() else None


def _history_path(args: argparse.Namespace) -> Path:
    return getattr(args, "history", None) or args.reports / "history.jsonl"


def _check_outputs(args: argparse.Namespace) -> None:
    """Every path this report will write, checked before anything is read or written (one line, exit 2)."""
    if not (args.reports / "runs").is_dir():
        msg = f"--reports {args.reports}: no run directory {args.reports / 'runs'}; run a cell first (nox -s system, or nox -t smoke)"
        raise BugmatrixError(msg)
    for name in OUTPUTS:
        check_output_file(args.reports / name, f"--reports {args.reports}:")
    check_output_file(_history_path(args), "--history")
    if args.step_summary is not None:
        check_output_file(args.step_summary, "--step-summary", create_parent=False)
    if args.update_baseline:
        check_output_file(args.baseline or REFERENCE / "baseline.json", "--update-baseline")
    if args.publish:
        for name in OUTPUTS:
            check_output_file(REFERENCE / name, "--publish")
        if (REFERENCE / "runs").exists() and not (REFERENCE / "runs").is_dir():
            msg = f"--publish: {REFERENCE / 'runs'} is a file, not a directory; move it aside"
            raise BugmatrixError(msg)
    if getattr(args, "issue_bodies", None) is not None:
        from bugmatrix.publish.bodies import check_bodies_dir

        check_bodies_dir(args.issue_bodies)
    readme = getattr(args, "readme", None)
    if readme is not None:
        if not args.publish:
            msg = f"--readme {readme}: only with --publish (the README's table is generated from the committed reference)"
            raise BugmatrixError(msg)
        check_readme(readme)
        check_output_file(readme, "--readme")


def _outputs(args: argparse.Namespace, report: NightReport, history: str, runs: list[str]) -> tuple[dict[Path, str | bytes], list[Path]]:
    """Every file this report writes, with its new content, and the stale files ``--publish`` removes."""
    compat_json = json.dumps(report.to_json(), indent=1, sort_keys=True) + "\n"
    files: dict[Path, str | bytes] = {
        args.reports / "compat.json": compat_json,
        args.reports / "compat.md": render_markdown(report),
        args.reports / "index.html": render_html(report),
        _history_path(args): history,
    }
    if args.step_summary is not None:  # appended to, as $GITHUB_STEP_SUMMARY is meant to be
        before = args.step_summary.read_text(encoding="utf-8") if args.step_summary.exists() else ""
        files[args.step_summary] = before + render_step_summary(report)
    remove: list[Path] = []
    if args.publish and args.reports.resolve() != REFERENCE.resolve():
        for cell in runs:
            files[REFERENCE / "runs" / f"{cell}.json"] = (args.reports / "runs" / f"{cell}.json").read_bytes()
        for name in OUTPUTS:
            files[REFERENCE / name] = files[args.reports / name]
        remove = [p for p in (REFERENCE / "runs").glob("*.json") if p.stem not in runs]
    if args.publish and getattr(args, "readme", None) is not None:
        files[args.readme] = readme_text(args.readme, report)
    if args.update_baseline:
        files[args.baseline or REFERENCE / "baseline.json"] = compat_json
    return files, remove


def _locked(args: argparse.Namespace) -> list[Path]:
    """The directories whose outputs this report reads and replaces: one report at a time in each."""
    directories = [args.reports, _history_path(args).parent]
    if args.publish or (args.update_baseline and args.baseline is None):
        directories.append(REFERENCE)
    if getattr(args, "issue_bodies", None) is not None:
        directories.append(args.issue_bodies)
    return directories


def _issue_bodies(args: argparse.Namespace, report: NightReport, date: str) -> tuple[dict[Path, str | bytes], list[Path]]:
    """``--issue-bodies DIR``: one issue body per finding (+ its repro files), written with the other outputs; nothing is sent."""
    from bugmatrix.publish.attachments import ReproExporter
    from bugmatrix.publish.bodies import body_files
    from bugmatrix.publish.issue_body import Links

    links = Links.for_site(args.site_url or "", report.compat.profile, date, args.run_url or "")
    exporter = ReproExporter(args.matrix, args.cases, args.reports / "runs")
    return body_files(report, date, links, args.issue_bodies, exporter)


def _waiting(directory: Path) -> None:
    print(f"report: waiting for another report writing into {directory} (one at a time; no night is lost)", file=sys.stderr, flush=True)


def run_report(args: argparse.Namespace) -> int:
    """Merge, analyse, render, write all or nothing; exit 1 on a missing, regressed or uninstallable result with ``--fail-on-regression``."""
    _check_outputs(args)
    plan = load_plan(args.plan) if args.plan else None
    baseline = _baseline(args)
    now = dt.datetime.now(dt.UTC)
    date = night_date(getattr(args, "date", None), now)
    with locked_directories(_locked(args), on_wait=_waiting):
        report, nights, runs, history_path = _build(args, plan, baseline, now, date)
        files, remove = _outputs(args, report, history_text(nights), runs)
        if getattr(args, "issue_bodies", None) is not None:
            bodies, gone = _issue_bodies(args, report, date)
            files.update(bodies)
            remove += gone
        write_files(files, remove=remove)
    compat = report.compat
    failing, flaky = report.summary_lines(), report.flaky_lines()
    print(render_terminal(report, colour=use_colour(sys.stdout)))
    print(
        f"report: {len(runs)} cells ({compat.profile}, from {compat.profile_source}), {len(compat.variants)} variants -> {args.reports / 'index.html'}"
    )
    print(f"expected: {compat.expectation.text}")
    print(
        f"baseline: {report.baseline_path if report.baseline else 'none'}; {len(report.changes)} change(s), {len(failing)} missing,"
        f" regressed or not installing, {len(flaky)} flaky; history: {history_path} ({report.nights} {compat.profile} night(s))"
    )
    if getattr(args, "issue_bodies", None) is not None:
        print(f"issues: {len(report.findings())} finding(s), one body each -> {args.issue_bodies} (filed by: nox -s issues)")
    if compat.stale:
        print(f"note: {len(compat.stale)} recorded variant(s) are not in the plan (renamed or removed?): {', '.join(compat.stale[:5])}")
    for line in [*failing, *flaky][:50]:
        print(f"  {line}", file=sys.stderr)
    return FINDINGS_EXIT_CODE if (args.fail_on_regression and failing) else 0


def _declared_axes(args: argparse.Namespace, runs: list[RunRecord]) -> dict[str, tuple[str, ...]]:
    """Each variant's declared axes from the cases, for run files written before their records carried them.

    The one place the report reads the cases: a variant is read along the axes
    it declares, and an older run file cannot say which (the cases' own
    declarations say it, as the cells that wrote those files ran them).
    """
    if all(record.axes is not None for run in runs for record in run.results):
        return {}
    cases = getattr(args, "cases", None)
    if cases is None or not Path(cases).is_dir():
        return {}
    from bugmatrix.plan.catalog import load_catalog

    return {v.id: tuple(v.axes) for v in load_catalog(Path(cases)).variants}


def _build(
    args: argparse.Namespace, plan: dict | None, baseline_of: tuple[Path, Compat | None], now: dt.datetime, date: str
) -> tuple[NightReport, list[Night], list[str], Path]:
    """Inside the lock: read the runs, the baseline and the history; merge and analyse (the history with tonight's night)."""
    found = load_run_dir(args.reports / "runs")
    if not found:  # a report of nothing would pass as a clean night, and join the history as one
        msg = f"{args.reports / 'runs'}: no run files; run the cells first (nox -t smoke) or pass the night's --reports"
        raise BugmatrixError(msg)
    if plan is not None:
        planned = {c["id"] for c in plan["cells"]} | {"system"}
        runs = [r for r in found if r.cell in planned]
        ignored = sorted(r.cell for r in found if r.cell not in planned)
        if ignored:
            print(f"report: left out {len(ignored)} run file(s) of cells not in this plan: {', '.join(ignored)}", file=sys.stderr)
    else:
        runs = sorted(found, key=version_order)
    baseline_path, baseline = baseline_of
    profile, source = choose_profile(args.profile, runs, plan=plan, baseline=baseline)
    expectation = expect(
        runs, profile, plan=plan, plan_path=str(args.plan or ""), baseline=baseline, baseline_path=str(baseline_path)
    )  # fmt: skip
    compat = merge_runs(
        runs, profile=profile, commit=git_commit(args.root), generated=now.isoformat(timespec="seconds"), expectation=expectation,
        profile_source=source, declared=_declared_axes(args, runs),
    )  # fmt: skip
    history_path = _history_path(args)
    # Tonight joins the history before the diff, so a flap that came back tonight is already called flaky.
    nights = append_night(load_history(history_path), night_from_compat(compat, date))
    # The re-resolve lane (<reports>/fresh, when it ran): tonight's fresh resolutions and their sibling runs, against this night.
    fresh = load_fresh_lane(args.reports / "fresh", compat)
    report = analyse(compat, baseline, nights, baseline_path=str(baseline_path), fresh=fresh)
    return report, nights, [r.cell for r in runs], history_path
