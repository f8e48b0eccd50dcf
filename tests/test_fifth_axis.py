"""Adding an axis is an entry in matrix.toml: a numpy axis, planned, built, run and reported for real.

The fixture matrix declares ``[axes.numpy]`` and a case spans it; nothing in
the harness names numpy. The two cells are built with uv (numpy 1.26.4 and
2.2.6, no torch: the plugin runs torch-free cells) and the report shows the
axis with its own prefix and both outcomes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import plan_cells, plan_document
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.command import cell_env, pytest_command, run_file_path
from bugmatrix.run.envbuild import ensure_environment

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "fifth_axis"


def test_a_fifth_axis_declared_only_in_matrix_toml_runs_end_to_end(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "bugmatrix").symlink_to(ROOT / "bugmatrix")
    shutil.copy(ROOT / "conftest.py", root)
    matrix = load_matrix(root / "matrix.toml")
    cells = plan_cells(matrix, "smoke", load_catalog(root / "cases", matrix))
    assert [c.id for c in cells] == ["py311-np1.26.4", "py311-np2.2.6"]
    reports = tmp_path / "reports"
    for cell in cells:
        venv = tmp_path / "venvs" / cell.id
        ensure_environment(venv, cell.python, matrix.requirements_for(cell.pins), matrix.import_modules(cell.pins))
        command = pytest_command(
            venv / "bin" / "python", matrix, cell_id=cell.id, pins=cell.pins, run_file=run_file_path(reports, cell.id), root=root
        )
        done = subprocess.run(command, cwd=root, env=cell_env(root), capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_document(matrix, "smoke", cells)), encoding="utf-8")
    code = main(["report", "--reports", str(reports), "--plan", str(plan), "--profile", "smoke", "--fail-on-regression"])
    assert code == 0
    compat = json.loads((reports / "compat.json").read_text(encoding="utf-8"))
    assert [a["name"] for a in compat["axes"]] == ["python", "numpy"]
    results = compat["results"]["numpy_float_alias::float_alias[cpu]"]
    assert {cell: r["outcome"] for cell, r in results.items()} == {"py311-np1.26.4": "fixed", "py311-np2.2.6": "reproduced"}
    page = (reports / "index.html").read_text(encoding="utf-8")
    assert "np1.26.4" in page and "np2.2.6" in page
