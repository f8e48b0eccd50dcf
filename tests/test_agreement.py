"""agreement(): upstream variants against their counterparts, cell by cell, over a compat document."""

from __future__ import annotations

from typing import Any

from bugmatrix.report.agreement import agreement


def _variant(case: str, name: str, device: str, kind: str, counterpart: str | None = None) -> dict[str, Any]:
    return {
        "id": f"{case}::{name}[{device}]", "case": case, "variant": name, "device": device,
        "kind": kind, "workaround_for": None, "evidence": "", "counterpart": counterpart,
    }  # fmt: skip


def _compat(variants: list[dict[str, Any]], results: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {
        "schema": "bugmatrix.compat/1",
        "variants": variants,
        "results": {vid: {cell: {"outcome": outcome} for cell, outcome in cells.items()} for vid, cells in results.items()},
    }


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
    assert agreement(compat) == [{"upstream": UP, "counterpart": CORE, "agree": 2, "total": 3, "differ": ["t3"]}]


def test_different_and_crashed_are_outcomes_that_can_differ() -> None:
    """A new failure mode in one of them is a disagreement, not a cell to skip."""
    compat = _compat(
        [_variant("c", "core", "cpu", "core"), _variant("c", "upstream_test", "cpu", "upstream", "core")],
        {CORE: {"a": "reproduced", "b": "crashed"}, UP: {"a": "different", "b": "crashed"}},
    )
    assert agreement(compat)[0] == {"upstream": UP, "counterpart": CORE, "agree": 1, "total": 2, "differ": ["a"]}


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
    assert agreement(compat) == [
        {"upstream": "c::upstream_test[cuda]", "counterpart": "c::core[cuda]", "agree": 1, "total": 1, "differ": []}
    ]


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
    assert agreement(compat) == [{"upstream": "c::upstream_test[cuda]", "counterpart": None, "agree": 0, "total": 0, "differ": []}]


def test_a_compat_document_without_counterparts_has_no_rows() -> None:
    """Documents merged before counterparts existed carry no "counterpart" key: nothing to compare, no error."""
    variant = _variant("c", "core", "cpu", "core")
    del variant["counterpart"]
    assert agreement(_compat([variant], {CORE: {"x": "fixed"}})) == []
    assert agreement({}) == []
