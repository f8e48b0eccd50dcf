"""Cells side by side (bugmatrix/run/pool.py): the same results as one after another, and jobs x workers within the cores.

The fixture project is tests/fixtures/fifth_axis (numpy only, wheels in uv's cache) with a third numpy
release, so three real cells are built with uv and run through the one runner: once with two at a time,
once one at a time, each in its own copy of the project (both build their environments).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import plan_cells
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.envbuild import STAMP, cell_venv
from bugmatrix.run.pool import Slots, run_cells, slots
from bugmatrix.run.runner import CellSpec

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "fifth_axis"
VERSIONS = '["1.26.4", "2.1.3", "2.2.6"]'  # all three are wheels uv's cache holds for cp311 (no download)
#: What differs between two runs of the same inputs: when, how long, and where.
VOLATILE = {"started", "finished", "duration_s", "origin"}


def project(tmp_path: Path, name: str, *, module: str = "numpy") -> Path:
    """A copy of the fixture project beside this checkout's harness, with three numpy releases in every profile."""
    root = tmp_path / name
    shutil.copytree(FIXTURE, root)
    (root / "bugmatrix").symlink_to(ROOT / "bugmatrix")
    shutil.copy(ROOT / "conftest.py", root)
    text = (root / "matrix.toml").read_text(encoding="utf-8")
    text = text.replace('["1.26.4", "2.2.6"]', VERSIONS).replace('{ numpy = "numpy" }', f'{{ numpy = "{module}" }}')
    (root / "matrix.toml").write_text(text, encoding="utf-8")
    return root


def night(root: Path, jobs: int) -> tuple[dict[str, Any], list[str]]:
    """Run the project's smoke cells ``jobs`` at once: normalised run files by cell, and the lines said."""
    matrix = load_matrix(root / "matrix.toml")
    cells = plan_cells(matrix, "smoke", load_catalog(root / "cases", matrix))
    lines: list[str] = []
    reports = root / "reports"
    run_cells(matrix, [CellSpec.of(c) for c in cells], reports, jobs=jobs, workers=1, root=root, say=lines.append)
    runs = {path.stem: normalised(json.loads(path.read_text(encoding="utf-8")), root) for path in (reports / "runs").glob("*.json")}
    return runs, lines


def normalised(value: Any, root: Path) -> Any:
    """A run file with its timestamps, durations and origin dropped and this project's paths written as <root>."""
    if isinstance(value, dict):
        return {k: normalised(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v, root) for v in value]
    return value.replace(str(root), "<root>") if isinstance(value, str) else value


def test_two_at_a_time_records_what_one_at_a_time_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three cells, jobs=2 against jobs=1: equal run files (timestamps and paths aside), equal (absent) locks, one counted line each."""
    monkeypatch.setenv("BUGMATRIX_DISK", "keep")  # never prune this machine's uv cache from a test
    side_by_side, said = night(project(tmp_path, "pool"), jobs=2)
    one_by_one, _ = night(project(tmp_path, "sequential"), jobs=1)
    assert len(side_by_side) == 3 and side_by_side == one_by_one
    assert sorted(r["results"][0]["outcome"] for r in one_by_one.values()) == ["fixed", "reproduced", "reproduced"]
    for root in (tmp_path / "pool", tmp_path / "sequential"):
        assert not (root / "locks").exists(), "running cells never writes a lock"
    assert [line.split()[0] for line in said] == ["[1/3]", "[2/3]", "[3/3]"]
    assert all(re.fullmatch(r"\[\d/3\] py311-np\S+ (fixed|reproduced) 1 \(\d+\.\d s\)", line) for line in said), said


def test_a_stack_that_does_not_import_is_an_observation_from_the_cells_own_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import check is the cell's own import (no second process). A module that is not there is no install failure: the
    environment installed, and every variant whose bug is not raised at that import reads skipped, saying why (issue 44)."""
    monkeypatch.setenv("BUGMATRIX_DISK", "keep")
    root = project(tmp_path, "broken", module="numpy_is_not_this")
    matrix = load_matrix(root / "matrix.toml")
    cell = plan_cells(matrix, "smoke", load_catalog(root / "cases", matrix))[0]
    lines: list[str] = []
    (done,) = run_cells(matrix, [CellSpec.of(cell)], root / "reports", jobs=1, workers=1, root=root, say=lines.append)
    assert done.install_failed is None
    run = json.loads((root / "reports" / "runs" / f"{cell.id}.json").read_text(encoding="utf-8"))
    assert run["install"]["status"] == "ok" and run["complete"]
    (result,) = run["results"]
    assert (result["outcome"], result["verdict"]) == ("skipped", "not-run")
    assert (
        result["message"]
        == "the stack does not import here (import numpy_is_not_this: ModuleNotFoundError: No module named 'numpy_is_not_this')"
    )
    assert lines == [f"[1/1] {cell.id} skipped 1 ({done.seconds:.1f} s)"]
    assert (cell_venv(root, cell.id) / STAMP).exists(), "the environment is what it is: reused next time, not rebuilt"


@pytest.mark.parametrize(
    ("cells", "cores", "free", "jobs", "workers", "expected"),
    [
        (70, 2, 36.0, None, None, Slots(2, 1, "2 cores")),
        (70, 16, 30.0, None, None, Slots(4, 4, "16 cores, 30 GiB free holds 4 torch stack(s) at once")),
        (70, 8, 500.0, None, "2", Slots(4, 2, "8 cores / BUGMATRIX_WORKERS=2")),
        (3, 8, 500.0, None, None, Slots(3, 2, "8 cores")),
        (70, 2, 5.0, None, None, Slots(1, 2, "2 cores, 5 GiB free holds 1 torch stack(s) at once")),
        (70, 4, 5.0, "3", None, Slots(3, 1, "as asked")),
        (70, 4, 500.0, "2", "2", Slots(2, 2, "as asked")),
    ],
)
def test_jobs_come_from_the_cores_and_the_disk(
    cells: int, cores: int, free: float, jobs: str | None, workers: str | None, expected: Slots
) -> None:
    assert slots(cells, cores=cores, free=free, jobs=jobs, workers=workers) == expected


@pytest.mark.parametrize(
    ("jobs", "workers", "words"),
    [("2", "2", "more than this machine's 2 cores"), ("0", None, "BUGMATRIX_JOBS='0'"), ("x", None, "not a number")],
)
def test_too_many_processes_is_one_line(jobs: str, workers: str | None, words: str) -> None:
    with pytest.raises(BugmatrixError, match=re.escape(words)):
        slots(70, cores=2, free=100.0, jobs=jobs, workers=workers)
