"""The committed GPU runs and the CUDA expectations declared from them agree.

Before the first GPU run every CUDA variant read ``as-expected`` through
expectations whose evidence was CPU-only. Now a CUDA expectation names the
committed run files that observed it and covers their releases and nothing
between (a policy ``nox -s check`` enforces: tests/test_check.py); here, each
result of those runs is what its expectation declares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bugmatrix.cell.runfile import load_run_file
from bugmatrix.plan.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent
CATALOG = load_catalog(ROOT / "cases")
GPU_RUNS = [
    run
    for path in sorted((ROOT / "reports" / "runs").glob("*.json"))
    if json.loads(path.read_text(encoding="utf-8"))["environment"].get("cuda_available") is True
    for run in [load_run_file(path)]
]


def test_the_reference_holds_the_gpu_runs() -> None:
    """At least 27 CUDA variants ran on a GPU (not "needs a CUDA GPU"), and each run file names the GPU."""
    ran = {r.id for run in GPU_RUNS for r in run.results if r.device == "cuda" and r.outcome != "skipped"}
    assert len(ran) >= 27, sorted(ran)
    assert all(run.environment.get("gpu") and run.environment.get("cuda") for run in GPU_RUNS)


@pytest.mark.parametrize("run", GPU_RUNS, ids=[run.cell for run in GPU_RUNS])
def test_each_gpu_result_is_what_its_cuda_expectation_declares(run: object) -> None:
    """Every CUDA result that ran is what the cases now expect at its releases, or, taken under an old check, expects nothing."""
    versions = {axis: str(run.environment[axis]) for axis in ("torch", "lightning", "transformers") if run.environment.get(axis)}
    by_id = {v.id: v for v in CATALOG.variants}
    for record in (r for r in run.results if r.device == "cuda" and r.outcome != "skipped" and r.id in by_id):
        variant = by_id[record.id]
        expectation = variant.expectation(versions)
        if any(check in record.message for check in variant.old_checks):
            assert expectation is None, f"{record.id}: taken under an old check, it must not become an expectation"
            continue
        assert expectation is not None and expectation.outcome == record.outcome, f"{record.id} at {versions}: {record.outcome}"
        assert run.cell in expectation.evidence, f"{record.id}: its evidence names the run file reports/runs/{run.cell}.json"
