"""A fixture project run for real, one night: copy it, plan its smoke profile, build and run every cell, report.

Why shared: the end-to-end tests of a new axis and of an install workaround are the same night on different
fixture catalogues, and both must run cells the way the cell sessions do (``bugmatrix.run.runner.run_cell``:
lock or requirements, uv build, import check, the cell's pytest), not a hand-built copy of that command.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.cli import main
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, plan_cells, plan_document
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.command import run_file_path
from bugmatrix.run.runner import CellSpec, run_cell

__all__ = ["Night", "run_smoke_night"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Night:
    """What a night of the fixture project left: its planned cells, the report's exit code and its directory."""

    cells: tuple[Cell, ...]
    report_code: int
    reports: Path

    def compat(self) -> dict:
        """The night's compat.json."""
        return json.loads((self.reports / "compat.json").read_text(encoding="utf-8"))


def run_smoke_night(fixture: Path, tmp_path: Path) -> Night:
    """Copy ``fixture`` (matrix.toml + cases/) beside this checkout's harness, run its smoke cells and report them."""
    root = tmp_path / "project"
    shutil.copytree(fixture, root)
    (root / "bugmatrix").symlink_to(ROOT / "bugmatrix")
    shutil.copy(ROOT / "conftest.py", root)
    matrix = load_matrix(root / "matrix.toml")
    cells = plan_cells(matrix, "smoke", load_catalog(root / "cases", matrix))
    reports = tmp_path / "reports"

    def execute(command: list[str], env: dict[str, str]) -> int:  # the runner's env: its import check, a case environment's variables
        return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False).returncode

    for cell in cells:
        done = run_cell(
            matrix, CellSpec.of(cell), run_file_path(reports, cell.id), execute=execute, root=root, venv=tmp_path / "venvs" / cell.id
        )
        assert done.install_failed is None and done.returncode in (0, 1), done
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_document(matrix, "smoke", cells)), encoding="utf-8")
    code = main(["report", "--reports", str(reports), "--plan", str(plan), "--profile", "smoke", "--fail-on-regression"])
    return Night(tuple(cells), code, reports)
