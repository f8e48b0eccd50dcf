"""``python -m bugmatrix report``: run files (+ the plan) -> compat.json, compat.md, index.html, the history, and more.

Every path is checked before anything is written (exit 2), each output directory is locked, and every output is
written all or nothing (exit 3). Exit 1 with ``--fail-on-regression`` for a missing, regressed or uninstallable result.
The re-resolve lane (:mod:`bugmatrix.run.reresolve`, ``<reports>/fresh/``) joins the night when it is tonight's.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.compat import FreshCell, FreshDifference, FreshLane
from bugmatrix.documents.lane import LaneFile, load_reresolved
from bugmatrix.documents.plan import read_plan_document
from bugmatrix.documents.run import Origin, load_run_file, read_run_dir
from bugmatrix.errors import FINDINGS_EXIT_CODE, BugmatrixError
from bugmatrix.files import file_digest, locked_directories, write_files
from bugmatrix.paths import shown
from bugmatrix.provenance import git_commit
from bugmatrix.report.diff import flaky_lines, summary_lines
from bugmatrix.report.expectation import choose_profile, expect, is_system
from bugmatrix.report.history import append_night, history_text, load_history, night_from_compat
from bugmatrix.report.merge import merge_runs, version_order
from bugmatrix.report.model import Compat, load_compat
from bugmatrix.report.night import analyse
from bugmatrix.report.options import ReportOptions
from bugmatrix.report.outputs import Night, kept_by_publish, wanted_outputs
from bugmatrix.report.readme import check_readme, readme_text
from bugmatrix.report.terminal import render_terminal, use_colour
from bugmatrix.values import iso_date

__all__ = ["load_fresh_lane", "night_cells", "run_report"]


def _baseline(options: ReportOptions) -> tuple[Path, Compat | None]:
    if options.baseline is not None and not options.baseline.exists():
        msg = f"--baseline {options.baseline}: no such file; pass an existing compat.json or leave --baseline out"
        raise BugmatrixError(msg)
    path = options.baseline_path
    return path, load_compat(path) if path.exists() else None


def night_cells(options: ReportOptions) -> list[str]:
    """The cells whose run files this report reads (by file name): the night's own, and the GPU runs ``--publish`` keeps."""
    kept = [p.stem for p in kept_by_publish(options.reference)] if _publishing(options) else []
    return [p.stem for p in (options.reports / "runs").glob("*.json")] + kept


def _publishing(options: ReportOptions) -> bool:
    return options.publish and options.reports.resolve() != options.reference.resolve()


def run_report(options: ReportOptions) -> int:
    """Check, merge, analyse, render every wanted output, write all or nothing, say it; exit 1 on a failing night when asked."""
    if options.readme is not None and not options.publish:
        return _refresh_readme(options, options.readme)
    outputs = wanted_outputs(options)
    for output in outputs:  # every path, before anything is read or written
        output.check(options)
    if options.plan:  # the night's plan as written; the orchestrator computes one only without it
        options = replace(options, planned=read_plan_document(options.plan), plan_source=shown(options.plan, options.root))
    choose_profile(options.profile, (), plan=options.planned)  # a --profile the plan contradicts: one line, before anything is read
    baseline = _baseline(options)
    now = dt.datetime.now(dt.UTC)
    today = now.date().isoformat()  # --date is checked: history lines sort by it
    date = today if options.date is None else iso_date(options.date, "--date", f"; use YYYY-MM-DD, e.g. --date {today}")
    locks = [directory for output in outputs for directory in output.locks(options)]
    waiting = "report: waiting for another report writing into {} (one at a time; no night is lost)"
    with locked_directories(dict.fromkeys(locks), on_wait=lambda directory: print(waiting.format(directory), file=sys.stderr, flush=True)):
        night = _build(options, baseline, now, date)
        rendered = [output.render(night) for output in outputs]
        write_files({path: text for files, _ in rendered for path, text in files.items()}, remove=[p for _, gone in rendered for p in gone])
    _say(night, [line for output in outputs if (line := output.line(night))])
    return FINDINGS_EXIT_CODE if (options.fail_on_regression and night.report.failing) else 0


#: The options ``--readme`` without ``--publish`` refuses beside it, named in this order.
_NOT_WITH_README = ("update_baseline", "step_summary", "fail_on_regression", "plan", "profile", "baseline", "history", "date")


def _refresh_readme(options: ReportOptions, readme: Path) -> int:
    """``--readme`` without ``--publish``: the README's table from the committed reference, nothing else read or written."""
    compat_path = options.reference / "compat.json"
    other = [f"--{name.replace('_', '-')}" for name in _NOT_WITH_README if getattr(options, name)]
    other += ["--issue-bodies"] if options.extra else []
    if other:
        msg = (
            f"--readme {readme} without --publish only regenerates its table from {compat_path}; "
            f"leave out {other[0]}, or add --publish to publish this report and its table"
        )
        raise BugmatrixError(msg)
    check_readme(readme)
    if not compat_path.is_file():
        msg = f"--readme {readme}: {compat_path} does not exist; publish a report first (report --publish --readme {readme})"
        raise BugmatrixError(msg)
    compat = load_compat(compat_path)
    write_files({readme: readme_text(readme, analyse(compat))})
    print(f"report: {readme}: table regenerated from {compat_path} ({compat.profile}, commit {compat.commit})")
    return 0


def _say(night: Night, lines: list[str]) -> None:
    """The terminal's account of the night: findings, summary, where it went, and each failing result (stderr)."""
    report, options = night.report, night.options
    compat = report.compat
    failing, flaky = summary_lines(report.changes), flaky_lines(report.changes)
    print(render_terminal(report, colour=use_colour(sys.stdout)))
    page, kept = options.reports / "index.html", ", ".join(night.kept)
    print(f"report: {len(night.runs)} cells ({compat.profile}, from {compat.profile_source}), {len(compat.variants)} variants -> {page}")
    if night.kept:
        print(f"report: with the {len(night.kept)} GPU run(s) committed beside the reference (--publish keeps them): {kept}")
    print(f"expected: {compat.expectation.text}")
    print(
        f"baseline: {report.baseline_path if report.baseline else 'none'}; {len(report.changes)} change(s), {len(failing)} missing,"
        f" regressed or not installing, {len(flaky)} flaky; history: {options.history_path} ({report.nights} {compat.profile} night(s))"
    )
    for line in lines:
        print(line)
    if compat.stale:
        print(f"note: {len(compat.stale)} recorded variant(s) are not in the plan (renamed or removed?): {', '.join(compat.stale[:5])}")
    for line in [*failing, *flaky][:50]:  # one line per failing result, for CI logs (stdout led with them, grouped)
        print(f"  {line}", file=sys.stderr)


def _build(options: ReportOptions, baseline_of: tuple[Path, Compat | None], now: dt.datetime, date: str) -> Night:
    """Inside the lock: read, merge and analyse; the report, the new history, the night's cells and the kept GPU runs."""
    found, unreadable = read_run_dir(options.reports / "runs")
    if not found and not unreadable:  # a report of nothing would pass as a clean night, and join the history as one
        msg = f"{options.reports / 'runs'}: no run files; run the cells first (nox -t smoke) or pass the night's --reports"
        raise BugmatrixError(msg)
    own = {r.cell for r in found} | {u.cell for u in unreadable}
    kept = [load_run_file(p) for p in kept_by_publish(options.reference) if p.stem not in own] if _publishing(options) else []
    found += kept
    plan = options.planned
    if plan is not None:  # a system cell (a GPU's baked image) is never planned, and read beside the planned ones
        runs = [r for r in found if r.cell in plan.cell_ids or is_system(r.cell)]
        unreadable = [u for u in unreadable if u.cell in plan.cell_ids or is_system(u.cell)]
        ignored = sorted(r.cell for r in found if r.cell not in plan.cell_ids and not is_system(r.cell))
        if ignored:
            print(f"report: left out {len(ignored)} run file(s) of cells not in this plan: {', '.join(ignored)}", file=sys.stderr)
    else:
        runs = sorted(found, key=version_order)
    for bad in unreadable:  # a finding of its cell (its results missing), never the end of the whole night's report
        print(f"report: unreadable run file of {bad.cell}, its results count as missing: {bad.why}", file=sys.stderr)
    baseline_path, baseline = baseline_of
    profile, source = choose_profile(options.profile, runs, plan=plan, baseline=baseline)
    expectation = expect(
        runs, profile, plan=plan, plan_path=options.plan_source, baseline=baseline, baseline_path=shown(baseline_path, options.root)
    )
    # A run file written before records carried their axes: the cases' declarations say them (see orchestrate.py).
    carried = all(record.axes is not None for run in runs for record in run.results)
    declared = {} if carried else {v.id: tuple(v.axes) for v in options.variants.values()}
    compat = merge_runs(
        runs,
        profile=profile,
        commit=git_commit(options.root),
        generated=now.isoformat(timespec="seconds"),
        expectation=expectation,
        profile_source=source,
        declared=declared,
        cases=options.variants,
        unreadable=unreadable,
    )
    # The re-resolve lane (<reports>/fresh, when it ran): tonight's fresh resolutions and their sibling runs, against this night.
    lane = load_fresh_lane(options.reports / "fresh", compat, night=date, warn=lambda line: print(line, file=sys.stderr))
    fresh, fresh_files = lane or (None, {})
    # Tonight joins the history before the diff, so a flap that came back tonight is already called flaky; with the digest of
    # every run file it was read from, the only previous results reuse will trust (run/reuse.py).
    files = {f"runs/{run.cell}.json": run.digest for run in runs} | fresh_files
    nights = append_night(load_history(options.history_path), night_from_compat(compat, date, files))
    report = analyse(compat, baseline, nights, baseline_path=str(baseline_path), fresh=fresh)
    return Night(options, report, date, tuple(r.cell for r in runs if r.cell in own), history_text(nights), tuple(r.cell for r in kept))


def _differences(compat: Compat, sibling: RunRecord) -> tuple[FreshDifference, ...]:
    """Variants whose fresh outcome differs from the locked one in the same cell (a hole on either side is no difference)."""
    found = []
    for record in sibling.results:
        locked = compat.entries(record.id).get(sibling.cell)
        if locked is None or locked.outcome in (Outcome.MISSING, Outcome.INSTALL_FAILED) or locked.outcome is record.outcome:
            continue
        found.append(FreshDifference(record.id, locked.outcome, record.outcome, record.message))
    return tuple(sorted(found, key=lambda d: d.variant))


def _moment(text: object) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _is_tonights(sibling: RunRecord, lane_dir: Path, resolved_at: dt.datetime | None) -> bool:
    """The sibling ran from tonight's fresh lock (its input key names that lock's hash), after tonight's lane resolved it."""
    lock = lane_dir / "locks" / f"{sibling.cell.removesuffix('-cuda')}.txt"
    recorded = ((sibling.input_key or {}).get("parts") or {}).get("lock")
    written = _moment((sibling.origin or {}).get("date"))
    tonight = resolved_at is not None and written is not None and written >= resolved_at
    return tonight and lock.is_file() and recorded == file_digest(lock)


def _not_this_night(record: LaneFile, profile: str, night: str | None) -> str | None:
    """Why the lane is not the report's night's (None: it is)."""
    if record.profile != profile:
        recorded = f"profile {record.profile}" if record.profile else "no profile (an older lane)"
        return f"it re-resolved {recorded}, this report is of profile {profile}"
    if night is None:
        return None
    try:
        when = dt.datetime.fromisoformat(record.resolved_at).astimezone(dt.UTC).date()
        day = dt.date.fromisoformat(night)
    except ValueError:
        return f"its resolved_at {record.resolved_at!r} is not a time"
    if when not in (day, day - dt.timedelta(days=1)):
        return f"it resolved on {when.isoformat()}, this report is of the night of {night}"
    return None


def load_fresh_lane(
    lane_dir: Path, compat: Compat, *, night: str | None = None, warn: Callable[[str], None] = print
) -> tuple[FreshLane, dict[str, str]] | None:
    """The lane of ``lane_dir`` for the report's cells, and its sibling run files' digests (for the history); None when none ran."""
    try:
        record = load_reresolved(lane_dir)
        why = record and _not_this_night(record, compat.profile, night)
    except BugmatrixError as exc:  # the lane is news beside the night: a corrupt record loses the lane, never the night
        record, why = None, str(exc)
    if why:
        warn(f"report: left out the re-resolve lane in {lane_dir}: {why}")
    if record is None or why:
        return None
    runs_dir = lane_dir / "runs"
    found, unreadable = read_run_dir(runs_dir) if runs_dir.is_dir() else ([], [])
    siblings = {r.cell: r for r in found}
    broken = {u.cell: u.why for u in unreadable}
    resolved_at = _moment(record.resolved_at)
    stale = sorted(cid for cid, run in siblings.items() if not _is_tonights(run, lane_dir, resolved_at))
    by_cell = record.by_cell
    cells, files = [], {}
    for cell in compat.cells:
        resolved = by_cell.get(cell.id.removesuffix("-cuda"))
        if resolved is None:
            continue
        if resolved.status != "moved":
            cells.append(FreshCell(cell.id, resolved.status, resolved.moved, resolved.reason))
            continue
        sibling = siblings.get(cell.id) if cell.id not in stale else None
        if sibling is None:
            why = (
                f"its sibling run file cannot be read: {broken[cell.id]}" if cell.id in broken else "no sibling run of tonight's fresh lock"
            )
            cells.append(FreshCell(cell.id, "moved", resolved.moved, why, "not-run"))
            continue
        files[f"fresh/runs/{cell.id}.json"] = sibling.digest
        failed = sibling.install.get("status") == "failed"
        kind = "install-failed" if failed else "reused" if sibling.reused_from else "ran"
        origin = msgspec.convert(sibling.observed, Origin | None)
        reason = sibling.install.get("reason", "") if failed else ""
        cells.append(FreshCell(cell.id, "moved", resolved.moved, reason, kind, origin, () if failed else _differences(compat, sibling)))
    return FreshLane(record.resolved_at, tuple(cells), record.as_of, dict(record.held), tuple(stale)), files
