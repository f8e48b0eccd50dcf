"""The report at full scale: 1,000 cells x 20 variants, merged and rendered, with and without 90 nights of history."""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path

from msgspec.structs import replace

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.report.history import append_night, load_history, night_from_compat, write_history
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown
from bugmatrix.tools.benchmark.table import Measurement

__all__ = ["measure_report", "measure_report_with_history", "synthetic_runs"]


SYNTHETIC_OUTCOMES = ("reproduced", "fixed", "fixed", "different", "skipped", "crashed", "timeout")


def _synthetic_record(cell: int, variant: int) -> VariantRecord:
    outcome = SYNTHETIC_OUTCOMES[(cell + variant) % len(SYNTHETIC_OUTCOMES)]
    kind = ("core", "framework", "workaround", "core")[variant % 4]
    return VariantRecord(
        id=f"case{variant // 4}::v{variant}[cpu]",
        case=f"case{variant // 4}",
        variant=f"v{variant}",
        device="cpu",
        kind=Kind(kind),
        workaround_for=f"v{variant - 2}" if kind == "workaround" else None,
        outcome=Outcome(outcome),
        expected=Outcome.REPRODUCED,
        verdict=Verdict("as-expected" if outcome == "reproduced" else "unexpected-fix" if outcome == "fixed" else "new-failure-mode"),
        signature_matched=outcome == "reproduced",
        message=f"RuntimeError: <mat1> & mat2 must have the same dtype ({cell})",
        duration_s=0.1,
        evidence="https://github.com/pytorch/pytorch/issues/1",
        log="" if outcome == "fixed" else "Traceback ...\n" * 40,
    )


def synthetic_runs(cells: int = 1000, variants: int = 20) -> list[RunRecord]:
    """A full-profile-sized set of run files: every outcome and verdict, log tails on failures."""
    return [
        RunRecord(
            cell=f"py311-torch2.{i % 16}.0-pl2.{i // 16 % 10}.0-tf4.{i // 160}.0",
            pins={"python": "3.11", "torch": f"2.{i % 16}.0"},
            environment={"python": "3.11.7", "torch": f"2.{i % 16}.0", "platform": "linux"},
            started="2026-01-01T00:00:00+00:00",
            finished="2026-01-01T00:00:09+00:00",
            results=[_synthetic_record(i, j) for j in range(variants)],
        )
        for i in range(cells)
    ]


def measure_report() -> Measurement:
    """merge_runs + render_html for 1,000 cells x 20 variants, against the 1 s budget."""
    runs = synthetic_runs()
    start = time.perf_counter()
    render_html(analyse(merge_runs(runs, profile="full", commit="benchmark", generated="2026-01-01T00:00:00+00:00")))
    return Measurement("report: merge + render 1,000 cells x 20 variants vs 1 s", time.perf_counter() - start, 1.0, "s", "<", 1)


def measure_report_with_history(nights: int = 90) -> Measurement:
    """What ``report`` does each night at scale: merge, read and extend the history (written beforehand, untimed), render."""
    name = f"report: 1,000 cells x 20 variants with {nights} nights of history (merge, releases, history, pictures, html, md) vs 1 s"
    runs = synthetic_runs()
    first = dt.date(2026, 1, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        night = night_from_compat(merge_runs(runs, profile="full", commit="past", generated="2026-01-01T00:00:00+00:00"), "")
        past = [replace(night, date=(first + dt.timedelta(days=i)).isoformat()) for i in range(nights - 1)]
        write_history(path, past)
        start = time.perf_counter()
        compat = merge_runs(runs, profile="full", commit="benchmark", generated="2026-04-01T00:00:00+00:00")
        kept = append_night(load_history(path), night_from_compat(compat, (first + dt.timedelta(days=nights - 1)).isoformat()))
        report = analyse(compat, None, kept)  # releases, moved, agreement, pictures, history: once, for every view
        render_html(report)
        render_markdown(report)
        write_history(path, kept)
        return Measurement(name, time.perf_counter() - start, 1.0, "s", "<", 1)
