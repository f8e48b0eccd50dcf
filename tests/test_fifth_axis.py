"""Adding an axis is an entry in matrix.toml: a numpy axis, planned, built, run and reported for real.

The fixture matrix declares ``[axes.numpy]`` and a case spans it; nothing in
the harness names numpy. The two cells are built with uv (numpy 1.26.4 and
2.2.6, no torch: the plugin runs torch-free cells) and the report shows the
axis with its own prefix and both outcomes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtureproject import run_smoke_night

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "fifth_axis"


def test_a_fifth_axis_declared_only_in_matrix_toml_runs_end_to_end(tmp_path: Path) -> None:
    night = run_smoke_night(FIXTURE, tmp_path)
    assert [c.id for c in night.cells] == ["py311-np1.26.4", "py311-np2.2.6"]
    assert night.report_code == 0
    compat = night.compat()
    assert [a["name"] for a in compat["axes"]] == ["python", "numpy"]
    results = compat["results"]["numpy_float_alias::float_alias[cpu]"]
    assert {cell: r["outcome"] for cell, r in results.items()} == {"py311-np1.26.4": "fixed", "py311-np2.2.6": "reproduced"}
    page = (night.reports / "index.html").read_text(encoding="utf-8")
    assert "np1.26.4" in page and "np2.2.6" in page
