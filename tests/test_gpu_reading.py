"""The GPU runs beside the CPU reference: each variant is read only where it ran (issue 43).

Before, with the H200's run files beside the committed CPU runs, the terminal said
"autocast_cache::core[cuda] … mixed at torch 2.11.0: its cells there differ only in pins
it does not declare (py, pl, tf)" and "tf 4.57.6 – → 5.17.0 ✗" for T5: a ``skipped``
("needs a CUDA GPU") in a CPU cell was read as an outcome beside the GPU's. These tests
merge the committed run files as the report does and read every line it prints.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.documents.run import read_run_dir
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.report.agreement import agreement, per_case
from bugmatrix.report.boundaries import pictures
from bugmatrix.report.marks import Picture, boundary_text
from bugmatrix.report.merge import merge_runs, version_order
from bugmatrix.report.model import Compat
from tests.test_boundaries import strip_compat
from tests.test_faults import NEEDS_TORCH, run_cases

ROOT = Path(__file__).resolve().parent.parent
PL = "pl 2.0.3, 2.0.6, 2.0.7, 2.6.6"


@cache
def _reference() -> tuple[Compat, dict[str, Picture]]:
    runs, unreadable = read_run_dir(ROOT / "reports" / "runs")
    assert not unreadable
    cases = {v.id: v for v in load_catalog(ROOT / "cases").variants}
    compat = merge_runs(sorted(runs, key=version_order), profile="full", commit="c", generated="g", cases=cases)
    drawn, _ = pictures(compat)
    return compat, {p.variant.id: p for p in drawn}


def test_no_cuda_line_reads_a_skipped_cell() -> None:
    """Every CUDA variant is drawn from the GPU's cells only: no skip, no "mixed", no flip against a CPU cell's "needs a CUDA GPU"."""
    compat, drawn = _reference()
    cuda = {vid: p for vid, p in drawn.items() if p.variant.device == "cuda"}
    assert len(cuda) >= 10, sorted(cuda)
    for vid, picture in cuda.items():
        text = boundary_text(picture)
        assert text.startswith("CUDA: ") and "NVIDIA H200" in text, (vid, text)
        assert "–" not in text and "mixed" not in text and "cannot be read" not in text, (vid, text)
        read = {c for m in picture.tracks[0].marks.values() if m.single is not Outcome.SKIPPED for c in m.cells}
        assert all(compat.cell_by_id[c].observed("gpu") for c in read), f"{vid} is read in cells without a GPU"


def test_each_cuda_line_says_what_was_observed_and_where() -> None:
    _, drawn = _reference()
    line = {vid: boundary_text(p) for vid, p in drawn.items()}
    assert line["autocast_cache::core[cuda]"] == f"CUDA: ✓ fixed at torch 2.11.0 (NVIDIA H200; {PL} · tf 5.17.0)"
    assert line["autocast_cache::lightning_manual_optimization[cuda]"] == f"CUDA: ✓ fixed at {PL} (NVIDIA H200; torch 2.11.0 · tf 5.17.0)"
    assert line["t5_loss_no_grad_fn::lightning_trainer[cuda]"] == "CUDA: pl 2.0.6 ✗ → 2.0.7 ✓ (NVIDIA H200; torch 2.11.0 · tf 5.17.0)"
    assert line["t5_loss_no_grad_fn::adafactor_closure[cuda]"] == f"CUDA: ✗ reproduced at tf 5.17.0 (NVIDIA H200; torch 2.11.0 · {PL})"
    assert line["encoder_bf16_eval::padding_mask[cuda]"] == (
        f"CUDA: ≠ different at torch 2.11.0, under an old check (NVIDIA H200; {PL} · tf 5.17.0)"
    ), "its recorded different stays, marked as taken under the check the case no longer makes"


def test_cpu_lines_read_no_skip_as_an_outcome() -> None:
    """The CPU scaler is absent before torch 2.3: the skips there are no boundary ("torch 2.2.2 – → 2.3.1 ✗" before)."""
    _, drawn = _reference()
    assert boundary_text(drawn["double_unscale::unscale_twice[cpu]"]) == "✗ reproduced everywhere"
    assert boundary_text(drawn["autocast_cache::core[cpu]"]) == "torch 2.10.0 ✗ → 2.11.0 ✓"
    assert all("–" not in boundary_text(p) for p in drawn.values())


def test_results_recorded_new_are_read_against_the_expectations_declared_from_them() -> None:
    """encoder_bf16_eval's CUDA results were "new" when the GPU ran them; its CUDA expectations now come from those runs."""
    compat, _ = _reference()
    core = compat.entries("encoder_bf16_eval::core[cuda]")
    assert {e.verdict for c, e in core.items() if compat.cell_by_id[c].observed("gpu")} == {Verdict.AS_EXPECTED}
    padding = compat.entries("encoder_bf16_eval::padding_mask[cuda]")
    assert {e.verdict for c, e in padding.items() if compat.cell_by_id[c].observed("gpu")} == {Verdict.NEW}, "no CUDA expectation"


def test_a_snippet_refused_before_the_bugs_path_is_not_a_disagreement() -> None:
    compat, _ = _reference()
    (row,) = [r for r in agreement(compat) if r.upstream == "encoder_bf16_eval::upstream_issue107663[cuda]"]
    assert (row.total, row.differ, len(row.apart)) == (0, (), 4)
    (line,) = [a for a in per_case(compat)["encoder_bf16_eval"][0] if a.upstream == "upstream_issue107663[cuda]"]
    assert line.agrees and line.mark == "–" and line.text.startswith("not compared in 4 cell(s)"), line


def test_a_skip_outside_where_it_ran_is_no_position_and_one_inside_is_a_gap() -> None:
    """A CUDA variant skipped in CPU cells is drawn at its GPU's release only; a skip between two releases it ran is a gap."""
    compat = strip_compat({"2.0.0": "skipped", "2.11.0": "fixed", "2.15.0": "skipped"})
    declared = msgspec.structs.replace(compat, variants=tuple(msgspec.structs.replace(v, axes=("torch",)) for v in compat.variants))
    (outside,), _ = pictures(declared)
    assert outside.values == (("2.11.0",),)
    (inside,), _ = pictures(strip_compat({"2.0.0": "reproduced", "2.1.0": "skipped", "2.2.0": "fixed"}))
    (flip,) = inside.tracks[0].flips
    assert inside.values == (("2.0.0", "2.1.0", "2.2.0"),) and not flip.adjacent, "the boundary lies somewhere in the gap"


@NEEDS_TORCH
def test_a_pytest_run_ends_with_each_result_no_expectation_covers(tmp_path: Path) -> None:
    """ "55 passed" hid two CUDA `different`s on the H200: now each result no expectation covers is a line, and the run passes."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "uncovered.py").write_text(
        "from bugmatrix import CPU_BF16, Case, Expect, Signature\n"
        'case = Case(id="uncovered", title="uncovered", signature=Signature(r"planted"))\n'
        "@case.variant(devices=(CPU_BF16,))\n"
        "def checks_fail(device, dtype):\n"
        '    return {"output matches": False}\n'
        "@case.variant(devices=(CPU_BF16,))\n"
        "def holds(device, dtype):\n"
        '    return {"ok": True}\n'
        '@case.variant(devices=(CPU_BF16,), expect=(Expect("fixed"),))\n'
        "def covered(device, dtype):\n"
        '    return {"ok": True}\n',
        encoding="utf-8",
    )
    proc = run_cases(tmp_path, "-p", "no:xdist")
    assert proc.returncode == 0, "a result no expectation covers does not fail the run (docs/report.md)"
    summary = proc.stdout[proc.stdout.index("bugmatrix: 2 CPU result(s) no expectation covers") :]
    assert "uncovered::checks_fail[cpu] different (check failed: output matches)" in summary
    assert "uncovered::holds[cpu] fixed" in summary and "covered[cpu]" not in summary.replace("uncovered::", ""), summary


def test_no_line_of_the_committed_report_reads_a_cuda_variant_against_skipped_cells() -> None:
    """The README table's CUDA rows and compat.md's CUDA boundary lines: no skip as an outcome, no "mixed", the GPU named."""
    rows = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `") and "[cuda]`" in line]
    bullets = [  # compat.md's boundary bullets ("- `core[cuda]`: …", "- `w[cuda]` *(workaround)*: …"), not its agreement lines
        line
        for line in (ROOT / "reports" / "compat.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("- `") and "[cuda]`" in line and "` vs `" not in line
    ]
    assert len(rows) >= 10 and len(bullets) >= 27, (len(rows), len(bullets))
    for line in rows + bullets:
        reading = line.split("|")[4] if line.startswith("|") else line.partition(": ")[2]
        assert "–" not in reading and "mixed" not in reading and "NVIDIA H200" in reading, line
