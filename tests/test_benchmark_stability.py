"""Pure parts of the benchmark and stability sessions: ratios, tables, outcome comparison, disk accounting.

No timing is asserted anywhere: these run on loaded 2-core machines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cell.cellspec import read_options
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.files import write_json_atomic
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.command import CellSpec, pytest_command, spec_path, write_spec
from bugmatrix.run.envbuild import cell_venv
from bugmatrix.tools.benchmark.cells import (
    cached_wheel_sets,
    compare_outcomes,
    disk_kib,
    heavy_wheels,
    smoke_floor,
    smoke_from_runs,
    stack_imports,
)
from bugmatrix.tools.benchmark.table import Measurement, format_table, skipped
from bugmatrix.tools.stability import ABSENT, outcomes_by_variant, stability_table, unstable

ROOT = Path(__file__).resolve().parent.parent


def record(variant: str, outcome: str, duration: float = 0.5) -> VariantRecord:
    return VariantRecord(
        id=f"case::{variant}[cpu]", case="case", variant=variant, device="cpu", kind="core", workaround_for=None,
        outcome=outcome, expected=None, verdict="new", signature_matched=False, message="", duration_s=duration,
    )  # fmt: skip


def run_file(path: Path, *results: VariantRecord, started: str = "2026-01-01T00:00:00+00:00") -> RunRecord:
    """Write a run file as the plugin would and read it back through the real loader."""
    run = RunRecord(cell="c", pins={}, environment={}, started=started, finished="2026-01-01T00:00:10+00:00", results=list(results))
    write_json_atomic(path, run.to_json())
    return load_run_file(path)


def test_speedup_and_overhead_ratios() -> None:
    speedup = Measurement("build", value=5.0, baseline=80.0, unit="s", op=">=", bound=10, speedup=True)
    assert speedup.ratio == 16.0 and speedup.met and speedup.target == ">= 10x"
    overhead = Measurement("reuse", value=12.0, baseline=10.0, unit="s", op="<=", bound=1.5)
    assert overhead.ratio == pytest.approx(1.2) and overhead.met
    assert not Measurement("reuse", 20.0, 10.0, "s", "<=", 1.5).met
    assert not Measurement("report", 1.0, 1.0, "s", "<", 1).met  # a strict bound is strict


def test_rows_without_a_baseline_or_target_have_no_verdict() -> None:
    assert skipped("pip cold", "--quick").ratio is None and skipped("pip cold", "--quick").met is None
    assert Measurement("uv cold", 24.0, None, "s").met is None
    assert Measurement("disk", 10.0, 40.0, "MiB").ratio == 0.25 and Measurement("disk", 10.0, 40.0, "MiB").met is None


def test_table_is_aligned_and_says_why_a_row_is_missing() -> None:
    rows = [
        Measurement("a long measurement name", 1, 20, "s", ">=", 10, speedup=True),
        Measurement("b", 3, 1, "s", "<=", 1.5, note="floor: import"),
        skipped("c", "pip cold skipped (--quick)"),
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["measurement", "value", "baseline", "ratio", "target", "met?", "note"]
    assert set(lines[1]) == {"-"}
    ratio_end = lines[0].index("ratio") + len("ratio")  # right-aligned: every ratio ends under the header's
    assert [line[ratio_end - 1 : ratio_end + 1] for line in lines[2:]] == ["x ", "x ", "- "]
    assert "20.00x" in lines[2] and lines[2].endswith(" yes")
    assert "3.00x" in lines[3] and " NO " in lines[3] and lines[3].endswith("floor: import")
    assert lines[4].startswith("c ") and lines[4].endswith("pip cold skipped (--quick)") and " - " in lines[4]


def test_hard_links_are_counted_once(tmp_path: Path) -> None:
    one, two, other = tmp_path / "env1", tmp_path / "env2", tmp_path / "env3"
    for env in (one, two, other):
        env.mkdir()
    (one / "libtorch.so").write_bytes(os.urandom(512 * 1024))
    os.link(one / "libtorch.so", two / "libtorch.so")  # what uv does from its cache
    (other / "libtorch.so").write_bytes(os.urandom(512 * 1024))  # what a copy costs
    assert disk_kib([one, two]) < 1.2 * disk_kib([one])
    assert disk_kib([one, other]) > 1.8 * disk_kib([one])


def test_outcome_variation_is_found_from_run_files(tmp_path: Path) -> None:
    runs = [
        run_file(tmp_path / "run-0.json", record("steady", "fixed"), record("flaky", "reproduced"), record("vanishes", "fixed")),
        run_file(tmp_path / "run-1.json", record("steady", "fixed"), record("flaky", "timeout")),
        run_file(tmp_path / "run-2.json", record("steady", "fixed"), record("flaky", "reproduced"), record("vanishes", "fixed")),
    ]
    seen = outcomes_by_variant(runs)
    assert seen["case::steady[cpu]"] == ["fixed"] * 3
    assert seen["case::vanishes[cpu]"] == ["fixed", ABSENT, "fixed"]
    assert set(unstable(seen)) == {"case::flaky[cpu]", "case::vanishes[cpu]"}
    table = stability_table(seen).splitlines()
    flaky = next(line for line in table if line.startswith("case::flaky"))
    assert "reproduced x2, timeout x1" in flaky and flaky.rstrip().endswith("NO")
    assert next(line for line in table if line.startswith("case::steady")).rstrip().endswith("yes")


def test_identical_runs_are_stable(tmp_path: Path) -> None:
    runs = [run_file(tmp_path / f"run-{i}.json", record("a", "reproduced"), record("b", "skipped")) for i in range(3)]
    assert unstable(outcomes_by_variant(runs)) == {}


def test_cell_venv_is_the_one_nox_creates() -> None:
    assert cell_venv(ROOT, "py311-torch2.5.1-pl2.0.3") == ROOT / ".nox" / "cell-py311-torch2-5-1-pl2-0-3"
    assert cell_venv(ROOT, "py311-torch2.15.0-pl2.6.6-tf4.30.2-cuda").name == "cell-py311-torch2-15-0-pl2-6-6-tf4-30-2-cuda"


def test_pytest_command_runs_only_the_cells_axes(tmp_path: Path) -> None:
    matrix = load_resolved_matrix(ROOT / "matrix.toml")
    pins = {"torch": "2.5.1", "python": "3.11", "lightning": "2.0.3"}
    run_file = tmp_path / "runs" / "c.json"
    spec = CellSpec("c", pins)
    command = pytest_command("python", spec, write_spec(matrix, spec, run_file), extra=["-k", "encoder"])
    # Paths in the command and the spec are relative to the repository when inside it (a CI checkout's tmp is): join to ROOT.
    spec_file = ROOT / command[command.index("--bugmatrix-spec") + 1]
    assert spec_file == spec_path(run_file) == tmp_path / "spec" / "c.json", "beside runs/, never in it (the report reads runs/*.json)"
    spec = read_options(spec_file)
    assert spec.axes == ("torch", "lightning") and ROOT / str(spec.run_file) == run_file and spec.cell == "c"
    assert list(spec.pins.items()) == [("python", "3.11"), ("torch", "2.5.1"), ("lightning", "2.0.3")], (
        "display order, whatever order pins came in"
    )
    assert spec.axis_spec is not None
    assert spec.axis_spec["axes"] == {"torch": [["torch", "torch"]], "lightning": [["pytorch-lightning", "pytorch_lightning"]]}, (
        "the pinned distribution only"
    )
    assert spec.axis_spec["device_runtime"] == matrix.device_runtime, "the axis the cell asks about CUDA comes from the matrix"
    assert "-n" in command and command[-2:] == ["-k", "encoder"]
    write_spec(matrix, CellSpec("system", None), tmp_path / "run.json")
    assert read_options(tmp_path / "run.spec.json").axes is None, "the system cell runs every variant"


def test_floor_is_import_plus_the_variants_own_time(tmp_path: Path) -> None:
    run = run_file(tmp_path / "run.json", record("a", "fixed", 1.25), record("b", "fixed", 0.75))
    assert smoke_floor(run, imports=3.0) == pytest.approx(5.0)


def test_smoke_without_run_files_says_which_cells_are_missing(tmp_path: Path) -> None:
    matrix = load_resolved_matrix(ROOT / "matrix.toml")
    cells = [Cell("py311-torch2.5.1-pl2.0.3", {"python": "3.11", "torch": "2.5.1", "lightning": "2.0.3"})]
    row = smoke_from_runs(tmp_path, matrix, load_catalog(ROOT / "cases", matrix), cells, tmp_path / "runs", None, "from the last run")
    assert row.value is None and "py311-torch2.5.1-pl2.0.3" in row.note and "--smoke" in row.note


def test_the_floor_imports_what_the_cell_process_imports_once() -> None:
    """The axis modules, plus the lazy imports of the cases the cell runs (the T5 classes only where transformers is pinned)."""
    matrix = load_resolved_matrix(ROOT / "matrix.toml")
    catalog = load_catalog(ROOT / "cases", matrix)
    t5 = tuple(v.id for v in catalog.variants if "transformers" in v.axes)
    with_t5 = Cell("c", {"python": "3.11", "torch": "2.15.0", "lightning": "2.6.6", "transformers": "4.30.2"}, variants=t5)
    modules, declared = stack_imports(matrix, catalog, with_t5)
    assert modules == matrix.import_modules(with_t5.pins) and "transformers.T5ForConditionalGeneration" in declared
    others = tuple(v.id for v in catalog.variants if "transformers" not in {a for c in catalog.cases if c.id == v.case_id for a in c.spans})
    assert stack_imports(matrix, catalog, Cell("t", {"python": "3.11", "torch": "2.5.1"}, variants=others))[1] == ["torch._dynamo"], (
        "each name once"
    )


def test_runners_are_compared_on_every_variant_either_recorded(tmp_path: Path) -> None:
    old = run_file(tmp_path / "old.json", record("a", "fixed", 1.0), record("b", "reproduced", 1.0))
    new = run_file(tmp_path / "new.json", record("a", "fixed", 1.0), record("c", "fixed", 1.0))
    assert compare_outcomes(old, new) == {
        "case::a[cpu]": "",
        "case::b[cpu]": "case::b[cpu]: reproduced -> None",
        "case::c[cpu]": "case::c[cpu]: None -> fixed",
    }


@pytest.mark.parametrize("command", ["stability", "benchmark"])
def test_unknown_cell_is_one_line_and_exit_2(command: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", command, "--cell", "nope"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "unknown cell 'nope'" in run.stderr
    assert run.stdout == ""


def test_stability_needs_two_runs() -> None:
    from bugmatrix.cli import main

    assert main(["stability", "--repeat", "1", "--system"]) == 2


def test_a_run_that_records_nothing_is_a_one_line_error(tmp_path: Path) -> None:
    from bugmatrix.errors import BugmatrixError
    from bugmatrix.tools.stability import run_repeatedly

    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'collected 0 items'\necho 'ERROR: cases/x.py: No module named torch' >&2\nexit 4\n")
    python.chmod(0o755)
    with pytest.raises(BugmatrixError, match=r"run 1 recorded nothing \(pytest exit 4: ERROR: cases/x.py: No module named torch\)"):
        run_repeatedly(tmp_path, load_resolved_matrix(ROOT / "matrix.toml"), None, 2, [], python=python)


def test_synthetic_report_input_is_full_profile_sized_and_renders() -> None:
    from bugmatrix.tools.benchmark.reports import measure_report, synthetic_runs

    runs = synthetic_runs()
    assert len({run.cell for run in runs}) == 1000 and {len(run.results) for run in runs} == {20}
    assert measure_report().value is not None  # merge_runs + render_html accept it (the time itself is not asserted)


def test_the_report_with_history_measures_a_whole_night() -> None:
    from bugmatrix.tools.benchmark.reports import measure_report_with_history

    row = measure_report_with_history(nights=3)
    assert row.value is not None and "3 nights of history" in row.name


def fake_env(root: Path, name: str, torch: str, library: Path | None = None) -> Path:
    """A cell venv as du sees it: an interpreter, torch's dist-info and a big library (linked when given)."""
    env = root / ".nox" / name
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    site = env / "lib" / "python3.11" / "site-packages"
    (site / f"torch-{torch}.dist-info").mkdir(parents=True)
    if library is None:
        (site / "libtorch.so").write_bytes(os.urandom(1024 * 1024))
    else:
        os.link(library, site / "libtorch.so")
    return site / "libtorch.so"


def test_disk_rows_group_envs_by_torch(tmp_path: Path) -> None:
    from bugmatrix.tools.benchmark.cells import measure_disk

    shared = fake_env(tmp_path, "cell-py311-torch2-5-1-pl2-0-3", "2.5.1")
    fake_env(tmp_path, "cell-py311-torch2-5-1-pl2-6-6", "2.5.1", library=shared)
    fake_env(tmp_path, "cell-py311-torch2-6-0-pl2-6-6", "2.6.0")
    everything, same_torch, per_torch = measure_disk(tmp_path)
    assert everything.name.startswith("disk: all 3 cell envs") and everything.ratio == pytest.approx(2, rel=0.1)
    assert "2 cell envs on torch 2.5.1" in same_torch.name and same_torch.ratio == pytest.approx(1, rel=0.1) and same_torch.met
    assert per_torch.ratio == pytest.approx(1, rel=0.1) and per_torch.met


def test_disk_needs_two_envs(tmp_path: Path) -> None:
    from bugmatrix.tools.benchmark.cells import measure_disk

    fake_env(tmp_path, "cell-py311-torch2-5-1-pl2-0-3", "2.5.1")
    (row,) = measure_disk(tmp_path)
    assert row.value is None and "1 cell env(s)" in row.note


def test_disk_peak_keeps_the_highest_sample_not_the_last(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A full-profile run frees its torch stacks as it goes: the row must report the most it held at once.

    The samples are taken at points the test chooses (the sampling thread's interval is an hour, so it takes none):
    at the start, four during the run, one at the end.
    """
    from collections import namedtuple

    from bugmatrix.tools.benchmark import cells as benchmark

    usage = namedtuple("usage", "total used free")
    samples = iter([10, 14, 19, 12, 11, 11])
    monkeypatch.setattr(benchmark.shutil, "disk_usage", lambda _: usage(100 * 2**30, next(samples) * 2**30, 0))
    with benchmark.DiskPeak(tmp_path, every=3600) as disk:
        for _ in range(4):
            disk.sample()
    assert disk.start == 10 * 2**30 and round(disk.added_gib) == 9
    assert next(samples, None) is None, "one sample at the start, four chosen, one at the end: none by the thread"


def test_warm_says_how_many_of_the_profiles_heavy_wheels_the_cache_held(tmp_path: Path) -> None:
    """The "warm" full-profile row is only as warm as the cache: an unpacked wheel counts, its metadata alone does not."""
    torch = tmp_path / "wheels-v8" / "pypi" / "torch"
    torch.mkdir(parents=True)
    (torch / "2.5.1-cp311-cp311-manylinux1_x86_64").mkdir()
    (torch / "2.9.1-cp311-cp311-manylinux_2_28_x86_64.msgpack").write_text("")  # metadata, no wheel
    (torch / "2.5.1-cp312-cp312-manylinux1_x86_64").mkdir()  # another Python's wheel
    matrix = load_resolved_matrix(ROOT / "matrix.toml")
    cells = [
        Cell("a", {"python": "3.11", "torch": "2.5.1"}, ("full",)),
        Cell("b", {"python": "3.11", "torch": "2.5.1", "lightning": "2.0.3"}, ("full",)),
        Cell("c", {"python": "3.11", "torch": "2.9.1"}, ("full",)),
        Cell("d", {"python": "3.10", "torch": "2.5.1"}, ("full",)),
    ]
    wanted = heavy_wheels(matrix, cells)
    assert wanted == {("torch", "2.5.1", "cp311"), ("torch", "2.9.1", "cp311"), ("torch", "2.5.1", "cp310")}
    assert cached_wheel_sets(tmp_path, wanted) == (1, 3)
