"""The noxfile plans once at load, and a broken matrix or case file costs the cell sessions only.

``nox -l`` is how a user finds out what there is to run; a typo in one case
file must not take ``nox -s lint`` (which would point at it) down with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Sessions that need no plan: they must be listed whatever state matrix.toml and the cases are in.
PLANLESS = {"lint", "plan", "lock", "bisect", "repro", "stability", "report", "site", "issues"}


def nox_list(root: Path, env: dict[str, str] | None = None) -> tuple[set[str], list[str]]:
    """(session names ``nox -l`` lists, selected or not, and the non-empty lines it wrote to stderr)."""
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not on PATH")
    run = subprocess.run([nox, "-l"], cwd=root, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    listed = {line[2:].split()[0] for line in run.stdout.splitlines() if line[:2] in ("* ", "- ")}
    return listed, [line for line in run.stderr.splitlines() if line.strip()]


def copy_checkout(tmp_path: Path) -> Path:
    """The files ``nox -l`` reads, copied, so a test can break them."""
    root = tmp_path / "checkout"
    for name in ("noxfile.py", "matrix.toml", "pyproject.toml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    for folder in ("bugmatrix", "cases"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_broken_matrix_is_one_line_and_the_planless_sessions_are_still_listed(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text((ROOT / "matrix.toml").read_text(encoding="utf-8").replace('torch = "2.15.0"', 'torch = "2.15.1"', 1), encoding="utf-8")
    sessions, errors = nox_list(ROOT, {"BUGMATRIX_MATRIX": str(path)})
    assert errors == [
        f"bugmatrix: error: {path}: base.torch: '2.15.1' is not in axes.torch.versions; add it to the axis or pin a listed version"
    ]
    assert PLANLESS <= sessions and not any(s.startswith("cell(") for s in sessions)


def test_a_syntax_error_in_a_case_is_one_line_and_the_planless_sessions_are_still_listed(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    case = root / "cases" / "double_unscale.py"
    case.write_text(case.read_text(encoding="utf-8") + "\ndef broken(:\n", encoding="utf-8")
    sessions, errors = nox_list(root)
    assert len(errors) == 1 and errors[0].startswith(f"bugmatrix: error: {case}:") and "syntax error" in errors[0]
    assert PLANLESS | {"tests"} <= sessions and not any(s.startswith("cell(") for s in sessions)


def test_a_sound_checkout_lists_its_cells_and_one_report_session_per_profile() -> None:
    sessions, errors = nox_list(ROOT)
    assert not [line for line in errors if "error" in line]
    assert any(s.startswith("cell(") for s in sessions)
    assert {"report-smoke", "report-nightly", "report-full"} <= sessions
