"""End to end through nox: real uv-built cells, the report, and an exported repro.

The mini-matrix is the seed-001 story: transformers 4.30.2 (Adafactor.step
under no_grad) with Lightning 2.0.3 reproduces the T5 loss without grad_fn,
and Lightning 2.6.6 fixes it. Both cells are planned cells of the real matrix.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import plan_all
from bugmatrix.releases.tracking import load_resolved_matrix
from tests.barenox import bare_env
from tests.planfiles import plan_of_runs

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
MATRIX = load_resolved_matrix(ROOT / "matrix.toml")
T5 = "t5_loss_no_grad_fn::lightning_trainer[cpu]"


def _cell(lightning: str) -> str:
    pins = {"python": MATRIX.base["python"], "torch": MATRIX.base["torch"], "lightning": lightning, "transformers": "4.30.2"}
    cid = MATRIX.cell_id(pins)
    assert cid in {c.id for c in plan_all(MATRIX, load_catalog(ROOT / "cases", MATRIX))}, f"{cid} is not a planned cell"
    return cid


REPRODUCED, FIXED = _cell("2.0.3"), _cell("2.6.6")
#: One quick variant of FIXED's own cases (a cell runs only the variants of the cases it was planned for): T5 + Adafactor.
QUICK, QUICK_ID = "adafactor_closure", "t5_loss_no_grad_fn::adafactor_closure[cpu]"
#: The tests of the mini-matrix run on one xdist worker (--dist loadgroup), so its two cells are built and run once.
MINI = pytest.mark.xdist_group("mini-matrix")
#: What nox printed while the mini-matrix's cells ran (set by the fixture).
LOGGED: dict[str, str] = {}


def _nox(*args: str, reports: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    nox = shutil.which("nox") or str(Path(sys.executable).with_name("nox"))
    if not Path(nox).exists():
        pytest.skip("nox is not installed in this environment (the tests session installs it)")
    env = {**os.environ, "BUGMATRIX_REPORTS": str(reports), **(env or {})}
    return subprocess.run([nox, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="session")  # once per worker: its group runs on one, but other modules may come between its tests
def mini_matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the two cells (T5 variants only, to stay fast) and the report, once."""
    reports = tmp_path_factory.mktemp("reports")
    cells = _nox("-s", f"cell({REPRODUCED})", f"cell({FIXED})", "--", "-k", "t5_loss_no_grad_fn", reports=reports)
    assert cells.returncode == 0, cells.stderr[-3000:]
    LOGGED["cells"] = cells.stdout + cells.stderr
    # --profile smoke alone would expect every smoke cell: the plan is the two cells this mini-matrix ran
    report = _nox("-s", "report", "--", "--plan", plan_of_runs(reports), "--fail-on-regression", reports=reports)
    assert report.returncode == 0, report.stderr[-3000:]
    return reports


def _outcome(reports: Path, cell: str, variant: str) -> str:
    data = json.loads((reports / "runs" / f"{cell}.json").read_text())
    return next(r["outcome"] for r in data["results"] if r["id"] == variant)


@MINI
def test_cells_record_the_seed_story(mini_matrix: Path) -> None:
    """Lightning 2.0.3 reproduces, 2.6.6 is fixed, the workaround holds in both."""
    assert _outcome(mini_matrix, REPRODUCED, T5) == "reproduced"
    assert _outcome(mini_matrix, FIXED, T5) == "fixed"
    for cell in (REPRODUCED, FIXED):
        assert _outcome(mini_matrix, cell, "t5_loss_no_grad_fn::enable_grad_closure[cpu]") == "fixed"
    env = json.loads((mini_matrix / "runs" / f"{REPRODUCED}.json").read_text())["environment"]
    assert env["lightning"] == "2.0.3" and env["lightning_package"] == "pytorch-lightning"
    assert env["transformers"] == "4.30.2"


def markdown_row(markdown: str, case: str, variant: str) -> dict[str, str]:
    """The compat.md table row of ``variant`` in ``case``'s section, as {column heading: cell text}."""
    section = markdown[markdown.index(f"## {case.replace('_', chr(92) + '_')}\n") :]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    row = next(line for line in rows if line.startswith(f"| `{variant}`"))
    return dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True))


def html_cell(html: str, variant: str, cell: str) -> str:
    """The ``data-outcome`` of ``variant``'s entry in ``cell``, read from the page's table row."""
    row = re.search(rf'<tr data-case="[^"]+" data-variant="{re.escape(variant)}"[^>]*>(.*?)</tr>', html, re.S)
    assert row, f"no table row for {variant}"
    entry = re.search(rf'<td [^>]*data-outcome="([^"]*)"[^>]*data-cell="{re.escape(cell)}"', row.group(1))
    assert entry, f"no entry for {variant} in {cell}"
    return entry.group(1)


@MINI
def test_a_cell_sessions_log_lines_are_short(mini_matrix: Path) -> None:
    """Issue 35: the input key and axis spec travel in the cell's spec file, so nox logs a short command (< 400 characters)."""
    lines = LOGGED["cells"].splitlines()
    commands = [line for line in lines if "-m pytest" in line]
    assert len(commands) == 2 and all("--bugmatrix-spec" in line for line in commands), commands
    longest = max(lines, key=len)
    assert len(longest) < 400, f"{len(longest)} characters: {longest}"


@MINI
def test_report_shows_both_outcomes_and_the_workaround(mini_matrix: Path) -> None:
    """The generated report carries what the cells recorded, in every format: read from the table cells, not the legend."""
    compat = json.loads((mini_matrix / "compat.json").read_text())
    assert compat["results"][T5][REPRODUCED]["outcome"] == "reproduced"
    assert compat["results"][T5][FIXED]["outcome"] == "fixed"
    markdown = (mini_matrix / "compat.md").read_text()
    trainer = markdown_row(markdown, "t5_loss_no_grad_fn", "lightning_trainer[cpu]")
    assert trainer["pl 2.0.3"].startswith("✗ reproduced") and trainer["pl 2.6.6"].startswith("✓ fixed"), trainer
    assert "works: enable\\_grad\\_closure" in trainer["pl 2.0.3"], "the workaround that held where it reproduced"
    workaround = markdown_row(markdown, "t5_loss_no_grad_fn", "enable_grad_closure[cpu]")
    assert [v for k, v in workaround.items() if k != "variant"] == ["✓ fixed", "✓ fixed"], "the workaround is fixed in both cells"
    html = (mini_matrix / "index.html").read_text()
    assert html_cell(html, T5, REPRODUCED) == "reproduced" and html_cell(html, T5, FIXED) == "fixed"
    assert html_cell(html, "t5_loss_no_grad_fn::enable_grad_closure[cpu]", REPRODUCED) == "fixed"


@MINI
def test_exported_repro_reproduces_in_a_fresh_venv(mini_matrix: Path, tmp_path: Path) -> None:
    """``repro`` writes a script that, in a new venv from its requirements.txt, gives the suite's outcome."""
    out = tmp_path / "repro"
    export = _nox("-s", "repro", "--", T5, "--cell", REPRODUCED, "--out", str(out), reports=mini_matrix)
    assert export.returncode == 0, export.stderr[-2000:]
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", MATRIX.base["python"], str(venv)], check=True, timeout=120)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-r", str(out / "requirements.txt")], check=True, timeout=900
    )
    run = subprocess.run([str(venv / "bin" / "python"), str(out / "repro.py")], capture_output=True, text=True, timeout=300, check=False)
    assert run.stdout.strip().splitlines()[-1] == "OUTCOME: reproduced", run.stdout[-1500:] + run.stderr[-1500:]
    assert "element 0 of tensors does not require grad" in run.stderr
    issue = (out / "ISSUE.md").read_text()
    assert "pytorch-lightning" in issue or "lightning" in issue


def test_the_main_job_leaves_a_clean_checkout_clean(tmp_path: Path, bare_nox: Path) -> None:
    """A cell, the smoke report and a site of it, run as the README's main job runs them in a fresh clone, from an
    interpreter holding only nox and uv (the README's install): every step exits 0 and ``git status`` stays empty.

    The clone is of HEAD (what CI checks); outputs must land in ignored places
    (build/, .nox/) and never in the committed reports/.
    """
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in bare_env(bare_nox).items() if k != "BUGMATRIX_REPORTS"}
    today = dt.datetime.now(dt.UTC).date().isoformat()
    site = ["site", "--", "--reports", "build/reports", "--out", "build/site", "--date", today, "--profile", "smoke"]
    for args in ([f"cell({FIXED})", "--", "-k", QUICK], ["report-smoke"], site):
        done = subprocess.run(
            [bare_nox / "bin" / "nox", "-s", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=1200, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
    assert (clone / "build" / "reports" / "index.html").exists()
    badge = json.loads((clone / "build" / "site" / "badge.json").read_text(encoding="utf-8"))
    assert badge["label"] == "bugmatrix smoke" and re.fullmatch(rf"{today} · \d+ findings?", badge["message"]), badge
    front = (clone / "build" / "site" / "index.html").read_text(encoding="utf-8")
    assert "smoke" in front and today in front, "the front page names the profile and the night"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True).stdout
    assert status == "", status


def test_an_unchanged_cell_is_reused_and_a_moved_one_also_runs_fresh(tmp_path: Path) -> None:
    """Through nox, as the nightly does it: a whole cell run, the same cell reused the next night (nothing built or run),
    --no-reuse honoured, and the re-resolve lane running a cell whose resolution moved in its fresh environment, on the page."""
    from bugmatrix.run.lock import create_lock

    first, second = tmp_path / "first", tmp_path / "second"
    done = _nox("-s", f"cell({FIXED})", reports=first)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads((first / "runs" / f"{FIXED}.json").read_text())
    assert ran["input_key"]["parts"]["lock"].startswith("sha256:") and ran["complete"] and ran["reused_from"] is None
    # The night's report records the run file's digest in the history: reuse trusts that file and no other.
    done = _nox("-s", "report", "--", "--plan", plan_of_runs(first), reports=first)
    assert done.returncode == 0, done.stderr[-3000:]
    previous = {"BUGMATRIX_PREVIOUS": str(first)}
    done = _nox("-s", f"cell({FIXED})", reports=second, env=previous)
    assert done.returncode == 0 and "reused: inputs unchanged since" in done.stderr, done.stderr[-3000:]
    assert "bringing up nodes" not in done.stderr + done.stdout, "a reused cell runs no pytest"
    reused = json.loads((second / "runs" / f"{FIXED}.json").read_text())
    assert reused["reused_from"] == ran["origin"] and reused["results"] == ran["results"]
    narrowed = ["--", "--no-reuse", "-k", QUICK]
    done = _nox("-s", f"cell({FIXED})", *narrowed, reports=tmp_path / "third", env=previous)
    assert done.returncode == 0 and "runs: reuse is off" in done.stderr, done.stderr[-3000:]

    # The lane, against locks made before filelock's 4.2.12 (2026-11-18): whatever the registry holds today, that moved.
    locks = tmp_path / "locks"
    shutil.copytree(ROOT / "locks", locks)
    held = create_lock(
        MATRIX.requirements_for(dict(next(c for c in plan_all(MATRIX, load_catalog(ROOT / "cases", MATRIX)) if c.id == FIXED).pins)),
        MATRIX.base["python"], locks / f"{FIXED}.txt", exclude_newer_packages={"filelock": "2026-11-18T00:00:00Z"},
    )  # fmt: skip
    assert "filelock==4.2.11" in held.read_text()
    lane = {"BUGMATRIX_LOCKS": str(locks)}
    done = _nox("-s", "reresolve-smoke", reports=second, env=lane)
    assert done.returncode == 0 and f"{FIXED}: moved: filelock 4.2.11 → " in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    done = _nox("-s", f"fresh({FIXED})", "--", "-k", QUICK, reports=second, env=lane)
    assert done.returncode == 0 and "moved below its lock: filelock 4.2.11 → " in done.stderr, done.stderr[-3000:]
    sibling = json.loads((second / "fresh" / "runs" / f"{FIXED}.json").read_text())
    assert {r["id"]: r["outcome"] for r in sibling["results"] if r["device"] == "cpu"} == {QUICK_ID: "reproduced"}
    done = _nox("-s", "report", "--", "--plan", plan_of_runs(second), reports=second)
    assert done.returncode == 0, done.stderr[-3000:]
    lane_cells = {c["cell"]: c for c in json.loads((second / "compat.json").read_text())["reresolved"]["cells"]}
    assert lane_cells[FIXED]["sibling"] == "ran" and lane_cells[FIXED]["moved"][0].startswith("filelock 4.2.11 → ")
    html = (second / "index.html").read_text()
    assert "filelock 4.2.11 → " in html and f'data-reused="♻ reused from {ran["origin"]["date"]}' in html
    assert f"diff --git a/locks/{FIXED}.txt b/locks/{FIXED}.txt\n" in (second / "fresh" / "locks.patch").read_text()
