"""The report always knows what it expected (issue 22 item 1): a lost cell or a run that stopped early is *missing*, with or without --plan.

The two reproductions of the issue, on copies of the committed full run:
a run file deleted (case 1), and a run file cut to 12 of its 47 results with
``complete: false`` (case 2). Both must exit 1 under ``--fail-on-regression``
and say "missing" first -- in the terminal, on the page and in the step
summary -- whether the report was given the plan, or only the baseline.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import shown
from bugmatrix.plan.cells import plan_cells, plan_document
from tests.reference import reference_case_files, reference_catalog, reference_matrix

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "reports" / "baseline.json"
LOST, CUT = "py311-torch2.5.1-pl2.0.3", "py311-torch2.11.0-pl2.6.6"


def full_plan(path: Path, *, without: str | None = None) -> Path:
    """The full profile's CPU cells as the real planner makes them (what ``nox -s report-full`` passes), optionally one fewer.

    Planned from the reference catalogue and matrix (tests/reference.py), the ones the committed runs were made with:
    a case or an axis a user adds to the live ones changes nothing here. Only the cells the committed runs hold: the
    frozen matrix does not know the release today's ``latest`` resolved to when the reference was published.
    """
    matrix = reference_matrix()
    committed = {p.stem for p in (ROOT / "reports" / "runs").glob("*.json")}
    cells = [
        c for c in plan_cells(matrix, "full", reference_catalog()) if c.device == "cpu" and c.id != without and c.id in committed
    ]  # fmt: skip
    write_json_atomic(path, plan_document(matrix, "full", cells))
    return path


def committed_runs(tmp_path: Path) -> Path:
    reports = tmp_path / "reports"
    shutil.copytree(ROOT / "reports" / "runs", reports / "runs")
    return reports


def report(reports: Path, *extra: str) -> list[str]:
    return ["report", "--reports", str(reports), "--baseline", str(BASELINE), "--fail-on-regression", "--date", "2026-11-24",
            "--step-summary", str(reports / "summary.md"), *extra]  # fmt: skip


def assert_missing_first(reports: Path, out: str, cell: str) -> None:
    """Missing leads the terminal, the page and the step summary, and names the cell."""
    assert out.splitlines()[0].startswith("? MISSING:"), out[:400]
    assert cell in out.splitlines()[1]
    html = (reports / "index.html").read_text(encoding="utf-8")
    first_section = re.search(r'<section id="([a-z]+)"', html).group(1)
    assert first_section == "changes", "the one findings box leads"
    section = html[html.index('<section id="changes"') : html.index("</section>", html.index('<section id="changes"'))]
    first_item = re.search(r'<li class="([^"]+)"', section).group(1)
    assert first_item == "missing-total" and f"<code>{cell}</code>" in section, "what is missing first in it"
    summary = (reports / "summary.md").read_text(encoding="utf-8")
    assert re.findall(r"^## .*", summary, re.M)[0].startswith("## ? Missing"), summary[:400]
    markdown = (reports / "compat.md").read_text(encoding="utf-8")
    assert re.findall(r"^## .*", markdown, re.M)[0].startswith("## ? Missing")


@pytest.mark.parametrize("how", ["plan", "profile", "baseline"])
def test_case_1_a_deleted_run_file_is_missing_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    """With --plan, with --profile alone (its plan computed from matrix.toml and the saved resolution), with neither."""
    reports = committed_runs(tmp_path)
    (reports / "runs" / f"{LOST}.json").unlink()
    extra = {"plan": ["--plan", str(full_plan(tmp_path / "plan.json"))], "profile": ["--profile", "full"], "baseline": []}[how]
    cases = ["--cases", str(reference_case_files(tmp_path / "cases"))]  # --profile's plan: of the fixture catalogue's cases
    assert main([*cases, *report(reports, *extra)]) == 1
    out, err = capsys.readouterr()
    assert_missing_first(reports, out, LOST)
    assert f"MISSING autocast_cache::core[cpu] in {LOST}: no run file" in err
    compat = json.loads((reports / "compat.json").read_text())
    assert all(per_cell[LOST]["outcome"] == "missing" for per_cell in compat["results"].values() if LOST in per_cell)
    assert sum(LOST in per_cell for per_cell in compat["results"].values()) == 47, "every result the cell held"
    assert compat["profile"] == "full" and compat["expectation"]["source"] == ("baseline" if how == "baseline" else "plan")
    page = (reports / "index.html").read_text(encoding="utf-8")
    # A path inside the checkout is named from the checkout (a committed page names no machine's path); one outside as given.
    expected = {
        "plan": f"the plan {shown(tmp_path / 'plan.json')}",
        "profile": "the plan computed from",
        "baseline": "the baseline reports/baseline.json",
    }
    assert f'<p class="meta" id="expectation">Expected: {expected[how]}' in page, "the page says which expectation it used"


@pytest.mark.parametrize("how", ["plan", "baseline"])
def test_case_2_a_run_that_stopped_early_is_missing_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    reports = committed_runs(tmp_path)
    path = reports / "runs" / f"{CUT}.json"
    data = json.loads(path.read_text())
    assert len(data["results"]) == len(data["selected"]) == 47
    data["results"], data["complete"], data["finished"] = data["results"][:12], False, ""
    path.write_text(json.dumps(data))
    extra = ["--plan", str(full_plan(tmp_path / "plan.json"))] if how == "plan" else []
    assert main(report(reports, *extra)) == 1
    out, err = capsys.readouterr()
    assert_missing_first(reports, out, CUT)
    assert err.count(f" in {CUT}: the run recorded 12 of 47 ") == 35 and "never completed" in err


def test_a_profile_without_a_plan_is_held_against_its_computed_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--profile and no plan: that profile's plan, from matrix.toml and the saved resolution; a full baseline does not judge it.

    An early stop is a hole of its cell (35 of 47 not recorded), and every planned cell without a run file is missing:
    a lost run file can never pass as a clean night.
    """
    cut = "py311-torch2.11.0-pl2.0.3"  # a nightly cell (CUT is a full-only one: that plan leaves it out, and says so)
    reports = tmp_path / "reports"
    (reports / "runs").mkdir(parents=True)
    data = json.loads((ROOT / "reports" / "runs" / f"{cut}.json").read_text())
    data["results"], data["complete"] = data["results"][:12], False
    (reports / "runs" / f"{cut}.json").write_text(json.dumps(data))
    cases = reference_case_files(tmp_path / "cases")  # the plan computed for the fixture catalogue's cases, not cases/'s
    argv = ["--cases", str(cases), "report", "--reports", str(reports), "--profile", "nightly", "--fail-on-regression"]
    assert main([*argv, "--date", "2026-11-24", "--baseline", str(BASELINE)]) == 1
    out, _ = capsys.readouterr()
    assert out.startswith("? MISSING: ")
    compat = json.loads((reports / "compat.json").read_text())
    assert sum(per_cell.get(cut, {}).get("outcome") == "missing" for per_cell in compat["results"].values()) == 35
    assert re.search(
        r"^expected: the plan computed from .*matrix.toml and the saved resolution .*resolution.json \(\d+ cells\)$", out, re.M
    )
    missing = re.findall(r"^    (\S+): 47 .* no run file for this cell", out, re.M)
    assert LOST in missing, "a planned cell with no run file is missing"


def test_a_baseline_cell_the_plan_dropped_is_said_as_dropped_not_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = committed_runs(tmp_path)
    (reports / "runs" / f"{LOST}.json").unlink()
    plan = full_plan(tmp_path / "plan.json", without=LOST)
    assert main(report(reports, "--plan", str(plan))) == 0, "not planned tonight: nothing is missing"
    out, _ = capsys.readouterr()
    assert "MISSING" not in out
    page = (reports / "index.html").read_text(encoding="utf-8")
    dropped = re.search(r"(\d+) baseline cell\(s\) are not in this plan \(dropped on purpose, not missing\): (.*?)\.(?:\s|<)", page)
    # The frozen reference matrix plans no cell of today's latest release, which the committed runs hold: those are dropped too.
    assert dropped and LOST in dropped.group(2).split(", "), dropped
    assert "change-missing" not in page


def test_the_profile_comes_from_the_plan_and_a_contradiction_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = committed_runs(tmp_path)
    plan = full_plan(tmp_path / "plan.json")
    assert main(report(reports, "--plan", str(plan), "--profile", "smoke")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--profile smoke contradicts the plan's profile 'full'" in err
    assert not (reports / "compat.json").exists(), "nothing written"
    assert main(report(reports, "--plan", str(plan))) == 0
    planned = len(json.loads(plan.read_text())["cells"])
    system = len(list((reports / "runs").glob("system*.json")))  # the GPU runs committed beside the reference: never planned, read
    assert f"report: {planned + system} cells (full, from the plan)" in capsys.readouterr().out


def test_an_ad_hoc_set_of_cells_gets_its_own_label_and_history_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Cells the baseline does not hold, no plan, no --profile: never "smoke" by default, and never another profile's night."""
    reports = tmp_path / "reports"
    fixtures = ROOT / "tests" / "fixtures" / "runs"
    shutil.copytree(fixtures, reports / "runs")  # includes torch 9.0.0, which the committed baseline has never held
    assert main(["report", "--reports", str(reports), "--baseline", str(BASELINE), "--date", "2026-11-24"]) == 0
    out = capsys.readouterr().out
    profile = json.loads((reports / "compat.json").read_text())["profile"]
    assert re.fullmatch(r"ad-hoc-[0-9a-f]{8}", profile), profile
    assert f"({profile}, from an ad-hoc set of 4 cell(s)" in out
    (night,) = [json.loads(line) for line in (reports / "history.jsonl").read_text().splitlines()]
    assert night["profile"] == profile


def test_an_empty_runs_directory_is_one_line_and_no_night_joins_the_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    (reports / "runs").mkdir(parents=True)
    history = reports / "history.jsonl"
    history.write_text("")
    argv = ["report", "--reports", str(reports), "--profile", "nightly", "--fail-on-regression", "--date", "2026-11-24"]
    assert main(argv) == 2, "a report of nothing is not a clean night"
    err = capsys.readouterr().err
    assert "no run files" in err and err.count("\n") == 1, err
    assert history.read_text() == "" and not (reports / "compat.json").exists()


def test_a_lost_smoke_run_file_is_missing_with_profile_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34's probe: ``report --profile smoke --fail-on-regression`` with a deleted run file said "0 missing", exit 0."""
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.releases.tracking import load_plan

    cases = reference_case_files(tmp_path / "cases")  # the fixture catalogue's: a user's new case adds no smoke cell here
    smoke = load_plan(load_matrix(ROOT / "matrix.toml"), cases, registry=False, offline=True).profile_cells("smoke")
    lost = next(c.id for c in smoke if c.device == "cpu")
    reports = committed_runs(tmp_path)
    (reports / "runs" / f"{lost}.json").unlink()
    argv = ["--cases", str(cases), "report", "--reports", str(reports), "--profile", "smoke"]
    assert main([*argv, "--fail-on-regression", "--date", "2026-11-24"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("? MISSING:") and lost in out.splitlines()[1], out[:400]
    assert f"in {lost}: no run file" in err and ", 0 missing," not in out


def test_a_profile_whose_plan_cannot_be_computed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --plan and no saved resolution for nightly's ``latest``: the plan is unknown, so it is one line and exit 2, never a guess."""
    monkeypatch.setenv("BUGMATRIX_RESOLUTION", str(tmp_path / "never-saved.json"))
    reports = committed_runs(tmp_path)
    assert main(["report", "--reports", str(reports), "--profile", "nightly", "--date", "2026-11-24"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--profile nightly without --plan: the night's plan cannot be computed" in err, err
    assert "no saved resolution" in err and "--plan FILE" in err
    assert not (reports / "compat.json").exists() and not (reports / "history.jsonl").exists(), "nothing written"


def test_a_path_is_named_from_the_checkout_when_inside_it_and_as_given_outside(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "build").mkdir(parents=True)
    assert shown(checkout / "build" / "plan.json", checkout) == "build/plan.json"
    assert shown(tmp_path / "elsewhere" / "plan.json", checkout) == str(tmp_path / "elsewhere" / "plan.json")


def test_the_plans_resolution_is_read_by_its_model_and_an_axis_with_two_picks_tracks_its_first() -> None:
    from bugmatrix.documents.plan import PlanDocument
    from bugmatrix.report.expectation import from_plan

    picks = [{"requested": "latest", "resolved": "2.15.0"}, {"requested": "latest-pre", "resolved": "2.16.0rc1"}]
    cells = [{"id": "a", "pins": {"python": "3.11"}}]
    plan = {
        "schema": "bugmatrix.plan.cells/1",
        "profile": "smoke",
        "cells": cells,
        "resolution": {"axes": {"torch": picks}, "resolved_at": "t"},
    }
    tracking = from_plan(PlanDocument.from_json(plan)).tracking
    assert tracking is not None and tracking.resolved_at == "t"
    assert {a: (p.requested, p.resolved) for a, p in tracking.axes.items()} == {"torch": ("latest", "2.15.0")}
    with pytest.raises(ValueError, match=r"missing required field `resolved` - at `\$.resolution.axes"):
        PlanDocument.from_json({**plan, "resolution": {"axes": {"torch": {"requested": "latest"}}}})
