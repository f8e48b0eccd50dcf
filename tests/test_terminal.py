"""The terminal summary: one line per variant with its boundary, workarounds that held, colour only for a TTY."""

from __future__ import annotations

import io

import msgspec

from bugmatrix.cell.outcomes import Kind, Outcome, judge
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.documents.compat import ExpectationSource, ExpectationSummary
from bugmatrix.report.history import append_night, night_from_compat
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.night import analyse
from bugmatrix.report.terminal import render_terminal, summary_rows, use_colour
from tests.fullscale import full_compat
from tests.test_history import DATES, three_nights
from tests.test_report import CORE, FIXED, WORKS, fixture_compat, with_regression


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_use_colour_only_for_a_tty_without_no_color() -> None:
    assert use_colour(Tty(), {}) is True
    assert use_colour(Tty(), {"NO_COLOR": "1"}) is False
    assert use_colour(Tty(), {"NO_COLOR": ""}) is True, "no-color.org: only a non-empty value disables"
    assert use_colour(io.StringIO(), {}) is False, "a pipe or CI log gets plain text"


def test_plain_summary_names_reproduced_fixed_boundary_and_held_workarounds() -> None:
    text = render_terminal(analyse(full_compat()))
    assert "\033[" not in text
    lines = text.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("variant")) :]  # after what leads: missing, new releases
    assert lines[0].split() == ["variant", "reproduced", "in", "fixed", "in", "boundary"]
    core = next(line for line in lines if line.startswith("autocast_cache::core[cpu]"))
    assert "torch 2.0.1–2.10.0" in core and "torch 2.11.0–2.15.0" in core and core.endswith("torch 2.10.0 ✗ → 2.11.0 ✓")
    held = lines[lines.index(core) + 1]
    assert "cache_disabled ✓ 21/21" in held and "fresh_autocast 16/21" in held, "held everywhere vs only on newer torch"
    t5 = next(line for line in lines if line.startswith("t5_loss_no_grad_fn::lightning_trainer[cpu]"))
    assert "pl 2.0.6 ✗ → 2.0.7 ✓ (at tf 4.30.2)" in t5
    assert "upstream" not in held, "upstream reproductions share the picture but are no workaround"
    nowhere = next(i for i, line in enumerate(lines) if line.startswith("ran nowhere"))
    assert "28 variant(s)" in lines[nowhere], "the CUDA variants, on a CPU-only night"
    assert all(line.startswith("  ") and "(new in this matrix)" in line for line in lines[nowhere + 1 :] if not line.startswith("    ")), (
        "after the table only what is quiet: older releases unjudged tonight are new in this matrix, not NEW RELEASE"
    )


def test_colour_wraps_symbols_and_flaky_variants_are_marked() -> None:
    coloured = render_terminal(analyse(full_compat(), full_compat()), colour=True)
    assert "\033[31m✗\033[0m" in coloured and "\033[32m✓\033[0m" in coloured and coloured.startswith("\033[1m")
    nights = three_nights()
    kept = []
    for date, compat in zip(DATES, nights, strict=True):
        kept = append_night(kept, night_from_compat(compat, date))
    text = render_terminal(analyse(nights[2], None, kept))
    assert "cache_disabled 1/2 ≈ flaky" in text, f"{WORKS} flapped; it is a workaround, so it is marked on its line"


def test_the_terminal_leads_with_the_findings_before_the_table() -> None:
    """Issue 47: the first finding line comes before the per-variant table, whatever else leads (missing cells, releases)."""
    baseline = full_compat()
    tonight = with_regression(baseline)
    lines = render_terminal(analyse(tonight, baseline)).splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    first = next(i for i, line in enumerate(lines) if "REGRESSION" in line)
    assert first < table, lines[: table + 1]
    assert lines[first].startswith(f"✗ REGRESSION {CORE} in {FIXED}: fixed -> reproduced:"), lines[first]
    assert not any("REGRESSION" in line for line in lines[table:]), "said once, before the table"


def test_a_profile_that_is_a_subset_of_the_baselines_says_so_in_one_quiet_line() -> None:
    """A smoke night against a nightly baseline: one line, not every baseline cell and result it does not run."""
    baseline = msgspec.structs.replace(fixture_compat(), profile="nightly")
    kept = tuple(c for c in baseline.cells if c.id != FIXED)
    dropped = ExpectationSummary(ExpectationSource.PLAN, "the plan (3 cells)", (FIXED,), 9)
    smoke = msgspec.structs.replace(baseline, profile="smoke", cells=kept, expectation=dropped)
    text = analyse(smoke, baseline).dropped_text
    assert (
        text
        == "Profile smoke runs 3 of the 4 cells of the baseline's profile nightly; the others are not in this plan (on purpose, not missing)."
    )
    same = analyse(msgspec.structs.replace(smoke, profile="nightly"), baseline).dropped_text
    assert same.startswith("1 baseline cell(s) are not in this plan") and "9 baseline result(s)" in same, "the same profile names them"


def _record(name: str, outcome: str, workaround_for: str | None = None, pinned: str = "") -> VariantRecord:
    kind = Kind.WORKAROUND if workaround_for else Kind.CORE
    return VariantRecord(
        id=f"c::{name}[cpu]", case="c", variant=name, device="cpu", kind=kind, workaround_for=workaround_for,
        outcome=Outcome(outcome), expected=None, verdict=judge(Outcome(outcome), None), signature_matched=False,
        message="", duration_s=0.1, axes=("transformers",), pinned=pinned,
    )  # fmt: skip


def test_a_workaround_that_did_not_run_where_the_bug_reproduced_and_a_pin_on_an_axis_read_as_what_they_are() -> None:
    """Issue 44 / 47: ``fast_path_off 6/11`` counted skips as failures and ``0/n`` read as "did not hold"; a pin on an axis
    (``transformers<=4.51.3``) runs only where the pin holds, where the bug is absent, and says so."""
    outcomes = {"4.51.3": ("fixed", "skipped", "fixed", "fixed"), "4.52.1": ("reproduced", "fixed", "skipped", None)}
    outcomes |= {"4.53.0": ("reproduced", "skipped", "skipped", None), "4.54.0": ("reproduced", "reproduced", "skipped", None)}
    runs = []
    for version, (bug, newer, gone, pin) in outcomes.items():
        records = [_record("bug", bug), _record("newer_api", newer, "bug"), _record("gone", gone, "bug")]
        records += [_record("pin", pin, "bug", pinned="transformers<=4.51.3")] if pin else []
        runs.append(
            RunRecord(f"py311-tf{version}", {"python": "3.11", "transformers": version}, {}, "2026-01-01", "2026-01-01", results=records)
        )
    compat = merge_runs(runs, profile="p", commit="c", generated="2026-01-01")
    rows, _ = summary_rows(analyse(compat), with_history=False)
    (held,) = [row[4] for row in rows if row[0] == "c::bug[cpu]"]
    assert held == (
        "gone not run where it reproduced (3 cells); newer_api 1/2 (not run where it reproduced: 1 cell); "
        "pin avoided by pinning transformers ≤ 4.51.3, where the bug is absent (1 cell)"
    )
