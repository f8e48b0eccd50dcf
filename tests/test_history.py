"""History across nights: since when, the timeline, flaky marks, the file itself, and the report command's wiring."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from msgspec.structs import replace

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.report.diff import FAILING, ChangeKind, diff_against_baseline, summary_lines
from bugmatrix.report.history import (
    FLIPS,
    HISTORY_SCHEMA,
    WINDOW,
    WORDS,
    Night,
    append_night,
    flaky_pairs,
    load_history,
    night_from_compat,
    nights_of,
    summarise,
    unchanged_since,
    write_history,
)
from bugmatrix.report.model import Compat
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_step_summary
from tests.planfiles import plan_of_runs
from tests.test_report import CORE, FIXED, REPRODUCED, WORKS, fixture_compat

ROOT = Path(__file__).resolve().parents[1]
DATES = ("2026-11-21", "2026-11-22", "2026-11-23")


def three_nights() -> list[Compat]:
    """CORE changes in FIXED on night 2 and stays; WORKS flaps in REPRODUCED: fixed, timeout, fixed."""
    first = fixture_compat()
    second = first.with_entry(CORE, FIXED, outcome="reproduced")
    return [first, second.with_entry(WORKS, REPRODUCED, outcome="timeout"), second]


def history_of(nights: list[Compat]) -> list[Night]:
    kept: list[Night] = []
    for date, compat in zip(DATES, nights, strict=True):
        kept = append_night(kept, night_from_compat(compat, date))
    return kept


def test_since_timeline_and_flaky_over_three_nights() -> None:
    summary = summarise(history_of(three_nights()))
    core, works = summary[CORE], summary[WORKS]
    assert core.since == "2026-11-22" and core.flaky == []
    assert [t.state for t in core.timeline] == ["first", "changed", "same"]
    assert f"{FIXED}: fixed → reproduced" in core.timeline[1].title
    assert works.since == "2026-11-23" and works.flaky == [REPRODUCED], "fixed → timeout → fixed is a flap"
    assert [t.symbol for t in works.timeline] == ["•", "Δ", "↯"]
    assert summary[next(v for v in summary if v not in (CORE, WORKS))].since == "2026-11-21", "never changed: since the first night"


def test_a_progression_is_not_flaky_and_absent_nights_are_gaps() -> None:
    nights = three_nights()
    nights[2] = nights[2].with_entry(WORKS, REPRODUCED, outcome="crashed")  # fixed → timeout → crashed
    summary = summarise(history_of(nights))
    assert summary[WORKS].flaky == []
    kept = history_of(nights)
    kept[1] = replace(kept[1], commit="x", outcomes={})  # the variant missing that night
    assert [t.state for t in summarise(kept)[CORE].timeline] == ["first", "none", "changed"]


def test_flaky_changes_are_downgraded_in_the_baseline_diff() -> None:
    nights = three_nights()
    flaky = flaky_pairs(summarise(history_of(nights)))
    assert flaky == {(WORKS, REPRODUCED)}
    tonight, baseline = nights[1], nights[0]  # WORKS: fixed in the baseline, timeout tonight
    plain = {(c.variant_id, c.cell_id): c.kind for c in diff_against_baseline(tonight, baseline)}
    downgraded = {(c.variant_id, c.cell_id): c for c in diff_against_baseline(tonight, baseline, flaky)}
    assert plain[(WORKS, REPRODUCED)] is ChangeKind.NEW_FAILURE_MODE
    assert downgraded[(WORKS, REPRODUCED)].kind is ChangeKind.FLAKY and ChangeKind.FLAKY not in FAILING
    assert downgraded[(CORE, FIXED)].kind is ChangeKind.REGRESSION, "a change that stuck is still a regression"
    # Listed, not silent: the step summary names it, with its mark.
    summary = render_step_summary(dataclasses.replace(analyse(tonight, baseline), changes=tuple(downgraded.values())))
    assert f"**flaky**: `{WORKS}` in `{REPRODUCED}`" in summary


def test_the_step_summary_names_flaky_pairs_even_on_a_night_they_match_the_baseline() -> None:
    """Night 3 is back to the baseline's outcome, so no change is listed; the flaky mark still is."""
    nights = three_nights()
    report = analyse(nights[2], nights[0], history_of(nights))
    assert all(c.variant_id != WORKS for c in report.changes)
    summary = render_step_summary(report)
    flaky = summary[summary.index("## ≈ Flaky") : summary.index("## Outcomes per case")]
    assert f"- `{WORKS}` in `{REPRODUCED}`" in flaky and CORE not in flaky
    assert "## ≈ Flaky" not in render_step_summary(analyse(nights[2], nights[0])), "no history, no section"


def test_a_flaky_regression_verdict_is_flaky_but_a_missing_result_never_is() -> None:
    """The expectation's regression verdict is downgraded for a flaky pair too; a hole in the table never is."""
    tonight = fixture_compat()
    tonight = tonight.with_entry(CORE, FIXED, outcome="reproduced", verdict="regression")
    tonight = tonight.with_entry(WORKS, REPRODUCED, outcome=Outcome.MISSING, verdict="not-run")
    flaky = {(CORE, FIXED), (WORKS, REPRODUCED)}
    kinds = {(c.variant_id, c.cell_id): c.kind for c in diff_against_baseline(tonight, fixture_compat(), flaky)}
    assert kinds[(CORE, FIXED)] is ChangeKind.FLAKY
    assert kinds[(WORKS, REPRODUCED)] is ChangeKind.MISSING, "a missing result is never downgraded"
    assert [line.split()[0] for line in summary_lines(diff_against_baseline(tonight, fixture_compat(), flaky))] == ["MISSING"]


def test_every_outcome_has_its_own_history_letter() -> None:
    assert len({o.code for o in Outcome}) == len(Outcome) and set(WORDS.values()) == {o.value for o in Outcome}


def test_missing_nights_are_gaps_not_changes_nor_flaps() -> None:
    """fixed, missing, fixed is no change; fixed, missing, reproduced is one change, on the night it shows."""
    nights = [fixture_compat() for _ in DATES]
    nights[1] = nights[1].with_entry(CORE, FIXED, outcome=Outcome.MISSING)
    summary = summarise(history_of(nights))[CORE]
    assert summary.since == DATES[0] and summary.flaky == []
    assert [t.state for t in summary.timeline] == ["first", "missing", "same"]
    assert summary.timeline[1].symbol == "?"
    nights[2] = nights[2].with_entry(CORE, FIXED, outcome="reproduced")
    summary = summarise(history_of(nights))[CORE]
    assert summary.since == DATES[2] and [t.state for t in summary.timeline] == ["first", "missing", "changed"]
    assert "fixed → reproduced" in summary.timeline[2].title


def test_the_flaky_rule_window_and_number_of_flips() -> None:
    """Two changes, one back to an earlier outcome, within the last WINDOW nights; older flaps are forgotten."""
    assert (WINDOW, FLIPS) == (30, 2), "docs/report.md and history.py's docstring state these numbers"
    base = night_from_compat(fixture_compat(), "2026-01-01")
    cell = base.cells.index(FIXED)

    def night(day: int, letter: str) -> Night:
        outcomes = dict(base.outcomes)
        outcomes[CORE] = outcomes[CORE][:cell] + letter + outcomes[CORE][cell + 1 :]
        return replace(base, date=f"2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}", commit="c", profile="p", outcomes=outcomes)

    flap = [night(1, "F"), night(2, "R"), night(3, "F")]
    assert summarise(flap)[CORE].flaky == [FIXED]
    assert summarise(flap[:2])[CORE].flaky == [], "one change is not flaky"
    # The flap ages out: flaky while both changes (nights 2 and 3) are among the last 30 nights, not once night 2 left.
    quiet = [night(day, "F") for day in range(4, 4 + WINDOW)]
    assert summarise(flap + quiet[: WINDOW - 2])[CORE].flaky == [FIXED]
    assert summarise(flap + quiet[: WINDOW - 1])[CORE].flaky == []
    assert len(summarise(flap + quiet)[CORE].timeline) == WINDOW


def test_history_is_bounded_replaces_a_rerun_and_round_trips(tmp_path: Path) -> None:
    night = night_from_compat(fixture_compat(), "2026-01-01")
    kept: list[Night] = []
    for day in range(1, 101):
        kept = append_night(kept, replace(night, date=f"2026-01-{day:03d}", commit="c", profile="p"), keep=90)
    assert len(kept) == 90 and kept[0].date == "2026-01-011"
    assert len(append_night(kept, replace(kept[-1], commit="again"), keep=90)) == 90
    path = tmp_path / "history.jsonl"
    write_history(path, kept)
    assert load_history(path) == kept
    assert json.loads(path.read_text().splitlines()[0])["schema"] == HISTORY_SCHEMA
    assert load_history(tmp_path / "missing.jsonl") == [], "no history yet: a new one starts"


def test_profiles_share_the_file_but_each_keeps_and_reads_its_own_nights() -> None:
    """A full run on a nightly's date must not replace that night, evict it, or show in the nightly's story."""
    night = night_from_compat(fixture_compat(), "2026-01-01")
    kept: list[Night] = []
    for day in range(1, 6):
        kept = append_night(kept, replace(night, date=f"2026-01-{day:02d}", commit="c", profile="nightly"), keep=5)
    full = replace(night, date="2026-01-05", commit="c", profile="full", cells=night.cells[:1], outcomes={CORE: night.outcomes[CORE][:1]})
    kept = append_night(kept, full, keep=5)
    assert [n.profile for n in kept].count("nightly") == 5, "the full run replaced or evicted a nightly night"
    assert nights_of(kept, "full") == [full]
    assert all(t.state != "none" for t in summarise(nights_of(kept, "nightly"))[CORE].timeline)
    rerun = append_night(kept, replace(night, date="2026-01-05", commit="again", profile="nightly"), keep=5)
    assert [n.commit for n in nights_of(rerun, "nightly")][-1] == "again" and len(rerun) == len(kept)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json\n", ":1: corrupt history line"),
        ('{"schema": "bugmatrix.history/0"}\n', "history/0"),
        ('{"schema": "bugmatrix.history/1", "date": "d", "cells": ["a"], "outcomes": {"v": "RF"}}\n', "length"),
    ],
)
def test_a_corrupt_history_is_one_line_naming_the_file_and_the_fix(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(content)
    with pytest.raises(BugmatrixError) as info:
        load_history(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and says in message and "to start a new history" in message


def test_html_shows_since_timeline_and_the_flaky_mark() -> None:
    nights = three_nights()
    html = render_html(analyse(nights[2], None, history_of(nights)))
    assert 'data-since="2026-11-22"' in html and "since 2026-11-22" in html
    assert re.search(r'class="flaky" title="changed back and forth[^"]*py311-torch2\.5\.1-pl2\.0\.3">≈ flaky \(1 cell\)', html)
    assert '<span class="t-flap"' in html and '<span class="t-changed"' in html


def test_report_command_appends_a_night_per_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    shutil.copytree(ROOT / "tests" / "fixtures" / "runs", reports / "runs")
    history = tmp_path / "carried" / "history.jsonl"
    argv = ["report", "--reports", str(reports), "--history", str(history), "--plan", plan_of_runs(reports)]
    runfile, flapping = reports / "runs" / f"{FIXED}.json", reports / "runs" / f"{REPRODUCED}.json"
    steps = tmp_path / "step-summary.md"

    def set_outcome(path: Path, variant: str, outcome: str) -> None:
        data = json.loads(path.read_text())
        next(r for r in data["results"] if r["id"] == variant)["outcome"] = outcome
        path.write_text(json.dumps(data))

    for date in DATES:
        if date == DATES[1]:
            set_outcome(runfile, CORE, "reproduced")  # stays: a change since night 2
            set_outcome(flapping, WORKS, "timeout")  # and back on night 3: a flap
        if date == DATES[2]:
            set_outcome(flapping, WORKS, "fixed")
        steps.unlink(missing_ok=True)
        assert main([*argv, "--date", date, "--step-summary", str(steps)]) == 0
    assert f"- `{WORKS}` in `{REPRODUCED}`" in steps.read_text().split("## ≈ Flaky")[1], "the report passes the history on"
    assert [n.date for n in load_history(history)] == list(DATES)
    assert not (reports / "history.jsonl").exists(), "--history names the file; nothing is written beside the report"
    assert "since 2026-11-22" in (reports / "index.html").read_text()
    out = capsys.readouterr().out
    assert f"history: {history} (3 smoke night(s))" in out and "autocast_cache::core[cpu]" in out, "the terminal summary ends the run"
    assert main([*argv, "--date", "yesterday"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err
    history.write_text("garbage\n")
    assert main(argv) == 2
    assert re.search(r"history\.jsonl:1: corrupt history line", capsys.readouterr().err)


def test_findings_bundle_what_a_maintainer_acts_on_with_since_moved_and_boundary() -> None:
    """The model the issue bodies read: one finding per (kind, subject), its cells, since when, the boundary."""
    nights = three_nights()
    tonight = nights[2].with_entry(WORKS, FIXED, outcome=Outcome.MISSING, message="no run file for this cell")
    report = analyse(tonight, nights[0], history_of([*nights[:2], tonight]))
    by_kind = {(f.kind, f.subject): f for f in report.findings()}
    regression = by_kind[(ChangeKind.REGRESSION, CORE)]
    assert regression.cells == (FIXED,) and regression.since == DATES[1], "the night it came back"
    assert regression.since_by_cell == {FIXED: DATES[1]} and regression.key == f"regression:{CORE}"
    assert regression.boundary == "torch 2.11.0 ✗ → 2.12.0 ‼", "reproduced through 2.11.0 tonight, then the crash"
    assert regression.moved == {}, "the fixture cells record no distributions: nothing to say moved"
    missing = by_kind[(ChangeKind.MISSING, FIXED)]
    assert missing.cells == (FIXED,) and missing.variants == (WORKS,) and missing.message == "no run file for this cell"
    assert missing.variant_id == "" and missing.since_by_cell == {FIXED: DATES[2]}, "a cell's finding: lost tonight"
    flaky = by_kind[(ChangeKind.FLAKY, WORKS)]
    assert flaky.cells == (REPRODUCED,) and flaky.changes == (), "flaky by its history, though it matches the baseline tonight"
    assert [f.kind for f in report.findings()][:2] == [ChangeKind.MISSING, ChangeKind.REGRESSION], "most severe first"


def test_unchanged_since_is_per_cell_and_ends_at_a_night_without_the_cell() -> None:
    compat = fixture_compat()
    nights = [night_from_compat(compat, date) for date in DATES]
    assert unchanged_since(nights, FIXED, [CORE]) == DATES[0]
    changed = [*nights[:2], night_from_compat(compat.with_entry(CORE, FIXED, outcome=Outcome.REPRODUCED), DATES[2])]
    assert unchanged_since(changed, FIXED, [CORE]) == DATES[2]
    assert unchanged_since(changed, REPRODUCED, [CORE, WORKS]) == DATES[0], "another cell's change is not this cell's"
    assert unchanged_since(changed, "no-such-cell", [CORE]) is None and unchanged_since([], FIXED, [CORE]) is None
