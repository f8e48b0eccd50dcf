"""Report: merge, baseline diff, Markdown/HTML escaping, the step summary (no torch)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.report.diff import diff_against_baseline, summary_lines
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.model import Compat, load_compat
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import escape_md, render_markdown, render_step_summary

HOSTILE = '<script>document.title="pwned"</script> | `x`'


def record(
    variant: str, outcome: str, *, kind: str = "core", workaround_for: str | None = None, message: str = "", verdict: str = "as-expected"
) -> VariantRecord:
    return VariantRecord(
        id=f"demo::{variant}[cpu]", case="demo", variant=variant, device="cpu", kind=kind, workaround_for=workaround_for,
        outcome=outcome, expected=outcome, verdict=verdict, signature_matched=outcome == "reproduced",
        message=message or outcome, duration_s=0.5, log="Traceback ...\n" + message,
    )  # fmt: skip


def run(cell: str, torch: str, *results: VariantRecord, install: dict[str, str] | None = None) -> RunRecord:
    return RunRecord(
        cell=cell, pins={"python": "3.11", "torch": torch}, environment={"python": "3.11.7", "torch": f"{torch}+cu128", "cuda": "12.8", "gpu": None},
        started="2026-11-01T00:00:00+00:00", finished="2026-11-01T00:00:12+00:00",
        install=install or {"status": "ok", "reason": ""}, results=list(results),
    )  # fmt: skip


def fixture_runs() -> list[RunRecord]:
    return [
        run(
            "py311-torch2.5.1",
            "2.5.1",
            record("core", "reproduced", message=HOSTILE),
            record("fresh", "fixed", kind="workaround", workaround_for="core"),
        ),
        run("py311-torch2.11.0", "2.11.0", record("core", "fixed"), record("fresh", "fixed", kind="workaround", workaround_for="core")),
        run(
            "py311-torch2.12.0",
            "2.12.0",
            record("core", "crashed", message="worker 'gw0' crashed while running"),
            record("fresh", "fixed", kind="workaround", workaround_for="core"),
        ),
        run("py311-torch9.0.0", "9.0.0", install={"status": "failed", "reason": "No solution found: torch==9.0.0 <b>"}),
    ]


def compat() -> Compat:
    return merge_runs(fixture_runs(), profile="smoke", commit="abc1234", generated="2026-11-01T00:00:00+00:00")


def test_merge_keeps_observed_environment_and_workarounds() -> None:
    data = compat()
    assert [c.id for c in data.cells][:2] == ["py311-torch2.5.1", "py311-torch2.11.0"]
    assert data.cells[0].environment["torch"] == "2.5.1+cu128"
    core = data.results["demo::core[cpu]"]
    assert core["py311-torch2.5.1"].workarounds == ("fresh",)
    assert core["py311-torch2.11.0"].workarounds == ()
    assert core["py311-torch9.0.0"].outcome == "install-failed"
    assert [v.name for v in data.variants] == ["core", "fresh"], "core rows before workarounds"


def test_planted_regression_is_found_and_summarised() -> None:
    baseline = compat()
    current = baseline.with_entry("demo::core[cpu]", "py311-torch2.11.0", outcome="reproduced")
    changes = diff_against_baseline(current, baseline)
    assert changes[0].kind == "regression" and changes[0].cell_id == "py311-torch2.11.0"
    lines = summary_lines(changes)
    assert len(lines) == 1 and "demo::core[cpu] in py311-torch2.11.0: fixed -> reproduced" in lines[0]


def test_unchanged_run_has_no_changes() -> None:
    assert diff_against_baseline(compat(), compat()) == []


def test_other_changes_are_classified() -> None:
    baseline = compat()
    current = (
        baseline.with_entry("demo::core[cpu]", "py311-torch2.5.1", outcome="fixed")
        .with_entry("demo::core[cpu]", "py311-torch2.11.0", outcome="timeout")
        .with_entry("demo::core[cpu]", "py311-torch2.12.0", outcome="install-failed")
    )
    kinds = {c.cell_id: c.kind for c in diff_against_baseline(current, baseline)}
    assert kinds == {
        "py311-torch2.5.1": "unexpected-fix",
        "py311-torch2.11.0": "new-failure-mode",
        "py311-torch2.12.0": "no-longer-installs",
    }


def test_run_verdict_regression_shows_without_baseline() -> None:
    runs = [run("py311-torch2.11.0", "2.11.0", record("core", "reproduced", verdict="regression"))]
    data = merge_runs(runs, profile="smoke", commit="x", generated="now")
    assert [c.kind for c in diff_against_baseline(data, None)] == ["regression"]


def test_markdown_escapes_hostile_text_and_shows_symbol_and_word() -> None:
    baseline = compat()
    current = baseline.with_entry("demo::core[cpu]", "py311-torch2.11.0", outcome="reproduced", message=HOSTILE)  # a hostile regression
    text = render_markdown(analyse(current, baseline))
    assert "<script>" not in text and "&lt;script&gt;" in text and "\\|" in text
    assert "✗ reproduced — works: fresh" in text and "✓ fixed" in text and "‼ crashed" in text and "⚠ install-failed" in text
    for line in text.splitlines():
        if line.startswith("| `core"):
            assert line.count(" | ") + 1 == line.count("|") - 1, "a pipe from a message must not add a column"
    assert escape_md("a|b<c>\n`d`") == "a\\|b&lt;c&gt; \\`d\\`"


def test_html_escapes_hostile_strings_and_loads_nothing() -> None:
    html = render_html(analyse(compat()))
    assert '<script>document.title="pwned"' not in html
    assert "&lt;script&gt;document.title=" in html
    assert "torch==9.0.0 &lt;b&gt;" in html
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=|@import|url\(", html), "the report must not fetch anything"


def test_html_puts_regressions_above_the_table() -> None:
    baseline = compat()
    current = baseline.with_entry("demo::core[cpu]", "py311-torch2.11.0", outcome="reproduced")
    html = render_html(analyse(current, baseline))
    assert html.index("change-regression") < html.index('id="compat-table"')


def test_step_summary_lists_regressions_first() -> None:
    baseline = compat()
    current = baseline.with_entry("demo::core[cpu]", "py311-torch2.11.0", outcome="reproduced")
    summary = render_step_summary(analyse(current, baseline))
    assert summary.index("**regression**") < summary.index("## Outcomes per case")
    assert "| demo |" in summary


def test_corrupt_baseline_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("{")
    with pytest.raises(BugmatrixError, match="update-baseline"):
        load_compat(path)
    write_json_atomic(path, {"schema": "bugmatrix.compat/0"})
    with pytest.raises(BugmatrixError, match="compat/0"):
        load_compat(path)


def test_big_report_renders(tmp_path: Path) -> None:
    """1,000 cells x 20 variants renders (its speed is measured by nox -s benchmark, not asserted)."""
    runs = [
        run(f"c{i:04d}", "2.5.1", *(record(f"v{j:02d}", "fixed" if (i + j) % 3 else "reproduced") for j in range(20))) for i in range(1000)
    ]
    start = time.perf_counter()
    html = render_html(analyse(merge_runs(runs, profile="full", commit="x", generated="now")))
    assert html.count('data-outcome="reproduced"') == sum(1 for i in range(1000) for j in range(20) if (i + j) % 3 == 0)
    print(f"rendered 1000x20 in {time.perf_counter() - start:.2f}s")
