"""Boundary pictures without a browser: axis derivation, flips and their labels (pure, fast)."""

from __future__ import annotations

import re

import pytest

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.report.boundaries import pictures
from bugmatrix.report.marks import Flip, boundary_text
from bugmatrix.report.model import COMPAT_SCHEMA, Compat
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.versions import version_key
from tests.fullscale import EXPECTED, compat_from_json, full_compat

AXES = [{"name": "python", "prefix": "py"}, {"name": "torch", "prefix": "torch"}, {"name": "lightning", "prefix": "pl"}]


def strip_compat(
    outcomes: dict[str, str], *, workaround: dict[str, str] | None = None, pin: dict[str, str] | None = None, expected: str | None = None
) -> Compat:
    """One core variant over torch releases (plus an optional workaround and extra pins per cell)."""
    cells = [{"id": f"t{v}", "pins": {"python": "3.11", "torch": v, **(pin or {})}} for v in outcomes]
    variants = [{"id": "c::core[cpu]", "case": "c", "variant": "core", "device": "cpu", "kind": "core", "workaround_for": None}]
    results = {"c::core[cpu]": {f"t{v}": {"outcome": o, "expected": expected and o} for v, o in outcomes.items()}}
    if workaround:
        variants.append({"id": "c::w[cpu]", "case": "c", "variant": "w", "device": "cpu", "kind": "workaround", "workaround_for": "core"})
        results["c::w[cpu]"] = {f"t{v}": {"outcome": o} for v, o in workaround.items()}
    return compat_from_json({"schema": COMPAT_SCHEMA, "axes": AXES, "cells": cells, "variants": variants, "results": results})


def test_a_fix_is_one_flip_labelled_with_its_release() -> None:
    (picture,), idle = pictures(strip_compat({"2.10.0": "reproduced", "2.5.1": "reproduced", "2.11.0": "fixed", "2.12.0": "fixed"}))
    assert idle == [] and picture.kind == "strip" and picture.axes == ("torch",)
    assert picture.values == (("2.5.1", "2.10.0", "2.11.0", "2.12.0"),), "release order, not string order"
    (flip,) = picture.tracks[0].flips
    assert flip == Flip("torch", "2.10.0", "2.11.0", "reproduced", "fixed")
    assert flip.label == "fixed in torch 2.11.0"
    assert boundary_text(picture) == "torch 2.10.0 ✗ → 2.11.0 ✓"


@pytest.mark.parametrize(
    ("was", "now", "label"),
    [
        ("fixed", "reproduced", "regressed in torch 2.1.0"),
        ("fixed", "different", "fails differently from torch 2.1.0"),
        ("fixed", "timeout", "hangs from torch 2.1.0"),
        ("reproduced", "crashed", "crashes from torch 2.1.0"),
    ],
)
def test_flip_verbs(was: str, now: str, label: str) -> None:
    assert Flip("torch", "2.0.0", "2.1.0", Outcome(was), Outcome(now)).label == label


@pytest.mark.parametrize("gap", ["install-failed", "missing", "skipped"])
def test_install_failures_and_missing_results_are_gaps_not_flips(gap: str) -> None:
    outcomes = {"2.0.0": "reproduced", "2.1.0": gap, "2.2.0": "fixed", "2.3.0": "fixed"}
    (picture,), _ = pictures(strip_compat(outcomes))
    (flip,) = picture.tracks[0].flips
    assert (flip.before, flip.after, flip.adjacent) == ("2.0.0", "2.2.0", False)
    assert flip.label == "fixed in torch 2.2.0 (first after 2.0.0)", "the boundary is somewhere in the gap, and it says so"


def test_a_flip_its_expectation_declares_is_not_called_a_regression() -> None:
    """Issue 23: "regressed in" only where the outcome differs from its expectation (or none covers it)."""
    undeclared = strip_compat({"2.0.0": "fixed", "2.1.0": "reproduced"})
    declared = strip_compat({"2.0.0": "fixed", "2.1.0": "reproduced"}, expected="declared")
    assert [f.label for f in pictures(undeclared)[0][0].tracks[0].flips] == ["regressed in torch 2.1.0"]
    (flip,) = pictures(declared)[0][0].tracks[0].flips
    assert flip.declared and flip.now is Outcome.REPRODUCED and flip.label == "reproduced from torch 2.1.0"


def test_workaround_shares_its_variants_strip_and_constant_variants_still_draw() -> None:
    compat = strip_compat({"2.0.0": "reproduced", "2.1.0": "fixed"}, workaround={"2.0.0": "fixed", "2.1.0": "fixed"})
    (picture,), _ = pictures(compat)
    assert [t.variant.label for t in picture.tracks] == ["core[cpu]", "w[cpu]"]
    assert boundary_text(picture, picture.tracks[1]) == "✓ fixed everywhere"
    (only,), _ = pictures(strip_compat({"2.0.0": "fixed", "2.1.0": "fixed"}))
    assert only.kind == "strip" and only.axes == ("torch",) and only.tracks[0].flips == []


def test_variants_that_ran_nowhere_are_listed_not_drawn() -> None:
    drawn, idle = pictures(strip_compat({"2.0.0": "skipped", "2.1.0": "install-failed"}))
    assert drawn == [] and [v.id for v in idle] == ["c::core[cpu]"]


def test_unpinned_sorts_first_and_invalid_versions_last() -> None:
    assert sorted(["2.10.0", "", "nightly", "2.9.1"], key=version_key) == ["", "2.9.1", "2.10.0", "nightly"]


def test_full_profile_pictures_match_the_rules_that_made_them() -> None:
    compat = full_compat()
    assert len(compat.cells) == 83  # the reference full profile: the union of the four cases' slices (70 before issue 33)
    drawn, idle = pictures(compat)
    axes = {p.variant.id: p.axes for p in drawn}
    assert {vid: tuple(sorted(a)) for vid, a in axes.items()} == {vid: tuple(sorted(a)) for vid, a in EXPECTED.items()}
    assert all(v.device == "cuda" for v in idle), "CUDA rows skip on CPU runners"
    by_id = {p.variant.id: p for p in drawn}
    core = by_id["autocast_cache::core[cpu]"]
    assert [f.label for f in core.tracks[0].flips] == ["fixed in torch 2.11.0"]
    # transformers is not among them: the case's slice never pins it (issue 33: its cells run no other case's variants)
    assert set(core.folded) == {"python", "lightning"}, "a torch-only bug folds the axes it does not change along"
    roles = {t.variant.label: t.variant.role for t in core.tracks}
    assert core.tracks[0].variant.label == "core[cpu]" and roles.pop("core[cpu]") == ""
    assert roles == {
        "fresh_autocast[cpu]": "workaround", "no_autocast_in_no_grad[cpu]": "workaround", "cache_disabled[cpu]": "workaround",
        "upstream_pr165068_test[cpu]": "upstream", "upstream_issue112583[cpu]": "upstream",
        # its counterpart is the fresh_autocast workaround: it joins the picture that workaround is on
        "upstream_issue65766_workaround[cpu]": "upstream",
    }, "workarounds and upstream reproductions are drawn on their variant's picture"  # fmt: skip
    encoder = by_id["encoder_bf16_eval::core[cpu]"]
    assert [f.label for f in encoder.tracks[0].flips] == [
        "fixed in torch 2.6.0", "fails differently from torch 2.13.0", "fixed in torch 2.14.1",
    ], "the planted new failure mode in one release is two flips"  # fmt: skip
    (u82783,) = [t for t in encoder.tracks if t.variant.label == "upstream_issue82783[cpu]"]
    assert [f.label for f in u82783.flips] == ["fixed in torch 2.1.2"]
    t5 = by_id["t5_loss_no_grad_fn::lightning_trainer[cpu]"]
    assert t5.kind == "grid" and "fixed in pl 2.0.7 at tf 4.30.2" in [f.label for f in t5.tracks[0].flips]
    assert [f.label for f in by_id["t5_loss_no_grad_fn::adafactor_closure[cpu]"].tracks[0].flips] == ["regressed in tf 4.30.2"]


def test_more_than_two_declared_axes_keep_the_two_with_most_values_and_say_so() -> None:
    cells, results = [], {}
    for py in ("3.10", "3.11"):
        for torch in ("2.0.0", "2.1.0", "2.2.0"):
            for pl in ("2.0.3", "2.6.6"):
                cid = f"{py}-{torch}-{pl}"
                cells.append({"id": cid, "pins": {"python": py, "torch": torch, "lightning": pl}})
                broken = torch == "2.0.0" or pl == "2.0.3" or py == "3.10"
                results[cid] = {"outcome": "reproduced" if broken else "fixed"}
    variant = {
        "id": "c::v[cpu]", "case": "c", "variant": "v", "device": "cpu", "kind": "core", "workaround_for": None,
        "axes": ["python", "torch", "lightning"],
    }  # fmt: skip
    (picture,), _ = pictures(
        compat_from_json({"schema": COMPAT_SCHEMA, "axes": AXES, "cells": cells, "variants": [variant], "results": {"c::v[cpu]": results}})
    )
    assert picture.kind == "grid" and picture.axes == ("torch", "python"), "most values first; a tie keeps display order"
    assert "also spans lightning" in picture.note and "per-cell table" in picture.note
    assert any(m.outcome == "mixed" for m in picture.tracks[0].marks.values()), "disagreeing folded cells show every outcome"


def test_overview_groups_figures_by_case() -> None:
    html = render_html(analyse(full_compat()))
    cases = re.findall(r'<section class="case-overview" data-case="([^"]+)">', html)
    assert cases == ["autocast_cache", "double_unscale", "encoder_bf16_eval", "t5_loss_no_grad_fn"]
    t5 = html[html.index('<section class="case-overview" data-case="t5_loss_no_grad_fn">') :]
    t5 = t5[: t5.index("</section>")]
    assert re.findall(r'<figure class="boundary (\w+)"', t5) == ["strip", "grid"]
    assert "; small symbols, in this order: upstream_lightning_pr18268_test[cpu], enable_grad_closure[cpu]" in t5
    grid = t5[t5.index('<figure class="boundary grid"') :]
    row = grid[grid.index('<th class="row" scope="row">4.30.2</th>') :]
    spots = re.findall(r'<td class="[^"]*" title="[^"]*">([^<]*)(?:<span class="w">([^<]*)</span>)?</td>', row[: row.index("</tr>")])
    assert [f"{text}/{sub}" for text, sub in spots[:3]] == ["✗/✗✓", "✗/✗✓", "✓/✓✓"], (
        "pl 2.0.3, 2.0.6: the bug and upstream's test reproduce, the workaround holds; pl 2.0.7 fixes all"
    )


def test_too_many_releases_to_draw_become_a_list_of_flips() -> None:
    outcomes = {f"2.{i}.0": "reproduced" if i < 20 else "fixed" for i in range(25)}
    (picture,), _ = pictures(strip_compat(outcomes))
    assert picture.kind == "list" and "too many to draw in 1280 px" in picture.note
    assert [f.label for f in picture.tracks[0].flips] == ["fixed in torch 2.20.0"]
    html = render_html(analyse(strip_compat(outcomes)))
    figure = html[html.index('<figure class="boundary list"') :]
    figure = figure[: figure.index("</figure>")]
    assert '<table class="pic">' not in figure and ">core[cpu]: fixed in torch 2.20.0</li>" in figure
