"""New releases lead the report, installed or not (issue 22 item 2).

"The new torch does not install with our pins" is the headline of a nightly
whose question is "did last night's releases change anything?": the cell
keeps what it was asked for (``tracked``), the New releases section says
"does not install in N cells: <uv's reason>", the terminal and the step
summary lead with it, and ``--fail-on-regression`` fails on it -- as on a
baseline cell that no longer installs. The last test goes the real way once:
a stand-in registry whose ``latest`` torch has no wheel anywhere, the real
``plan --resolve``, the real cell session through nox, the real report.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from bugmatrix.cell.runfile import load_run_file
from bugmatrix.cli import main
from bugmatrix.documents.compat import NoteKind
from bugmatrix.documents.run import load_run_dir
from bugmatrix.files import write_json_atomic
from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.new_releases import one_line_reason
from bugmatrix.report.night import analyse
from bugmatrix.run.runner import CellSpec, record_install_failure
from tests.planfiles import plan_of_runs
from tests.test_explain import compat_of, write_runs
from tests.test_registry import QuietHandler, publish, wheel
from tests.test_report import FIXED, fixture_compat, fixture_runs

ROOT = Path(__file__).resolve().parent.parent
NEW = "py311-torch2.99.0-pl2.6.6"
UV_REASON = (
    "Using Python 3.11.7 environment at: .nox/cell-py311-torch2-99-0-pl2-6-6.new\n"
    "error: No solution found when resolving dependencies\n"
    "  cause: Because there is no version of torch==2.99.0 and you require torch==2.99.0, we can conclude that your requirements are unsatisfiable."
)
ONE_LINE = (
    "Because there is no version of torch==2.99.0 and you require torch==2.99.0, we can conclude that your requirements are unsatisfiable."
)


def uninstallable_release(reports: Path) -> None:
    """The fixture cells, plus the run file the cell session writes for a tracked torch 2.99.0 that does not install."""
    write_runs(reports, fixture_runs())
    pins = {"python": "3.11", "torch": "2.99.0", "lightning": "2.6.6"}
    tracked = {"torch": {"requested": "latest", "resolved": "2.99.0"}, "lightning": {"requested": "latest", "resolved": "2.6.6"}}
    record_install_failure(reports / "runs" / f"{NEW}.json", CellSpec(NEW, pins, tracked), UV_REASON)


def test_uvs_reason_in_one_line() -> None:
    assert one_line_reason(UV_REASON) == ONE_LINE
    assert one_line_reason("installed, but does not import: import x: ModuleNotFoundError: No module named 'x'") == (
        "installed, but does not import: import x: ModuleNotFoundError: No module named 'x'"
    )
    assert one_line_reason("") == "no reason recorded"


def test_an_install_failed_cell_keeps_what_it_tracked(tmp_path: Path) -> None:
    uninstallable_release(tmp_path)
    run = load_run_file(tmp_path / "runs" / f"{NEW}.json")
    assert run.install["status"] == "failed" and run.tracked["torch"] == {"requested": "latest", "resolved": "2.99.0"}


def test_a_new_release_that_does_not_install_leads_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    uninstallable_release(reports)
    write_json_atomic(tmp_path / "baseline.json", analyse(fixture_compat()).to_json())
    argv = [
        "report",
        "--reports",
        str(reports),
        "--baseline",
        str(tmp_path / "baseline.json"),
        "--plan",
        plan_of_runs(reports),
        "--date",
        "2026-11-24",
    ]
    assert main([*argv, "--step-summary", str(tmp_path / "summary.md")]) == 0, "without --fail-on-regression it is reported, not fatal"
    out = capsys.readouterr().out
    headline = f"torch 2.99.0 (new): does not install in 1 cell: {ONE_LINE}"
    assert out.splitlines()[0] == f"⚠ NEW RELEASE {headline}", "the terminal leads with it"
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary.index("## New releases") < summary.index("## Changes since baseline")
    assert "torch 2.99.0 (new): does not install in 1 cell: Because there is no version of torch==2.99.0" in summary
    html = (reports / "index.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="releases">') : html.index("</section>", html.index('<section id="releases">'))]
    assert '<li class="release-group release-broken"><b>' + headline in section
    assert f"does not install in {NEW}" in section
    box = html[html.index('<section id="changes"') : html.index("</section>", html.index('<section id="changes"'))]
    assert html.index('id="changes"') < html.index('id="releases"'), "the one findings box leads the page"
    assert "release-does-not-install" in box and f"<code>{NEW}</code>" in box, "and names the cell that does not install"
    releases = json.loads((reports / "compat.json").read_text())["releases"]
    assert [(n["kind"], n["cell"], n["reason"]) for n in releases if n["axis"] == "torch"] == [("does-not-install", NEW, ONE_LINE)]

    assert main([*argv, "--fail-on-regression"]) == 1
    assert f"RELEASE-DOES-NOT-INSTALL {NEW}: torch 2.99.0 (new): does not install" in capsys.readouterr().err


def test_without_a_baseline_a_tracked_release_that_installs_nowhere_is_new(tmp_path: Path) -> None:
    """Nothing judged it and no cell of it installed: the tracked link (latest = 2.99.0) is what says it is tonight's release."""
    assert not analyse(compat_of(fixture_runs())).releases, "the fixture's releases are all judged by their expectations"
    uninstallable_release(tmp_path)
    compat = compat_of(load_run_dir(tmp_path / "runs"))
    (group,) = analyse(compat).releases
    assert (group.axis, group.version, group.installs) == ("torch", "2.99.0", False)
    assert [n.kind for n in group.not_installed] == [NoteKind.DOES_NOT_INSTALL]
    assert [c.kind for c in analyse(compat).failing] == [ChangeKind.RELEASE_DOES_NOT_INSTALL]


def test_a_baseline_cell_that_no_longer_installs_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    runs = fixture_runs()
    for run in runs:
        if run.cell == FIXED:
            run.install, run.results, run.environment = {"status": "failed", "reason": UV_REASON}, [], {}
    write_runs(reports, runs)
    write_json_atomic(tmp_path / "baseline.json", analyse(fixture_compat()).to_json())
    argv = [
        "report",
        "--reports",
        str(reports),
        "--baseline",
        str(tmp_path / "baseline.json"),
        "--plan",
        plan_of_runs(reports),
        "--fail-on-regression",
    ]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert f"⚠ NO-LONGER-INSTALLS {FIXED}: {UV_REASON.splitlines()[0]}" in out.split("\nvariant ")[0], "before the table"
    assert f"NO-LONGER-INSTALLS {FIXED}: {UV_REASON.splitlines()[0]}" in err, "and each failing result for CI logs"


@pytest.mark.e2e
def test_through_the_real_path_a_stand_in_registry_whose_latest_does_not_install(tmp_path: Path) -> None:
    """plan --resolve against a registry on 127.0.0.1 (latest torch = 2.99.0) -> nox cell session -> report: exit 1, the headline."""
    nox = shutil.which("nox") or str(Path(sys.executable).with_name("nox"))
    if not Path(nox).exists():
        pytest.skip("nox is not installed in this environment (the tests session installs it)")
    served = tmp_path / "pypi"
    publish(served, "torch", {"2.15.0": [wheel()], "2.99.0": [wheel(uploaded="2026-11-23T20:00:00Z")]})
    publish(served, "lightning", {"2.6.6": [wheel()]})
    publish(served, "transformers", {"5.23.0": [wheel()]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    reports = tmp_path / "reports"
    env = {
        **os.environ, "BUGMATRIX_INDEX_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "BUGMATRIX_RESOLUTION": str(tmp_path / "resolution.json"), "BUGMATRIX_REPORTS": str(reports), "PYTHONPATH": str(ROOT),
    }  # fmt: skip
    try:
        plan = subprocess.run(
            [sys.executable, "-m", "bugmatrix", "plan", "--profile", "nightly", "--resolve", "--out", str(tmp_path / "plan.json")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert plan.returncode == 0 and "torch latest = 2.99.0" in plan.stderr, plan.stderr[-2000:]
    document = json.loads((tmp_path / "plan.json").read_text())
    document["cells"] = [c for c in document["cells"] if c["id"] == NEW]
    assert document["cells"], f"{NEW} is not planned: {[c['id'] for c in json.loads((tmp_path / 'plan.json').read_text())['cells']]}"
    write_json_atomic(tmp_path / "plan.json", document)
    cell = subprocess.run([nox, "-s", f"cell({NEW})"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert cell.returncode == 0 and "install-failed, recorded" in cell.stderr, cell.stderr[-3000:]
    run = load_run_file(reports / "runs" / f"{NEW}.json")
    assert run.install["status"] == "failed" and run.tracked["torch"] == {"requested": "latest", "resolved": "2.99.0"}
    report = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "report", "--reports", str(reports), "--plan", str(tmp_path / "plan.json"),
         "--fail-on-regression", "--step-summary", str(tmp_path / "summary.md")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert report.returncode == 1, report.stdout[-2000:] + report.stderr[-2000:]
    first = report.stdout.splitlines()[0]
    assert first.startswith("⚠ NEW RELEASE torch 2.99.0 (new): does not install in 1 cell:") and "torch==2.99.0" in first, first
    assert f"RELEASE-DOES-NOT-INSTALL {NEW}" in report.stderr
    assert "## New releases" in (tmp_path / "summary.md").read_text(encoding="utf-8")
