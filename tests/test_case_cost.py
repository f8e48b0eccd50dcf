"""Cost is measured per case, not split by variant count (issue 44): ``plan --cost``, :mod:`bugmatrix.plan.cost`.

* A variant's time is its own duration in the reference's run files; a cell's
  fixed cost (its wall less its variants) is charged once in a profile and
  named shared in each case's line, which counts its cells whole.
* Adding a case beside three that share their cells, and publishing a
  reference in which it ran there, moves none of their lines; until it has
  run, its own line says it is an estimate (and is never ~0 min).

Plans the frozen reference catalogue and matrix (:mod:`tests.reference`) and
run files of a synthetic full night (:mod:`tests.fullscale`), never ``cases/``
or ``reports/``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_BF16, Case
from bugmatrix.cell.outcomes import Signature
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.files import write_json_atomic
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import plan_cells
from bugmatrix.plan.cost import Costs, price, render_cost
from tests.fullscale import full_runs
from tests.reference import reference_catalog, reference_matrix

__all__ = ["cost_lines", "reference_runs"]


def _body(name: str) -> Callable[[str, object], dict[str, bool]]:
    """A variant body named ``name`` (each registers once)."""

    def body(device: str, dtype: object) -> dict[str, bool]:
        return {}

    body.__name__ = name
    return body


def reference_runs(runs: list[RunRecord], folder: Path) -> Path:
    """``runs`` written as a committed reference's run files in ``folder``."""
    for run in runs:
        write_json_atomic(folder / f"{run.cell}.json", run.to_json())
    return folder


def cost_lines(catalog: Catalog, reference: Path, tmp_path: Path, profile: str = "full") -> dict[str, str]:
    matrix = reference_matrix()
    total, cases = price(plan_cells(matrix, profile, catalog), catalog.slices(matrix), Costs(tmp_path / "no-locks", reference))
    return {line.split()[0]: line for line in render_cost({profile: (total, cases)})[1:-1]}


def _with_newcomer(run: RunRecord, case: Case, seconds: float) -> RunRecord:
    """``run`` as it would be had the newcomer's variants run in it too, each taking ``seconds`` of the cell's wall."""
    ids = [v.id for v in case.variants]
    records = [
        VariantRecord(
            id=v.id, case=v.case_id, variant=v.name, device=v.device, kind=v.kind, workaround_for=v.workaround_for,
            counterpart=None, outcome=run.results[0].outcome, expected=None, verdict=run.results[0].verdict,
            signature_matched=False, message="", duration_s=seconds, axes=tuple(v.axes),
        )
        for v in case.variants
    ]  # fmt: skip
    finished = dt.datetime.fromisoformat(run.finished) + dt.timedelta(seconds=seconds * len(ids))
    return dataclasses.replace(run, results=[*run.results, *records], selected=[*run.selected, *ids], finished=finished.isoformat())


def test_adding_and_publishing_a_case_moves_no_other_case_s_cost(tmp_path: Path) -> None:
    """A torch x Lightning case in the cells the three torch cases share: their lines stay, before and after its runs are published."""
    extra = Case(id="newcomer", title="t", signature=Signature("x"), axes=("torch", "lightning"))
    extra.variant(devices=(CPU_BF16,))(_body("core"))
    extra.variant(devices=(CPU_BF16,), workaround_for="core")(_body("pinned"))
    before, after = reference_catalog(), Catalog((*reference_catalog().cases, extra))
    published = reference_catalog().cases
    reference = reference_runs([r for r in full_runs() if r.results], tmp_path / "before")
    torch_cells = {c.id for c in plan_cells(reference_matrix(), "full", after) if {v.id for v in extra.variants} & set(c.variants)}
    runs = [_with_newcomer(r, extra, 30.0) if r.cell in torch_cells else r for r in full_runs() if r.results]
    republished = reference_runs(runs, tmp_path / "after")
    lines = cost_lines(before, reference, tmp_path)
    added = cost_lines(after, reference, tmp_path)
    again = cost_lines(after, republished, tmp_path)
    for case in published:
        assert added[case.id] == lines[case.id], f"adding a case moved {case.id}'s line"
        assert again[case.id] == lines[case.id], f"publishing its runs moved {case.id}'s line"
    assert "an estimate: none of its variants has run yet" in added["newcomer"], added["newcomer"]
    assert "an estimate" not in again["newcomer"], "once it ran, its variants' own durations price it"
    assert "~  0.0 min" not in added["newcomer"], "a new case is never free"


def test_a_shared_cell_s_fixed_cost_is_charged_once(tmp_path: Path) -> None:
    """The profile's fixed cost is each cell's once; a case's line counts its cells whole and names the shared part."""
    matrix, catalog = reference_matrix(), reference_catalog()
    cells = plan_cells(matrix, "full", catalog)
    costs = Costs(tmp_path / "no-locks", reference_runs([r for r in full_runs() if r.results], tmp_path / "runs"))
    total, cases = price(cells, catalog.slices(matrix), costs)
    assert total.fixed == pytest.approx(sum(costs.cell(c.id, c.device).fixed for c in cells))
    autocast = cases["autocast_cache"]
    assert autocast.shared == autocast.cells and autocast.shared_fixed == pytest.approx(autocast.price.fixed)
    assert sum(c.price.fixed for c in cases.values()) > total.fixed, "shared cells are whole in each case's line, once in the total"
    measured = json.loads((tmp_path / "runs" / f"{cells[0].id}.json").read_text(encoding="utf-8"))
    wall = 60.0 - sum(r["duration_s"] for r in measured["results"])
    assert costs.cell(cells[0].id, "cpu").fixed == pytest.approx(wall), "a cell's fixed cost is its wall less its variants' own"
