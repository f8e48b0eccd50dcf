"""agreement(): upstream variants against their counterparts, cell by cell, over a compat document."""

from __future__ import annotations

from typing import Any

from bugmatrix.report.agreement import AgreementRow, agreement, per_case
from bugmatrix.report.model import Compat
from tests.fullscale import compat_from_json


def _variant(case: str, name: str, device: str, kind: str, counterpart: str | None = None) -> dict[str, Any]:
    return {
        "id": f"{case}::{name}[{device}]", "case": case, "variant": name, "device": device,
        "kind": kind, "workaround_for": None, "evidence": "", "counterpart": counterpart,
    }  # fmt: skip


def _compat(variants: list[dict[str, Any]], results: dict[str, dict[str, str]], cells: list[str] = ()) -> Compat:
    return compat_from_json({
        "schema": "bugmatrix.compat/1",
        "cells": [{"id": c, "pins": {}} for c in cells],
        "variants": variants,
        "results": {vid: {cell: {"outcome": outcome} for cell, outcome in cells.items()} for vid, cells in results.items()},
    })  # fmt: skip


CORE = "c::core[cpu]"
UP = "c::upstream_test[cpu]"


def test_counts_agreement_only_where_both_ran() -> None:
    """Skipped and install-failed cells say nothing; cells only one of them ran in are left out."""
    compat = _compat(
        [_variant("c", "core", "cpu", "core"), _variant("c", "upstream_test", "cpu", "upstream", "core")],
        {
            CORE: {"t1": "reproduced", "t2": "fixed", "t3": "fixed", "t4": "skipped", "t5": "reproduced", "t6": "fixed"},
            UP: {"t1": "reproduced", "t2": "fixed", "t3": "reproduced", "t4": "fixed", "t5": "install-failed", "t7": "fixed"},
        },
    )
    assert agreement(compat) == [AgreementRow(UP, CORE, 2, 3, ("t3",))]


def test_different_and_crashed_are_outcomes_that_can_differ() -> None:
    """A new failure mode in one of them is a disagreement, not a cell to skip."""
    compat = _compat(
        [_variant("c", "core", "cpu", "core"), _variant("c", "upstream_test", "cpu", "upstream", "core")],
        {CORE: {"a": "reproduced", "b": "crashed"}, UP: {"a": "different", "b": "crashed"}},
    )
    assert agreement(compat)[0] == AgreementRow(UP, CORE, 1, 2, ("a",))


def test_counterpart_is_matched_on_the_same_case_and_device() -> None:
    """A CUDA upstream variant compares with the CUDA counterpart, never the CPU one of the same name."""
    compat = _compat(
        [
            _variant("c", "core", "cpu", "core"),
            _variant("c", "core", "cuda", "core"),
            _variant("d", "core", "cuda", "core"),
            _variant("c", "upstream_test", "cuda", "upstream", "core"),
        ],
        {
            CORE: {"x": "fixed"},
            "c::core[cuda]": {"x": "reproduced"},
            "d::core[cuda]": {"x": "fixed"},
            "c::upstream_test[cuda]": {"x": "reproduced"},
        },
    )
    assert agreement(compat) == [AgreementRow("c::upstream_test[cuda]", "c::core[cuda]", 1, 1, ())]


def test_missing_counterpart_gives_an_empty_row_and_other_kinds_give_none() -> None:
    """An upstream variant whose counterpart never ran on its device still gets a row, so the gap is visible."""
    compat = _compat(
        [
            _variant("c", "core", "cpu", "core"),
            _variant("c", "fresh", "cpu", "workaround"),
            _variant("c", "upstream_test", "cuda", "upstream", "core"),
            _variant("c", "upstream_nothing", "cpu", "upstream"),
        ],
        {CORE: {"x": "fixed"}, "c::upstream_test[cuda]": {"x": "fixed"}},
    )
    assert agreement(compat) == [AgreementRow("c::upstream_test[cuda]", None)]


def test_a_compat_document_without_counterparts_has_no_rows() -> None:
    """Documents merged before counterparts existed carry no "counterpart" key: nothing to compare, no error."""
    variant = _variant("c", "core", "cpu", "core")
    del variant["counterpart"]
    assert agreement(_compat([variant], {CORE: {"x": "fixed"}})) == []
    assert agreement(_compat([], {})) == []


def test_a_missing_result_is_not_a_disagreement_and_cells_keep_the_documents_order() -> None:
    """``missing`` means nothing ran; differing cells are listed in plan (release) order, not string order."""
    compat = _compat(
        [_variant("c", "core", "cpu", "core"), _variant("c", "upstream_test", "cpu", "upstream", "core")],
        {
            CORE: {"t2.13": "fixed", "t2.2": "reproduced", "t2.3": "missing"},
            UP: {"t2.13": "reproduced", "t2.2": "fixed", "t2.3": "fixed"},
        },
        cells=["t2.2", "t2.3", "t2.13"],
    )
    assert agreement(compat) == [AgreementRow(UP, CORE, 0, 2, ("t2.2", "t2.13"))]


def test_sentences_per_case_and_uncompared_variants_named_once() -> None:
    assert AgreementRow(UP, CORE, 19, 19).text == "agrees in 19/19 cells"
    assert AgreementRow(UP, CORE, 17, 19, ("a", "b")).text == "agrees in 17/19 cells; differs in: a, b"
    many = AgreementRow(UP, CORE, 0, 12, tuple(f"c{i}" for i in range(12))).text
    assert many.endswith("c9 +2 more")
    assert "nothing to compare" in AgreementRow(UP, None).text
    compat = _compat(
        [
            _variant("c", "core", "cpu", "core"),
            _variant("c", "upstream_test", "cpu", "upstream", "core"),
            _variant("c", "core", "cuda", "core"),
            _variant("c", "upstream_test", "cuda", "upstream", "core"),
        ],
        {CORE: {"x": "fixed"}, UP: {"x": "fixed"}, "c::core[cuda]": {"x": "skipped"}, "c::upstream_test[cuda]": {"x": "skipped"}},
    )
    ((line,), uncompared) = per_case(compat)["c"]
    assert (line.upstream, line.counterpart, line.text, line.agrees) == ("upstream_test[cpu]", "core[cpu]", "agrees in 1/1 cells", True)
    assert uncompared == ["upstream_test[cuda]"], "a CPU-only night does not print a 0/0 line per CUDA variant"


def test_the_report_renders_agreement_per_case_in_markdown_and_html() -> None:
    """The full profile's planted disagreement (upstream #82783 fixed from torch 2.1) shows under its own case."""
    from bugmatrix.report.night import analyse
    from bugmatrix.report.render_html import render_html
    from bugmatrix.report.render_md import render_markdown
    from tests.fullscale import full_compat

    report = analyse(full_compat())
    markdown = render_markdown(report)
    encoder = markdown[markdown.index("## encoder\\_bf16\\_eval") : markdown.index("## t5\\_loss\\_no\\_grad\\_fn")]
    assert "**Upstream agreement**" in encoder
    assert "- `upstream_issue82783[cpu]` vs `core[cpu]`: agrees in 30/42 cells; differs in: py311-torch2.1.2-pl2.0.3, " in encoder
    assert "- `upstream_issue132613[cpu]` vs `core[cpu]`: agrees in 40/42 cells; differs in: py311-torch2.13.0-pl2.0.3" in encoder
    autocast = markdown[markdown.index("## autocast\\_cache") : markdown.index("## double\\_unscale")]
    assert "- `upstream_pr165068_test[cpu]` vs `core[cpu]`: agrees in 42/42 cells" in autocast
    assert "upstream_issue82783" not in autocast, "rows stay with their case"
    html = render_html(report)
    section = html[html.index('<section class="case-overview" data-case="encoder_bf16_eval">') :]
    section = section[: section.index("</section>")]
    assert 'data-agrees="no" data-upstream="upstream_issue82783[cpu]"' in section
    assert '<span class="differs">≠ agrees in 30/42 cells</span>; differs in: py311-torch2.1.2-pl2.0.3' in section
    assert 'data-agrees="yes" data-upstream="upstream_issue107663[cpu]"' not in section, "107663 differs at the planted 2.13.0"
