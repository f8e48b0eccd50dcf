"""The full profile's floor (bugmatrix/tools/benchmark/cells.py): sum over cells of build + import + compute, over the jobs."""

from __future__ import annotations

import pytest

from bugmatrix.tools.benchmark.cells import FLOOR_BOUND, CellFloor, floor_rows, profile_floor

FLOORS = [CellFloor("a", build_s=3.0, import_s=5.0, compute_s=4.0), CellFloor("b", build_s=2.0, import_s=6.0, compute_s=10.0)]


def test_the_floor_is_the_cells_summed_and_shared_by_the_jobs() -> None:
    assert FLOORS[0].total == 12.0
    assert profile_floor(FLOORS, 1) == 30.0
    assert profile_floor(FLOORS, 2) == 15.0
    assert profile_floor([], 2) == 0.0


def test_no_jobs_is_no_floor() -> None:
    with pytest.raises(ValueError, match="jobs=0"):
        profile_floor(FLOORS, 0)


def test_the_rows_give_the_floor_and_the_wall_against_it_in_minutes() -> None:
    floor, against = floor_rows("full profile, warm", 45.0, FLOORS, 2)
    assert floor.name == "full profile, warm: floor (2 cells)" and floor.value == pytest.approx(0.25) and floor.unit == "min"
    assert floor.note == "build 0.1 + import 0.2 + compute 0.2 min, / 2 at once"
    assert (against.value, against.baseline) == (pytest.approx(0.75), pytest.approx(0.25))
    assert against.ratio == pytest.approx(3.0) and against.target == f"<= {FLOOR_BOUND:g}x" and against.met is False
    _, unmeasured = floor_rows("full", None, FLOORS, 2)
    assert unmeasured.ratio is None and unmeasured.met is None
