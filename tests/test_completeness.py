"""Nothing lost, nothing false: planned results that no run holds are *missing*, and bad run files are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.documents.run import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.report.command import run_report
from bugmatrix.report.diff import ChangeKind, diff_against_baseline, summary_lines
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.options import ReportOptions

CELLS = ("py311-torch2.5.1", "py311-torch2.15.0")
VARIANTS = ("demo::core[cpu]", "demo::fresh[cpu]", "demo::other[cpu]")


def record(variant_id: str, outcome: Outcome = Outcome.FIXED) -> VariantRecord:
    name = variant_id.split("::")[1].split("[")[0]
    return VariantRecord(
        id=variant_id,
        case="demo",
        variant=name,
        device="cpu",
        kind=Kind.CORE,
        workaround_for=None,
        outcome=outcome,
        expected=outcome,
        verdict=Verdict.AS_EXPECTED,
        signature_matched=False,
        message="",
        duration_s=0.1,
    )


def run(cell: str, *records: VariantRecord, complete: bool = True) -> RunRecord:
    version = cell.split("torch")[1]
    return RunRecord(
        cell=cell,
        pins={"python": "3.11", "torch": version},
        axes=["python", "torch"],
        environment={},
        started="s",
        finished="f" if complete else "",
        results=list(records),
        selected=list(VARIANTS),
        complete=complete,
    )


PLAN = {
    "schema": "bugmatrix.plan.cells/1",
    "profile": "smoke",
    "axes": [{"name": "python", "prefix": "py"}, {"name": "torch", "prefix": "torch"}],
    "cells": [
        {"id": c, "pins": {"python": "3.11", "torch": c.split("torch")[1]}, "device": "cpu", "variants": list(VARIANTS)} for c in CELLS
    ],
}


def test_a_missing_cell_and_an_early_stop_are_missing_and_fail() -> None:
    """One cell has no run file, the other stopped after 1 of 3 variants: every absent result is `missing`, first."""
    compat = merge_runs(
        [run(CELLS[0], record(VARIANTS[0]), complete=False)],
        profile="smoke",
        commit="x",
        generated="now",
        plan=PlanDocument.from_json(PLAN),
    )
    results = compat.results
    assert results[VARIANTS[1]][CELLS[0]].outcome is Outcome.MISSING
    assert "recorded 1 of 3" in results[VARIANTS[1]][CELLS[0]].message and "never completed" in results[VARIANTS[1]][CELLS[0]].message
    assert all(results[v][CELLS[1]].outcome is Outcome.MISSING for v in VARIANTS)
    assert "no run file" in results[VARIANTS[0]][CELLS[1]].message
    assert [c.id for c in compat.cells] == list(CELLS), "the cell without a run file still has its column"
    changes = diff_against_baseline(compat, None)
    assert changes[0].kind is ChangeKind.MISSING and len([c for c in changes if c.kind is ChangeKind.MISSING]) == 5
    assert len(summary_lines(changes)) == 5


def test_a_complete_run_has_nothing_missing() -> None:
    runs = [run(c, *(record(v) for v in VARIANTS)) for c in CELLS]
    compat = merge_runs(runs, profile="smoke", commit="x", generated="now", plan=PlanDocument.from_json(PLAN))
    assert not [c for c in diff_against_baseline(compat, None) if c.kind is ChangeKind.MISSING]


def test_a_users_own_deselection_is_not_missing() -> None:
    narrowed = run(CELLS[0], record(VARIANTS[0]))
    narrowed.deselected_by, narrowed.selected = "-k core", [VARIANTS[0]]
    compat = merge_runs(
        [narrowed, run(CELLS[1], *(record(v) for v in VARIANTS))],
        profile="smoke",
        commit="x",
        generated="now",
        plan=PlanDocument.from_json(PLAN),
    )
    assert CELLS[0] not in compat.results[VARIANTS[1]], "shown as not run, not as a loss"


def test_pins_that_disagree_with_the_plan_are_refused() -> None:
    wrong = run(CELLS[0], record(VARIANTS[0]))
    wrong.pins = {"python": "3.11", "torch": "2.6.6"}
    with pytest.raises(BugmatrixError, match="differ from the plan"):
        merge_runs([wrong], profile="smoke", commit="x", generated="now", plan=PlanDocument.from_json(PLAN))


def test_fail_on_regression_exits_1_on_a_missing_cell(tmp_path: Path) -> None:
    """Through the report command: one cell's run file is absent -> exit 1, and the HTML leads with it."""
    write_json_atomic(tmp_path / "runs" / f"{CELLS[0]}.json", run(CELLS[0], *(record(v) for v in VARIANTS)).to_json())
    write_json_atomic(tmp_path / "plan.json", PLAN)
    options = ReportOptions(reports=tmp_path, root=tmp_path, profile="smoke", plan=tmp_path / "plan.json", fail_on_regression=True)
    assert run_report(options) == 1
    html = (tmp_path / "index.html").read_text()
    assert "missing" in html[: html.index(CELLS[0]) + 2000]


def test_duplicate_ids_in_a_run_file_are_refused(tmp_path: Path) -> None:
    data = run(CELLS[0], record(VARIANTS[0], Outcome.REPRODUCED), record(VARIANTS[0], Outcome.FIXED)).to_json()
    write_json_atomic(tmp_path / f"{CELLS[0]}.json", data)
    with pytest.raises(BugmatrixError, match="is recorded 2 times"):
        load_run_file(tmp_path / f"{CELLS[0]}.json")


def test_a_complete_run_file_short_of_its_selection_is_refused(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / f"{CELLS[0]}.json", run(CELLS[0], record(VARIANTS[0])).to_json())
    with pytest.raises(BugmatrixError, match=r"says complete but records 1 of its 3 selected variants \(first missing: "):
        load_run_file(tmp_path / f"{CELLS[0]}.json")


def test_a_run_file_named_after_another_cell_is_refused(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "runs" / f"{CELLS[1]}.json", run(CELLS[0], *map(record, VARIANTS)).to_json())
    with pytest.raises(BugmatrixError, match=r"records cell 'py311-torch2\.5\.1' but is named 'py311-torch2\.15\.0'"):
        load_run_dir(tmp_path / "runs")


@pytest.mark.parametrize("with_plan", [True, False], ids=["plan", "no-plan"])
def test_one_type_corrupt_run_file_is_its_cells_finding_and_the_night_is_still_reported(tmp_path: Path, with_plan: bool) -> None:
    """A dict ``message`` in one file (an unhashable TypeError deep in the report before) costs that cell, not the night."""
    write_json_atomic(tmp_path / "runs" / f"{CELLS[0]}.json", run(CELLS[0], *(record(v) for v in VARIANTS)).to_json())
    corrupt = run(CELLS[1], *(record(v) for v in VARIANTS)).to_json()
    corrupt["results"][1]["message"] = {"not": "text"}
    write_json_atomic(tmp_path / "runs" / f"{CELLS[1]}.json", corrupt)
    write_json_atomic(tmp_path / "plan.json", PLAN)
    options = ReportOptions(
        reports=tmp_path,
        root=tmp_path,
        profile="smoke" if with_plan else None,  # a --profile alone would plan the live smoke cells, which these are not
        plan=tmp_path / "plan.json" if with_plan else None,
        fail_on_regression=True,
    )
    assert run_report(options) == 1, "the lost cell fails --fail-on-regression"
    compat = json.loads((tmp_path / "compat.json").read_text())
    results = compat["results"]
    assert all(results[v][CELLS[0]]["outcome"] == "fixed" for v in VARIANTS), "the readable cell is reported in full"
    for v in VARIANTS:
        entry = results[v][CELLS[1]]
        assert entry["outcome"] == "missing" and entry["message"].startswith("unreadable run file: "), entry
        assert "Expected `str`, got `object` - at `$.results[1].message`" in entry["message"], "names the key and its type"
    assert "unreadable run file" in (tmp_path / "index.html").read_text()
