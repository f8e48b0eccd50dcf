"""BUGMATRIX_DISK=lean: which cells may drop the torch cache, and what counts as the torch stack."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.run import diskbudget
from bugmatrix.run.diskbudget import (
    MARGIN_GIB,
    STACK_GIB,
    cache_lock,
    heavy_distributions,
    lean_needed,
    needed_by,
)

ORDER = [
    ("py310-torch2.14.1", ["torch==2.14.1", "lightning==2.6.6"]),
    ("py311-torch2.0.1", ["torch==2.0.1", "numpy<2"]),
    ("py311-torch2.14.1", ["torch==2.14.1", "transformers==4.57.6"]),
    ("py312-torch2.15.0", ["Torch==2.15.0"]),
]


@pytest.mark.parametrize(
    ("cell", "later"),
    [("py310-torch2.14.1", True), ("py311-torch2.0.1", False), ("py311-torch2.14.1", False), ("py312-torch2.15.0", False), ("nope", True)],
)
def test_the_cache_is_kept_while_a_later_cell_pins_the_same_heavy_release(
    cell: str, later: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cell at a time, the cells after it in the run order are still to come (one not in the order keeps the cache);
    compared by the heavy distributions' exact pins (a shared lightning pin does not keep torch's wheels)."""
    from bugmatrix.run import runner

    class Planned:
        def requirements_for(self, pins: dict[str, str], extra: object = None) -> list[str]:
            return dict(ORDER).get(pins["cell"], ["torch==9.9.9"])

    dropped: list[bool] = []

    def release_cell(venv: Path, *, drop_cache: bool, root: Path | None = None) -> list[str]:
        dropped.append(drop_cache)
        return []

    monkeypatch.setenv("BUGMATRIX_DISK", "lean")
    monkeypatch.setattr(runner, "release_cell", release_cell)
    order = [runner.CellSpec(cid, {"cell": cid}) for cid, _ in ORDER]
    runner.release(Planned(), runner.CellSpec(cell, {"cell": cell}), order, root=tmp_path)  # type: ignore[arg-type]
    assert dropped == [not later]


def test_the_torch_stack_is_torch_triton_and_the_cuda_libraries() -> None:
    names = [
        "torch",
        "nvidia_cublas_cu12",
        "nvidia-nccl-cu12",
        "triton",
        "numpy",
        "lightning",
        "torchmetrics",
        "cuda-bindings",
        "packaging",
    ]
    assert heavy_distributions(names) == ["cuda-bindings", "nvidia-cublas-cu12", "nvidia-nccl-cu12", "torch", "triton"]


@pytest.mark.parametrize(
    ("value", "free", "jobs", "lean"),
    [("lean", 1e6, 1, True), (" LEAN ", 1e6, 1, True), ("keep", 0.0, 1, False), ("", 1e6, 1, False), ("auto", 0.0, 1, True),
     ("", MARGIN_GIB + STACK_GIB, 1, False), ("", MARGIN_GIB + STACK_GIB, 2, True)],
)  # fmt: skip
def test_unset_is_lean_only_once_the_disk_cannot_hold_the_next_stacks(
    monkeypatch: pytest.MonkeyPatch, value: str, free: float, jobs: int, lean: bool
) -> None:
    """Kept environments are the cheaper mode: unset (or auto) turns lean when the free disk cannot hold a stack per running cell."""
    monkeypatch.setenv("BUGMATRIX_DISK", value)
    monkeypatch.setattr(diskbudget, "free_gib", lambda path: free)
    assert lean_needed(jobs) is lean


def test_a_bad_disk_mode_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUGMATRIX_DISK", "tiny")
    with pytest.raises(BugmatrixError, match="BUGMATRIX_DISK='tiny': use lean, keep or auto"):
        lean_needed()


def test_a_stack_is_kept_while_a_running_or_waiting_cell_pins_it() -> None:
    """Cells side by side: "later" is every unfinished cell, in any order."""
    assert needed_by([["torch==2.0.1"], ["Torch==2.14.1", "numpy"]], ["torch==2.14.1", "lightning==2.6.6"])
    assert not needed_by([["torch==2.0.1"], ["lightning==2.6.6"]], ["torch==2.14.1", "lightning==2.6.6"])


def test_a_prune_waits_for_every_build(tmp_path: Path) -> None:
    """Builds hold the cache lock shared (several at once); the prune takes it exclusive, so it waits until none is building."""
    pruned = threading.Event()

    def prune() -> None:
        with cache_lock(tmp_path, exclusive=True):
            pruned.set()

    with cache_lock(tmp_path, exclusive=False), cache_lock(tmp_path, exclusive=False):
        thread = threading.Thread(target=prune)
        thread.start()
        assert not pruned.wait(0.3), "a prune ran while a build held the cache"
    thread.join(10)
    assert pruned.is_set()


def test_turning_lean_gives_back_the_venvs_that_finished_cells_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept venvs hold hard links into uv's cache: once lean, a finished cell's venv goes; a running or waiting cell's stays."""
    from bugmatrix.releases.tracking import load_resolved_matrix
    from bugmatrix.run.envbuild import cell_venv
    from bugmatrix.run.runner import CellSpec, release

    matrix = load_resolved_matrix(Path(__file__).resolve().parent.parent / "matrix.toml")
    specs = [
        CellSpec(f"py311-torch2.15.0-pl{v}", {"python": "3.11", "torch": "2.15.0", "lightning": v}) for v in ("2.0.3", "2.0.6", "2.6.6")
    ]
    finished, current, waiting = specs
    for spec in specs:
        (cell_venv(tmp_path, spec.id) / "bin").mkdir(parents=True)
    monkeypatch.setenv("BUGMATRIX_DISK", "keep")
    assert release(matrix, current, specs, root=tmp_path, others=[waiting], jobs=2) == []
    assert all(cell_venv(tmp_path, s.id).exists() for s in specs), "kept while the disk has room"
    monkeypatch.setenv("BUGMATRIX_DISK", "lean")
    release(matrix, current, specs, root=tmp_path, others=[waiting], jobs=2)  # the waiting cell pins the same torch: no pruning
    assert not cell_venv(tmp_path, finished.id).exists(), "a finished cell's kept venv is given back"
    assert not cell_venv(tmp_path, current.id).exists(), "the cell that just ended: lean"
    assert cell_venv(tmp_path, waiting.id).exists(), "a cell still waiting keeps its venv"
