"""The report layer on fixture run files: merge, baseline diff, Markdown, HTML (pure, fast, no torch).

The fixtures in ``tests/fixtures/runs/`` are real ``bugmatrix.run/1`` files:

* ``py311-torch2.5.1-pl2.0.3``: the autocast bug reproduces, the
  ``cache_disabled`` workaround is fixed there (``fresh_autocast`` is not), and
  a message carries ``<script>``, ``|`` and Markdown markup; the observed torch
  version carries ``<b>``;
* ``py311-torch2.11.0-pl2.6.6``: everything fixed;
* ``py311-torch2.12.0-pl2.6.6``: the core variant crashed (a crash record has
  no kind) and another timed out;
* ``py311-torch9.0.0-pl2.6.6``: the install failed; no results.
"""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest
from packaging.version import Version

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.documents.compat import InstallStatus
from bugmatrix.documents.run import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.report.diff import Change, diff_against_baseline, summary_lines
from bugmatrix.report.merge import LOG_LIMIT, merge_runs
from bugmatrix.report.model import COMPAT_SCHEMA, Compat, compat_json, load_compat
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import SUMMARY_CHANGE_LIMIT, code, escape_md, render_markdown, render_step_summary

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
REPRODUCED, FIXED, CRASHED, UNINSTALLABLE = (
    "py311-torch2.5.1-pl2.0.3",
    "py311-torch2.11.0-pl2.6.6",
    "py311-torch2.12.0-pl2.6.6",
    "py311-torch9.0.0-pl2.6.6",
)
CORE, WORKS, NOT_WORKS = "autocast_cache::core[cpu]", "autocast_cache::cache_disabled[cpu]", "autocast_cache::fresh_autocast[cpu]"
HOSTILE_ID = "t5_loss_no_grad_fn::lightning_trainer[cpu]"


def fixture_runs() -> list[RunRecord]:
    """The fixture cells in plan (version) order, as ``report`` sorts them."""
    return sorted(load_run_dir(FIXTURES), key=lambda run: Version(run.pins["torch"]))


def fixture_compat() -> Compat:
    return merge_runs(fixture_runs(), profile="smoke", commit="abc1234", generated="2026-11-20T02:00:00+00:00")


def with_regression(baseline: Compat) -> Compat:
    """The baseline with the bug back where it was fixed: the change CI must catch."""
    return baseline.with_entry(CORE, FIXED, outcome="reproduced", message="RuntimeError: expected scalar type Half but found Float")


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ")]


# -- merge -----------------------------------------------------------------------------------------


def test_merge_header_cells_and_observed_environments() -> None:
    compat = fixture_compat()
    assert compat.schema == COMPAT_SCHEMA and compat_json(compat)["schema"] == COMPAT_SCHEMA
    assert (compat.profile, compat.commit, compat.generated) == ("smoke", "abc1234", "2026-11-20T02:00:00+00:00")
    assert [c.id for c in compat.cells] == [REPRODUCED, FIXED, CRASHED, UNINSTALLABLE], "cells keep the plan's order"
    first = compat.cells[0]
    assert first.pins["torch"] == "2.5.1" and first.environment["torch"] == "2.5.1+<b>cu124</b>", "pins as requested, env as observed"
    assert "executable" not in first.environment, "machine-local paths stay out of the shared document"
    assert first.duration_s == 41.0
    assert compat.cells[3].install.status is InstallStatus.FAILED and "torch==9.0.0" in compat.cells[3].install.reason
    (host,) = compat.environments
    assert (
        host["platform"] == "Linux-x86_64" and host["gpu"] is None and host["cuda"] == ["12.4"] and compat.interpreters(host) == ["3.11.7"]
    )
    assert host["cells"] == [REPRODUCED, FIXED, CRASHED], "a cell that never installed observed nothing"
    assert compat.interpreter == "python", "the axis the cells pin but whose distribution they do not record"
    json.dumps(compat_json(compat))  # it is written as compat.json and as the baseline


def test_merge_orders_variants_by_case_with_workarounds_last() -> None:
    variants = fixture_compat().variants
    assert [v.case for v in variants] == sorted(v.case for v in variants)
    autocast = [v for v in variants if v.case == "autocast_cache"]
    kinds = [v.kind.value for v in autocast]
    assert kinds == sorted(kinds, key=["core", "framework", "workaround"].index)
    crashed_core = next(v for v in variants if v.id == CORE)
    assert crashed_core.kind == "core", "the crash record has no kind; another cell supplies it"
    assert "github.com/pytorch/pytorch/issues" in crashed_core.evidence


def test_merge_results_grid_names_the_workaround_that_works_there() -> None:
    results = fixture_compat().results
    entry = results[CORE][REPRODUCED]
    assert entry.outcome is Outcome.REPRODUCED and entry.verdict == "as-expected" and entry.expected is Outcome.REPRODUCED
    assert entry.workarounds == ("cache_disabled",), "fresh_autocast reproduces there too, so it is not named"
    assert "loss.backward()" in entry.log and entry.duration_s == 0.25
    assert results[CORE][FIXED].workarounds == (), "only reproduced entries name workarounds"
    assert results[WORKS][REPRODUCED].outcome is Outcome.FIXED and results[NOT_WORKS][REPRODUCED].outcome is Outcome.REPRODUCED
    assert results[CORE][CRASHED].outcome is Outcome.CRASHED
    assert results[HOSTILE_ID][CRASHED].outcome is Outcome.TIMEOUT


def test_merge_marks_every_variant_of_an_uninstallable_cell() -> None:
    compat = fixture_compat()
    for variant in compat.variants:
        entry = compat.results[variant.id][UNINSTALLABLE]
        assert entry.outcome is Outcome.INSTALL_FAILED and entry.verdict == "not-run"
        assert "torch==9.0.0" in entry.message, "the reason is what the reader needs"


def test_merge_keeps_the_tail_of_long_logs() -> None:
    runs = fixture_runs()
    record = runs[0].results[0]
    runs[0].results[0] = VariantRecord(**{**record.__dict__, "log": "head\n" + "x" * 5000 + "\nRuntimeError: the end"})
    entry = merge_runs(runs, profile="smoke", commit="x", generated="now").results[record.id][REPRODUCED]
    assert len(entry.log) == LOG_LIMIT and entry.log.endswith("RuntimeError: the end")


def test_merge_refuses_two_run_files_for_one_cell() -> None:
    runs = fixture_runs()
    with pytest.raises(BugmatrixError, match=REPRODUCED.replace(".", r"\.")):
        merge_runs([*runs, runs[0]], profile="smoke", commit="x", generated="now")


def test_merge_tolerates_unparseable_timestamps() -> None:
    run = fixture_runs()[1]
    run.started, run.finished = "", "2026-11-20T01:01:30"  # empty
    assert merge_runs([run], profile="smoke", commit="x", generated="now").cells[0].duration_s is None


@pytest.mark.parametrize(
    ("started", "finished", "seconds"),
    [
        ("2026-11-20T01:00:00+00:00", "2026-11-20T01:01:30+00:00", 90.0),
        ("", "2026-11-20T01:01:30+00:00", None),
        ("2026-11-20T01:00:00", "2026-11-20T01:01:30+00:00", None),  # naive against aware
        ("yesterday", "2026-11-20T01:01:30+00:00", None),
    ],
)
def test_a_runs_wall_time_is_none_when_its_timestamps_cannot_say(started: str, finished: str, seconds: float | None) -> None:
    run = fixture_runs()[1]
    run.started, run.finished = started, finished
    assert run.wall_s == seconds


# -- load_compat -----------------------------------------------------------------------------------


def test_load_compat_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    write_json_atomic(path, analyse(fixture_compat()).to_json())
    loaded = load_compat(path)
    assert loaded == fixture_compat() and compat_json(loaded) == compat_json(fixture_compat())


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ("{", "not valid JSON"),
        ("[1, 2]", "got `array`"),
        ('{"schema": "bugmatrix.compat/0"}', "compat/0"),
        ('{"schema": "bugmatrix.compat/1", "cells": {}, "variants": [], "results": {}}', "`$.cells`"),
        (
            '{"schema": "bugmatrix.compat/1", "cells": [], "variants": [], "results": {"v": {"c": 1}}}',
            "got `int` - at `$.results[...][...]`",
        ),
        ('{"schema": "bugmatrix.compat/1", "cells": [{"pins": {}}], "variants": [], "results": {}}', "`id`"),
        ('{"schema": "bugmatrix.compat/4", "cells": [], "variants": [], "results": {}, "profile": "../x"}', "not a profile name"),
    ],
)
def test_bad_compat_files_are_one_actionable_line(tmp_path: Path, content: str, names: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(BugmatrixError) as info:
        load_compat(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and names in message and "--update-baseline" in message


# -- diff ------------------------------------------------------------------------------------------


def test_planted_regression_is_the_first_change_and_summarised() -> None:
    baseline = fixture_compat()
    changes = diff_against_baseline(with_regression(baseline), baseline)
    assert changes[0] == Change("regression", CORE, FIXED, "fixed", "reproduced", "RuntimeError: expected scalar type Half but found Float")
    assert [c for c in changes if c.kind == "regression"] == changes[:1]
    assert summary_lines(changes) == [
        f"REGRESSION {CORE} in {FIXED}: fixed -> reproduced: RuntimeError: expected scalar type Half but found Float"
    ]


def test_the_committed_baseline_loads_as_a_model() -> None:
    """reports/baseline.json is an older (compat/2) document: it loads, and says the same back apart from what /3 adds."""
    path = Path(__file__).resolve().parents[1] / "reports" / "baseline.json"
    data = json.loads(path.read_text())
    baseline = load_compat(path)
    again = compat_json(baseline)
    assert again["results"] == data["results"] and again["variants"] == data["variants"]
    assert [c["id"] for c in again["cells"]] == [c["id"] for c in data["cells"]]


def test_unchanged_run_has_no_regression() -> None:
    assert diff_against_baseline(fixture_compat(), fixture_compat()) == []
    assert summary_lines(diff_against_baseline(fixture_compat(), fixture_compat())) == []


def test_each_kind_of_change() -> None:
    baseline = fixture_compat()
    current = (
        baseline.with_entry(CORE, REPRODUCED, outcome="fixed")
        .with_entry(WORKS, FIXED, outcome="different")
        .with_entry(WORKS, REPRODUCED, outcome="install-failed")
        .with_entry(HOSTILE_ID, FIXED, outcome="crashed")
    )
    kinds = {(c.variant_id, c.cell_id): c.kind for c in diff_against_baseline(current, baseline)}
    assert kinds == {
        (CORE, REPRODUCED): "unexpected-fix",
        (WORKS, FIXED): "new-failure-mode",
        (WORKS, REPRODUCED): "no-longer-installs",
        (HOSTILE_ID, FIXED): "new-failure-mode",
    }


def test_new_cells_and_variants_are_informational() -> None:
    baseline = merge_runs(fixture_runs()[:2], profile="smoke", commit="x", generated="then")
    baseline = msgspec.structs.replace(
        baseline,
        variants=tuple(v for v in baseline.variants if v.id != NOT_WORKS),
        results={v: e for v, e in baseline.results.items() if v != NOT_WORKS},
    )
    changes = diff_against_baseline(fixture_compat(), baseline)
    informational = {(c.kind, c.variant_id or c.cell_id) for c in changes if c.kind in ("new-cell", "new-variant")}
    assert informational == {("new-cell", CRASHED), ("new-cell", UNINSTALLABLE), ("new-variant", NOT_WORKS)}
    assert ("new-failure-mode", CORE, CRASHED) in {(c.kind, c.variant_id, c.cell_id) for c in changes}, "a crash in a new cell is news"
    assert not [c for c in changes if c.kind == "no-longer-installs"], "a cell that never installed did not stop installing"
    assert changes[-1].kind in ("new-cell", "new-variant"), "informational changes come last"


def test_the_runs_own_regression_verdict_counts_without_a_baseline() -> None:
    runs = fixture_runs()
    record = runs[1].results[0]
    assert record.id == CORE
    runs[1].results[0] = VariantRecord(**{**record.__dict__, "outcome": "reproduced", "verdict": "regression", "message": "bug is back"})
    compat = merge_runs(runs, profile="smoke", commit="x", generated="now")
    changes = diff_against_baseline(compat, None)
    assert [(c.kind, c.variant_id, c.cell_id) for c in changes] == [("regression", CORE, FIXED)]
    assert summary_lines(changes) == [f"REGRESSION {CORE} in {FIXED}: expected fixed -> reproduced: bug is back"]
    # A baseline that already holds the regression does not hide it.
    assert [c.kind for c in diff_against_baseline(compat, compat)] == ["regression"]


# -- Markdown --------------------------------------------------------------------------------------


def test_escape_md_neutralises_table_and_html_markup() -> None:
    assert escape_md("a|b<c>\n`d`") == "a\\|b&lt;c&gt; \\`d\\`"
    assert escape_md("**x** [l](javascript:y) ~~z~~ &amp;") == "\\*\\*x\\*\\* \\[l\\](javascript:y) \\~\\~z\\~\\~ &amp;amp;"
    assert code("autocast_cache::core[cpu]") == "`autocast_cache::core[cpu]`"
    assert code("a`b|c") == "a\\`b\\|c", "a backtick cannot be escaped inside a code span"


def test_markdown_has_symbol_and_word_and_the_working_workaround() -> None:
    text = render_markdown(analyse(fixture_compat()))
    rows = "\n".join(table_rows(text))
    for outcome in ("reproduced", "fixed", "different", "crashed", "timeout", "install-failed"):
        assert Outcome(outcome).label in rows, outcome
    assert "1 variant(s) ran in no cell" in text, "the CUDA row (skipped without a GPU) is counted, not tabled"
    assert "✗ reproduced — works: cache\\_disabled" in text
    assert "every cell pins py 3.11" in text.lower(), "the shared axis is said once, not per column"
    header = next(line for line in table_rows(text) if line.startswith("| variant"))
    assert "torch 2.5.1 · pl 2.0.3" in header and "py 3.11" not in header


def test_markdown_merges_neighbouring_cells_that_agree() -> None:
    """A case that does not depend on transformers gets one column for all its versions, never a wrong one."""
    fixed = fixture_runs()[1]
    runs = [
        RunRecord(
            **{**fixed.__dict__, "cell": f"{FIXED}-tf{tf}", "pins": {**fixed.pins, "transformers": tf}, "results": list(fixed.results)}
        )
        for tf in ("4.29.2", "4.30.2", "5.23.0")
    ]
    runs.append(RunRecord(**{**fixed.__dict__, "results": list(fixed.results)}))  # no transformers pin: never inside "tf ..."
    runs[2].results[0] = VariantRecord(**{**fixed.results[0].__dict__, "outcome": "reproduced"})  # tf 5.23.0 differs
    text = render_markdown(analyse(merge_runs(runs, profile="smoke", commit="x", generated="now")))
    headers = [line for line in table_rows(text) if line.startswith("| variant")]
    assert headers[0] == f"| variant | tf 4.29.2, 4.30.2 | tf 5.23.0 | {FIXED} |", headers[0]
    assert headers[1] == f"| variant | tf 4.29.2, 4.30.2, 5.23.0 | {FIXED} |", "the other case agrees in all three"


def test_markdown_escapes_hostile_messages_and_versions() -> None:
    baseline = fixture_compat()
    current = baseline.with_entry(HOSTILE_ID, FIXED, outcome="crashed", message=baseline.results[HOSTILE_ID][REPRODUCED].message)
    text = render_markdown(analyse(current, baseline))
    assert "<script>" not in text and "<b>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "\\| col \\|" in text
    for row in table_rows(text):
        cells = re.split(r"(?<!\\)\|", row)[1:-1]  # unescaped pipes delimit cells
        header = next(r for r in table_rows(text) if r.startswith("| variant") and text.index(r) <= text.index(row))
        assert len(cells) == len(re.split(r"(?<!\\)\|", header)) - 2, f"a pipe from a run file added a column: {row}"


def test_markdown_puts_changes_on_top_regressions_first() -> None:
    baseline = fixture_compat()
    current = with_regression(baseline).with_entry(WORKS, FIXED, outcome="timeout")
    text = render_markdown(analyse(current, baseline))
    changes, regression, failure = text.index("## Changes since baseline"), text.index("**regression**"), text.index("**new-failure-mode**")
    assert changes < regression < failure < text.index("| variant")
    assert text.count("**no-longer-installs**") == 0


def test_markdown_groups_a_cell_that_no_longer_installs() -> None:
    baseline = fixture_compat()
    current = baseline
    for variant_id in baseline.results:
        current = current.with_entry(variant_id, FIXED, outcome="install-failed", message="No solution found")
    report = analyse(current, baseline)
    text = render_markdown(report)
    assert text.count("**no-longer-installs**") == 1 and f"({len(current.variants)} variants)" in text
    assert summary_lines(report.changes) == [f"NO-LONGER-INSTALLS {FIXED}: No solution found"], (
        "fails --fail-on-regression, one line per cell"
    )


def test_step_summary_lists_regressions_first_then_a_compact_table() -> None:
    baseline = fixture_compat()
    summary = render_step_summary(analyse(with_regression(baseline), baseline))
    assert summary.index("**regression**") < summary.index("## Outcomes per case")
    assert "| autocast\\_cache |" in summary and "| case | " + " | ".join(o.label for o in Outcome) + " |" in summary
    assert "<script>" not in summary


def test_step_summary_stays_short_with_thousands_of_changes() -> None:
    changes = [Change("new-failure-mode", f"case::v{i}[cpu]", "cell", "fixed", "crashed", "boom") for i in range(5000)]
    summary = render_step_summary(dataclasses.replace(analyse(fixture_compat()), changes=tuple(changes)))
    assert summary.count("**new-failure-mode**") == SUMMARY_CHANGE_LIMIT and f"and {5000 - SUMMARY_CHANGE_LIMIT} more" in summary


# -- HTML ------------------------------------------------------------------------------------------


def html_for_regression() -> str:
    """A regression and, below it, a new failure mode since the baseline."""
    baseline = fixture_compat()
    current = with_regression(baseline).with_entry(WORKS, FIXED, outcome="timeout")
    return render_html(analyse(current, baseline))


class Attributes(HTMLParser):
    """Every (tag, attribute, value) of a document, as a browser's tokenizer sees them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [(tag, name, value or "") for name, value in attrs]


def test_html_escapes_hostile_strings() -> None:
    html = html_for_regression()
    assert "<script>alert(1)" not in html and '<script>document.title="pwned"' not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "2.5.1+&lt;b&gt;cu124&lt;/b&gt;" in html and "torch==9.0.0 &lt;b&gt;unsatisfiable&lt;/b&gt;" in html
    assert html.count("<script>") == 1, "only the report's own inline script"


def test_html_loads_nothing_from_the_network() -> None:
    html = html_for_regression()
    assert not re.search(r"<(script|img|iframe|link|source|video|audio|embed|object)\b[^>]*\b(src|href|data)\s*=", html, re.I)
    assert "@import" not in html and "url(" not in html
    assert "<base" not in html and "http-equiv" not in html
    # The only URLs are evidence links a person may click, never something the page fetches.
    fetching = ("src", "href", "srcset", "data", "poster", "action", "formaction", "background")
    for tag, name, value in Attributes(html).found:
        if name in fetching or "://" in value:
            assert (tag, name) == ("a", "href") and value.startswith(("https://", "#")), (tag, name, value)
    assert '<a href="https://github.com/pytorch/pytorch/issues/112583" rel="noreferrer noopener">' in html


def test_html_changes_on_top_then_the_filterable_table() -> None:
    html = html_for_regression()
    changes, table = html.index('id="changes"'), html.index('id="compat-table"')
    assert changes < html.index('class="change change-regression"') < html.index('class="change change-new-failure-mode"') < table
    for control in ('id="f-case"', 'id="f-outcome"', 'data-axis="torch"', 'data-axis="lightning"', 'id="f-hide-skipped"'):
        assert control in html
    header = html[: html.index('id="changes"')]
    assert "abc1234" in header and "smoke" in header and "2026-11-20T02:00:00+00:00" in header and "Linux-x86_64" in header


def test_html_entries_carry_data_attributes_symbol_word_and_their_log() -> None:
    html = html_for_regression()
    entry = re.search(
        rf'<td [^>]*data-outcome="reproduced" data-case="autocast_cache" data-cell="{REPRODUCED}"[^>]*>(.*?)</td>', html, re.S
    )
    assert entry, "a reproduced entry with its data attributes"
    assert "✗ reproduced" in entry.group(1) and "→ cache_disabled" in entry.group(1), "symbol, word and the workaround that works"
    assert "<details>" in entry.group(1) and "loss.backward()" in entry.group(1), "the entry expands to its message and log"
    anchored = re.search(r'<td [^>]*id="(e\d+)"[^>]*data-cell|<td [^>]*data-cell="[^"]*" id="(e\d+)"', html)
    assert anchored and f'href="#{anchored.group(1) or anchored.group(2)}"' in html, "changes link to their table entry"
    assert html.count('data-outcome="install-failed"') == len(fixture_compat().variants)


def test_html_hostile_pin_names_cannot_add_attributes() -> None:
    compat = fixture_compat()
    first = msgspec.structs.replace(compat.cells[0], pins={**compat.cells[0].pins, 'x onmouseover="alert(1)"': "1"})
    compat = msgspec.structs.replace(compat, cells=(first, *compat.cells[1:]))
    names = {name for _, name, _ in Attributes(render_html(analyse(compat))).found}
    assert not [name for name in names if name.startswith("on")], "no event handler attribute, whatever a run file says"
    assert "data-pin-x-onmouseover--alert-1--" in names, "the axis stays filterable under a safe name"
