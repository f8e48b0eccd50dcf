"""New releases against their predecessors, and what moved below the pins when an outcome changed.

Built on the real fixture run files (tests/fixtures/runs) and the real report
command: a planted change of one transitive dependency must be named in the
HTML and the step summary, and a new release must lead both.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.cli import main
from bugmatrix.documents.compat import Moved, NoteKind
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.files import write_json_atomic
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.model import Compat
from bugmatrix.report.new_releases import new_releases, release_groups, release_notes
from bugmatrix.report.night import analyse, explain_changes
from bugmatrix.report.render_md import escape_md
from bugmatrix.versions import distribution_changes
from tests.planfiles import plan_of_runs
from tests.test_report import CORE, FIXED, REPRODUCED, WORKS, fixture_runs

GENERATED = "2026-11-20T02:00:00+00:00"


def compat_of(runs: list[RunRecord]) -> Compat:
    return merge_runs(runs, profile="nightly", commit="abc1234", generated=GENERATED)


def runs_with(numpy: str, core_outcome: str | None = None) -> list[RunRecord]:
    """The fixture runs; the fixed cell records every distribution, numpy at ``numpy``, and its core outcome changed if asked."""
    runs = copy.deepcopy(fixture_runs())
    for run in runs:
        if run.cell == FIXED:
            run.environment["distributions"] = {"numpy": numpy, "tokenizers": "0.22.1", "torch": "2.11.0"}
            if core_outcome:
                run.results = [r if r.id != CORE else type(r)(**{**r.__dict__, "outcome": core_outcome}) for r in run.results]
    return runs


def write_runs(directory: Path, runs: list[RunRecord]) -> None:
    for run in runs:
        write_json_atomic(directory / "runs" / f"{run.cell}.json", run.to_json())


def report(tmp_path: Path, runs: list[RunRecord], baseline: Compat) -> tuple[str, str]:
    """Run the real report command; return (index.html, step summary)."""
    reports, summary = tmp_path / "reports", tmp_path / "summary.md"
    write_runs(reports, runs)
    write_json_atomic(tmp_path / "baseline.json", analyse(baseline).to_json())
    code = main(["report", "--reports", str(reports), "--plan", plan_of_runs(reports, "nightly"), "--baseline", str(tmp_path / "baseline.json"),
                 "--step-summary", str(summary)])  # fmt: skip
    assert code == 0
    return (reports / "index.html").read_text(), summary.read_text()


def test_distribution_changes_name_old_and_new() -> None:
    assert distribution_changes({"numpy": "2.3.4", "six": "1.16.0", "a": "1"}, {"numpy": "2.4.0", "a": "1", "tomli": "2.0.1"}) == [
        "numpy 2.3.4 → 2.4.0", "-six 1.16.0", "+tomli 2.0.1",
    ]  # fmt: skip


def test_a_planted_transitive_change_is_named_in_the_html_and_the_step_summary(tmp_path: Path) -> None:
    baseline = compat_of(runs_with("2.3.4"))
    html, summary = report(tmp_path, runs_with("2.4.0", core_outcome="reproduced"), baseline)
    line = f"{CORE}` in `{FIXED}`: fixed → reproduced — numpy 2.3.4 → 2.4.0"
    assert line in summary
    assert summary.index("numpy 2.3.4 → 2.4.0") < summary.index("## Changes since baseline"), "leads the summary"
    box = html[html.index('<section id="changes"') : html.index("</section>", html.index('<section id="changes"'))]
    assert f"<code>{CORE}</code> in <code>{FIXED}</code></a>: fixed → <b>reproduced</b>" in box
    assert "below the pins: numpy 2.3.4 → 2.4.0" in box, "the finding says what moved in its cell, in the one findings box"
    assert "Outcomes that changed" not in html[: html.index('id="changes"')], "no near-duplicate above the findings box"
    # Every cell's full environment, collapsed; only the fixed cell recorded one here.
    assert html.count('<details class="installed"') == 1 and "numpy==2.4.0" in html


def test_an_unchanged_environment_says_the_cause_is_not_below_the_pins() -> None:
    baseline = compat_of(runs_with("2.3.4"))
    current = compat_of(runs_with("2.3.4", core_outcome="reproduced"))
    assert explain_changes(baseline, current) == [Moved(CORE, FIXED, Outcome.FIXED, Outcome.REPRODUCED, ())]
    assert explain_changes(None, current) == [] and explain_changes(baseline, baseline) == []


def new_release_runs(core_outcome: str) -> list[RunRecord]:
    """The fixture cells plus torch 2.16.0 (pl 2.0.3): the reproduced cell (torch 2.5.1, pl 2.0.3) is its predecessor."""
    runs = copy.deepcopy(fixture_runs())
    template = next(r for r in runs if r.cell == REPRODUCED)
    new = copy.deepcopy(template)
    new.cell, new.pins = "py311-torch2.16.0-pl2.0.3", {**template.pins, "torch": "2.16.0"}
    new.results = [type(r)(**{**r.__dict__, "outcome": core_outcome if r.id == CORE else r.outcome}) for r in new.results]
    return [*runs, new]


def test_a_new_release_is_compared_with_the_previous_release_in_the_run(tmp_path: Path) -> None:
    baseline = compat_of(fixture_runs())
    current = compat_of(new_release_runs("reproduced"))
    assert new_releases(current, baseline) == [("torch", "2.16.0")]
    notes = {n.variant: n for n in release_notes(current, baseline)}
    assert notes[CORE].text == f"torch 2.16.0 (new): {CORE} reproduced, as in 2.5.1"
    assert notes[WORKS].kind is NoteKind.SAME and notes[WORKS].previous_version == "2.5.1"

    current = compat_of(new_release_runs("fixed"))
    assert {n.variant: n.text for n in release_notes(current, baseline)}[CORE] == (
        f"torch 2.16.0 (new): {CORE} fixed, but reproduced in 2.5.1 — fixed in this release"
    )


def back_in_the_new_release(verdict: str) -> list[RunRecord]:
    """The predecessor (torch 2.5.1) had CORE fixed; the new release brings it back, with ``verdict`` against its expectation."""
    runs = new_release_runs("fixed")
    for run in runs:
        if run.cell == REPRODUCED:
            run.results = [type(r)(**{**r.__dict__, "outcome": "fixed" if r.id == CORE else r.outcome}) for r in run.results]
        if run.cell == "py311-torch2.16.0-pl2.0.3":
            expected = "reproduced" if verdict == "as-expected" else "fixed"
            run.results = [
                type(r)(**{**r.__dict__, "outcome": "reproduced", "verdict": verdict, "expected": expected}) if r.id == CORE else r
                for r in run.results
            ]
    return runs


def test_a_regression_candidate_leads_the_summary_and_follows_the_findings_box_in_the_html(tmp_path: Path) -> None:
    runs = back_in_the_new_release("regression")
    html, summary = report(tmp_path, runs, compat_of(fixture_runs()))
    text = f"torch 2.16.0 (new): {CORE} reproduced, but fixed in 2.5.1 — a regression candidate"
    assert f"  - {escape_md(text)}" in summary
    assert summary.index("## New releases") < summary.index("## Changes since baseline")
    assert text in html and html.index('id="changes"') < html.index('id="releases"') < html.index('id="overview"')
    first = html[html.index('id="releases"') :].split('<li class="release-group"', 2)[1]
    assert "regression-candidate" in first, "releases with a regression candidate come first"


def test_a_change_its_expectation_declares_is_no_regression_candidate(tmp_path: Path) -> None:
    """Issue 23: "regression candidate" only for an outcome that differs from its expectation."""
    html, summary = report(tmp_path, back_in_the_new_release("as-expected"), compat_of(fixture_runs()))
    text = f"torch 2.16.0 (new): {CORE} reproduced, but fixed in 2.5.1 — as its expectation declares"
    assert f"  - {escape_md(text)}" in summary and text in html
    assert "regression candidate" not in summary and "regression-candidate" not in html


def test_results_as_before_are_one_count_per_release_and_only_the_rest_is_spelled_out(tmp_path: Path) -> None:
    """At the full profile a first run holds hundreds of notes; the headline counts the unchanged ones."""
    current = compat_of(new_release_runs("fixed"))
    baseline = compat_of(fixture_runs())
    notes = release_notes(current, baseline)
    (group,) = release_groups(notes, current, baseline)
    assert group.total == len(notes) and group.same == len(notes) - 1
    assert [n.variant for n in group.notable] == [CORE]
    assert group.headline == f"torch 2.16.0 (new): {len(notes) - 1} of {len(notes)} results as in 2.5.1; 1 differ"
    html, summary = report(tmp_path, new_release_runs("fixed"), compat_of(fixture_runs()))
    assert summary.count("(new)") == 2, "the headline and the one note that differs"
    assert html.count('class="release-group"') == 1


def test_no_new_release_and_no_move_means_no_section(tmp_path: Path) -> None:
    baseline = compat_of(fixture_runs())
    html, summary = report(tmp_path, fixture_runs(), baseline)
    assert 'id="releases"' not in html and 'id="moved"' not in html and "## New releases" not in summary
    assert json.loads((tmp_path / "reports" / "compat.json").read_text())["releases"] == []


def test_what_latest_meant_is_in_the_header_of_every_format(tmp_path: Path) -> None:
    """Run files that recorded a tracked pin put "torch latest = 2.11.0" on the page, in compat.md and the summary."""
    runs = copy.deepcopy(fixture_runs())
    for run in runs:
        run.tracked = {"torch": {"requested": "latest", "resolved": run.pins["torch"]}} if run.cell == FIXED else {}
    fixed_torch = next(r.pins["torch"] for r in runs if r.cell == FIXED)
    html, summary = report(tmp_path, runs, compat_of(fixture_runs()))
    text = f"Tracking: torch latest = {fixed_torch}"
    assert text in html and text in summary
    assert text in (tmp_path / "reports" / "compat.md").read_text()
    untracked, _ = report(tmp_path / "plain", fixture_runs(), compat_of(fixture_runs()))
    assert 'id="tracking"' not in untracked


def test_the_plans_resolution_wins_and_a_stale_one_says_so() -> None:
    runs = fixture_runs()
    plan_cells = [{"id": r.cell, "pins": dict(r.pins), "variants": [x.id for x in r.results]} for r in runs]
    resolution = {
        "axes": {"torch": {"requested": "latest", "resolved": "2.16.0"}},
        "resolved_at": "2026-11-23T03:17:00+00:00",
        "stale": True,
    }
    axes = [msgspec.structs.asdict(a) for a in compat_of(runs).axes]
    plan = {"schema": "bugmatrix.plan.cells/1", "profile": "nightly", "axes": axes, "cells": plan_cells, "resolution": resolution}
    compat = merge_runs(runs, profile="nightly", commit="abc1234", generated=GENERATED, plan=PlanDocument.from_json(plan))
    assert compat.tracking_text() == (
        "torch latest = 2.16.0 (resolved 2026-11-23T03:17:00+00:00); registry unreachable: the last saved resolution"
    )
