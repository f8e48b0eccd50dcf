"""Fault injection: a crash, a hang, an install failure, a corrupt file, an interrupted run.

Each fault must end in its documented outcome with every other result kept.
These run real pytest-xdist workers over a planted case module (needs torch,
which the plugin uses to seed each variant).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.envbuild import InstallFailed, prepare_environment, record_install_failure, uv_command
from bugmatrix.runfile import load_run_file

pytest.importorskip("torch")
pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "planted" / "cases"


def run_planted(tmp_path: Path, *args: str, abort: bool = True) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    cases = tmp_path / "cases"
    if not cases.exists():
        shutil.copytree(PLANTED, cases)
    run_file = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PLANTED_ABORT": "1" if abort else "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(cases), "-p", "bugmatrix.plugin", "-p", "no:cacheprovider", "-q",
         "--bugmatrix-timeout", "3", "--bugmatrix-cell", "planted", "--bugmatrix-run-file", str(run_file), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    outcomes = {r.id: r.outcome for r in load_run_file(run_file).results} if run_file.exists() else {}
    return proc, outcomes


def test_crash_and_hang_are_recorded_and_nothing_else_is_lost(tmp_path: Path) -> None:
    proc, outcomes = run_planted(tmp_path, "-n", "2")
    assert outcomes == {
        "planted::reproduces[cpu]": "reproduced",
        "planted::fixed[cpu]": "fixed",
        "planted::aborts[cpu]": "crashed",
        "planted::hangs[cpu]": "timeout",
        "planted::checks_nothing[cpu]": "different",
    }, proc.stdout[-2000:]
    assert proc.returncode == 1, "unexpected outcomes fail the pytest run"
    data = json.loads((tmp_path / "run.json").read_text())
    crashed = next(r for r in data["results"] if r["id"] == "planted::aborts[cpu]")
    assert "crashed" in crashed["message"] and crashed["verdict"] == "new-failure-mode"
    assert data["finished"], "the run file is closed even after a worker died"


def test_timeout_works_without_xdist(tmp_path: Path) -> None:
    _, outcomes = run_planted(tmp_path, "-p", "no:xdist", "-k", "hangs or fixed", abort=False)
    assert outcomes == {"planted::hangs[cpu]": "timeout", "planted::fixed[cpu]": "fixed"}


def test_interrupted_run_keeps_results_and_resume_skips_them(tmp_path: Path) -> None:
    # Without xdist an abort kills the whole pytest process: what ran before it must survive.
    proc, first = run_planted(tmp_path, "-p", "no:xdist", "-k", "fixed or aborts or reproduces")
    assert proc.returncode != 0 and proc.returncode != 1, "the process itself died"
    assert first.get("planted::fixed[cpu]") == "fixed" and "planted::aborts[cpu]" not in first
    # The re-run resumes: recorded variants are deselected, the rest run.
    proc, second = run_planted(tmp_path, "-p", "no:xdist", "--bugmatrix-resume", "-k", "not hangs", abort=False)
    assert "deselected" in proc.stdout
    assert second["planted::fixed[cpu]"] == "fixed" and second["planted::aborts[cpu]"] == "fixed"
    assert set(first) <= set(second)


def test_unresolvable_cell_is_install_failed_with_the_resolver_reason(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [*uv_command(), "venv", "-q", "-p", f"{sys.version_info.major}.{sys.version_info.minor}", str(venv)], check=True, timeout=120
    )
    with pytest.raises(InstallFailed) as info:
        prepare_environment(venv, ["torch==0.0.1"], ["torch"])
    reason = str(info.value)
    assert "torch" in reason and ("0.0.1" in reason or "no version" in reason.lower())
    run_file = tmp_path / "runs" / "cell.json"
    record_install_failure(run_file, "py311-torch0.0.1", {"python": "3.11", "torch": "0.0.1"}, reason)
    run = load_run_file(run_file)
    assert run.install == {"status": "failed", "reason": reason} and run.results == []


def test_importable_but_broken_package_is_install_failed(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [*uv_command(), "venv", "-q", "-p", f"{sys.version_info.major}.{sys.version_info.minor}", str(venv)], check=True, timeout=120
    )
    with pytest.raises(InstallFailed, match="does not import: import no_such_module"):
        prepare_environment(venv, ["packaging"], ["no_such_module"])


def test_failed_download_is_install_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that cannot be reached mid-build (here: a closed port on loopback) is install-failed, with why."""
    venv = tmp_path / "venv"
    subprocess.run([*uv_command(), "venv", "-q", "-p", f"{sys.version_info.major}.{sys.version_info.minor}", str(venv)], check=True, timeout=120)
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("UV_HTTP_TIMEOUT", "5")
    with pytest.raises(InstallFailed) as info:
        prepare_environment(venv, ["packaging==24.1"], ["packaging"])
    assert "127.0.0.1" in str(info.value) or "connect" in str(info.value).lower()
