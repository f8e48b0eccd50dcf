"""``repro`` attaches the cell's lock: the issue pins the environment the outcome was observed in, not today's registry."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest

import bugmatrix.tools.repro
from bugmatrix.cli import main
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.run.lock import assemble_lock

ROOT = Path(__file__).resolve().parent.parent
T5 = "t5_loss_no_grad_fn::lightning_trainer[cpu]"
CELL = "py311-torch2.15.0-pl2.0.3-tf4.30.2"  # the seed's affected stack; a full-profile cell with a committed lock


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with no cell venvs (no fresh run: the test stays fast and deterministic) and only the locks the test puts there."""
    root = tmp_path / "root"
    shutil.copytree(ROOT / "locks" / "pieces", root / "locks" / "pieces")  # the hash blocks the locks refer to
    lock_for, built_python = bugmatrix.tools.repro.lock_for, bugmatrix.tools.repro.built_python
    monkeypatch.setattr(bugmatrix.tools.repro, "lock_for", lambda _root, *args: lock_for(root, *args))
    monkeypatch.setattr(bugmatrix.tools.repro, "built_python", lambda _root, cell: built_python(root, cell))
    return root


def _export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    out, reports = tmp_path / "repro", tmp_path / "reports"
    reports.mkdir(exist_ok=True)  # no run files there: the export says it observed nothing (a missing --reports is refused)
    assert main(["repro", T5, "--cell", CELL, "--out", str(out), "--reports", str(reports)]) == 0
    return out, capsys.readouterr().out


def test_the_cells_lock_is_attached_and_the_issue_says_how_to_install_it(
    sandbox: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(ROOT / "locks" / f"{CELL}.txt", sandbox / "locks" / f"{CELL}.txt")
    out, said = _export(tmp_path, capsys)
    exported = (out / "requirements.lock.txt").read_text()
    assert exported == assemble_lock(ROOT / "locks" / f"{CELL}.txt"), "the cell's complete lock, as uv wrote it"
    assert "#piece" not in exported and "    --hash=sha256:" in exported, "a complete hashed requirements file, not the stored form"
    assert "pytorch-lightning==2.0.3" in (out / "requirements.lock.txt").read_text()
    issue = (out / "ISSUE.md").read_text()
    assert "uv pip sync --require-hashes --python venv/bin/python requirements.lock.txt" in issue
    assert f"Exactly the environment of cell `{CELL}`" in issue
    assert "requirements.lock.txt" in said


def test_without_a_current_lock_none_is_attached_and_an_old_one_is_removed(
    sandbox: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(ROOT / "locks" / f"{CELL}.txt", sandbox / "locks" / f"{CELL}.txt")
    out, _ = _export(tmp_path, capsys)
    (sandbox / "locks" / f"{CELL}.txt").unlink()
    out, said = _export(tmp_path, capsys)
    assert not (out / "requirements.lock.txt").exists(), "a lock from an earlier export would pin another environment"
    issue = (out / "ISSUE.md").read_text()
    assert f"No lock of cell `{CELL}` is attached" in issue and "no lock for this cell" in issue
    assert "requirements.lock.txt" not in said


@pytest.mark.parametrize("case", sorted(p.stem for p in (ROOT / "cases").glob("*.py")))
def test_every_case_exports_a_script_whose_module_body_runs(
    case: str, sandbox: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A declaration helper at module level (``FIXED_ON_H200 = observed(...)``) is dropped with the other declarations."""
    pytest.importorskip("torch", reason="the exported script imports the stack")
    out = tmp_path / "repro"
    pins = json.loads((ROOT / "reports" / "runs" / f"{CELL}.json").read_text(encoding="utf-8"))["pins"]
    variants = [v.id for v in load_catalog(ROOT / "cases").variants if v.case_id == case and v.device == "cpu" and set(v.axes) <= set(pins)]
    if not variants:
        pytest.skip(f"no CPU variant of {case} spans only axes {CELL} pins")
    reports = tmp_path / "reports"
    reports.mkdir()
    assert main(["repro", variants[0], "--cell", CELL, "--out", str(out), "--reports", str(reports)]) == 0
    runpy.run_path(str(out / "repro.py"), run_name="exported")  # its module body, not the run at the bottom
