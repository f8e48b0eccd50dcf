"""A variant is read along the axes it declares; adding a case changes no other case's reading (issue 33, items 1 and 2).

The committed smoke cells are real run files; the extra cell is the one every
torch x transformers case creates (torch and transformers pinned, Lightning
not), fabricated from one of them as the issue describes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.cli import main
from bugmatrix.documents.compat import ExpectationSource, ExpectationSummary
from bugmatrix.paths import ROOT
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.report.boundaries import pictures
from bugmatrix.report.marks import boundary_text
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.model import COMPAT_SCHEMA, Compat, compat_json
from bugmatrix.report.new_releases import is_addition
from bugmatrix.report.night import NightReport, analyse
from bugmatrix.report.readme import readme_table
from bugmatrix.report.render_md import render_markdown
from bugmatrix.report.terminal import render_terminal
from tests.fullscale import compat_from_json

#: The four smoke cells' run files as the issue was reported on them (reports/runs/ of 2026-11-24 morning, before the
#: cells ran only their cases' variants): the reproduction of issue 33 item 1, kept as it was.
ISSUE33 = Path(__file__).resolve().parent / "fixtures" / "issue33"
SMOKE = (
    "py311-torch2.5.1-pl2.0.3",
    "py311-torch2.5.1-pl2.6.6",
    "py311-torch2.15.0-pl2.0.3-tf4.30.2",
    "py311-torch2.15.0-pl2.6.6-tf4.30.2",
)
EXTRA = "py311-torch2.5.1-tf4.30.2"
CORE = "autocast_cache::core[cpu]"


def declared() -> dict[str, tuple[str, ...]]:
    return {v.id: tuple(v.axes) for v in load_catalog(ROOT / "cases").variants}


def extra_cell() -> dict:
    """``py311-torch2.5.1-pl2.0.3.json`` without its Lightning pin and the variants that span Lightning, pinning transformers 4.30.2."""
    data = json.loads((ISSUE33 / f"{SMOKE[0]}.json").read_text(encoding="utf-8"))
    spans = declared()
    data["cell"] = EXTRA
    data["pins"] = {"python": "3.11", "torch": "2.5.1", "transformers": "4.30.2"}
    data["axes"] = list(data["pins"])
    data["environment"] = {k: v for k, v in data["environment"].items() if not k.startswith("lightning")}
    data["results"] = [r for r in data["results"] if "lightning" not in spans[r["id"]]]
    data["selected"] = [r["id"] for r in data["results"]]
    return data


def smoke_dir(tmp_path: Path, *, extra: bool) -> Path:
    runs = tmp_path / ("with" if extra else "without") / "runs"
    runs.mkdir(parents=True)
    for cell in SMOKE:
        shutil.copy(ISSUE33 / f"{cell}.json", runs / f"{cell}.json")
    if extra:
        (runs / f"{EXTRA}.json").write_text(json.dumps(extra_cell(), indent=1), encoding="utf-8")
    return runs.parent


def boundaries_in(terminal: str) -> dict[str, str]:
    """Variant -> its boundary column, read from the terminal's table (the column starts where its heading does)."""
    lines = terminal.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    column = lines[start].index("boundary")
    rows = {}
    for line in lines[start + 1 :]:
        if line.startswith("ran nowhere"):
            break
        if not line.startswith(" "):
            rows[line.split()[0]] = line[column:]
    return rows


def test_the_issue_33_reproduction_reads_along_the_declared_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --reports DIR`` on the four smoke cells, then with the extra cell: every reading the same, torch for core."""
    read = {}
    for extra in (False, True):
        reports = smoke_dir(tmp_path, extra=extra)
        assert main(["report", "--reports", str(reports)]) == 0
        read[extra] = boundaries_in(capsys.readouterr().out)
        compat = json.loads((reports / "compat.json").read_text(encoding="utf-8"))
        assert next(v for v in compat["variants"] if v["id"] == CORE)["axes"] == ["torch"], "the cases' declaration, for older run files"
        html = (reports / "index.html").read_text(encoding="utf-8")
        assert "strip along torch; held at py 3.11 · pl " in html and "folded (no change" not in html
    assert read[False][CORE] == read[True][CORE] == "torch 2.5.1 ✗ → 2.15.0 ✓"
    assert read[False] == read[True], "no variant's reading moved with the extra cell"
    assert not any("no boundary" in text or "unpinned" in text for text in read[True].values())


def test_the_run_file_records_the_declared_axes_and_the_report_prefers_them(tmp_path: Path) -> None:
    data = extra_cell()
    for record in data["results"]:
        record["axes"] = ["torch"] if record["id"] == CORE else declared()[record["id"]]
    path = tmp_path / f"{EXTRA}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    run = load_run_file(path)
    assert next(r for r in run.results if r.id == CORE).axes == ("torch",)
    compat = merge_runs([run], profile="p", commit="c", generated="g", declared={CORE: ("lightning",)})
    assert compat.variant_by_id[CORE].axes == ("torch",), "what the run recorded wins over a stand-in"
    data["results"][0]["axes"] = "torch"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(Exception, match="axes: 'torch' is not a list of str"):
        load_run_file(path)


# -- adding a case changes nothing else -------------------------------------------------------------


def new_case_cell() -> RunRecord:
    """A cell a new torch x transformers case brings, running that case's variant only (reproduced at torch 2.5.1)."""
    record = VariantRecord(
        id="tf_case::core[cpu]", case="tf_case", variant="core", device="cpu", kind=Kind.CORE, workaround_for=None,
        outcome=Outcome.REPRODUCED, expected=None, verdict=Verdict.NEW, signature_matched=True, message="bug", duration_s=0.1,
        axes=("torch", "transformers"),
    )  # fmt: skip
    pins = {"python": "3.11", "torch": "2.5.1", "transformers": "4.30.2"}
    return RunRecord(cell=EXTRA, pins=pins, environment={}, started="", finished="", results=[record], axes=list(pins), complete=True)


def night(runs: list[RunRecord]) -> NightReport:
    compat = merge_runs(runs, profile="smoke", commit="abc1234", generated="2026-11-24T00:00:00+00:00", declared=declared())
    return analyse(compat)


def lines_of(text: str, skip: str) -> list[str]:
    return [line for line in text.splitlines() if skip not in line]


def sections(markdown: str) -> dict[str, str]:
    """compat.md per case (``## case``): a case's boundaries and table."""
    parts = markdown.split("\n## ")
    return {part.split("\n", 1)[0]: part for part in parts[1:]}


def test_adding_a_case_leaves_every_other_variants_lines_byte_identical() -> None:
    smoke = [load_run_file(ISSUE33 / f"{cell}.json") for cell in SMOKE]
    before, after = night(smoke), night([*smoke, new_case_cell()])
    assert lines_of(render_terminal(after), "tf_case") == lines_of(render_terminal(before), "tf_case")
    rows = [[line for line in lines_of(readme_table(n), "tf_case") if line.startswith("| `")] for n in (before, after)]
    assert rows[0] == rows[1], "the README table's rows (its heading counts the cells)"
    md_before, md_after = sections(render_markdown(before)), sections(render_markdown(after))
    assert len(md_before) >= 4
    for case in md_before:
        # The per-cell table gains the new cell's column (empty for this case); the boundaries above it are what is read.
        assert md_after[case].split("\n| ")[0] == md_before[case].split("\n| ")[0], case
    pictured = {p.variant.id: p for p in pictures(before.compat)[0]}
    for picture in pictures(after.compat)[0]:
        if picture.variant.case == "tf_case":
            assert picture.axes == ("torch", "transformers") or picture.axes == ("torch",)
            assert boundary_text(picture) == "✗ reproduced everywhere"
            continue
        old = pictured[picture.variant.id]
        assert (picture.axes, picture.values, picture.held, picture.note) == (old.axes, old.values, old.held, old.note)
        assert [(t.marks, t.flips, t.unread) for t in picture.tracks] == [(t.marks, t.flips, t.unread) for t in old.tracks]


# -- what cannot be read is said in words; additions are quiet ----------------------------------------

AXES = [
    {"name": "python", "prefix": "py"}, {"name": "torch", "prefix": "torch"}, {"name": "lightning", "prefix": "pl"},
    {"name": "transformers", "prefix": "tf"},
]  # fmt: skip


def one_variant(axes: list[str], cells: dict[str, tuple[dict[str, str], str]]) -> Compat:
    """One variant declaring ``axes``; cells: id -> (pins, outcome)."""
    variant = {"id": "c::v[cpu]", "case": "c", "variant": "v", "device": "cpu", "kind": "core", "workaround_for": None, "axes": axes}
    return compat_from_json({
        "schema": COMPAT_SCHEMA, "axes": AXES, "cells": [{"id": cid, "pins": {"python": "3.11", **pins}} for cid, (pins, _) in cells.items()],
        "variants": [variant], "results": {"c::v[cpu]": {cid: {"outcome": o} for cid, (_, o) in cells.items()}},
    })  # fmt: skip


def test_a_two_axis_variant_whose_cells_differ_on_both_axes_says_it_cannot_be_read() -> None:
    compat = one_variant(["lightning", "transformers"], {
        "a": ({"lightning": "2.0.3", "transformers": "4.28.1"}, "reproduced"),
        "b": ({"lightning": "2.6.6", "transformers": "4.30.2"}, "fixed"),
    })  # fmt: skip
    (picture,), _ = pictures(compat)
    assert picture.kind == "grid" and set(picture.axes) == {"lightning", "transformers"}
    text = boundary_text(picture)
    assert text.startswith("cannot be read along ") and "pl 2.0.3" in text and "tf 4.30.2" in text and "no boundary" not in text


def test_outcomes_that_differ_only_with_undeclared_pins_are_mixed_and_said_so() -> None:
    compat = one_variant(["torch"], {
        "a": ({"torch": "2.5.1", "lightning": "2.0.3"}, "reproduced"),
        "b": ({"torch": "2.5.1", "lightning": "2.6.6"}, "fixed"),
        "c": ({"torch": "2.15.0", "lightning": "2.6.6"}, "fixed"),
    })  # fmt: skip
    (picture,), _ = pictures(compat)
    assert picture.axes == ("torch",) and picture.held_text == "held at py 3.11 · pl 2.0.3, 2.6.6"
    assert picture.tracks[0].marks[("2.5.1",)].outcome == "mixed"
    assert boundary_text(picture).startswith("mixed at torch 2.5.1: its cells there differ only in pins it does not declare (pl)")


def test_a_variant_that_declares_no_axis_is_one_reading() -> None:
    compat = one_variant([], {"a": ({"torch": "2.5.1"}, "fixed"), "b": ({"torch": "2.15.0"}, "fixed")})
    (picture,), _ = pictures(compat)
    assert picture.kind == "list" and picture.axes == () and boundary_text(picture) == "✓ fixed everywhere"
    assert "declares no axis" in picture.note


def cells_json(*pins: dict[str, str], failed: str = "") -> list[dict]:
    return [
        {"id": "-".join(pin.values()), "pins": pin, "install": {"status": "failed" if failed in pin.values() and failed else "ok"}}
        for pin in pins
    ]


def test_a_new_axis_and_an_older_release_are_new_in_this_matrix_not_a_new_release() -> None:
    empty = {"schema": COMPAT_SCHEMA, "axes": AXES, "variants": [], "results": {}}
    baseline = compat_from_json({**empty, "cells": cells_json({"torch": "2.5.1"}, {"torch": "2.15.0"}, {"torch": "9.0.0"}, failed="9.0.0")})
    tonight = compat_from_json({**empty, "cells": cells_json({"torch": "2.10.0", "numpy": "1.26.4"}), "tracking": {}})
    assert is_addition(tonight, baseline, "torch", "2.10.0"), "older than a release the baseline judged"
    assert is_addition(tonight, baseline, "numpy", "1.26.4"), "a new axis"
    assert not is_addition(tonight, baseline, "torch", "2.16.0"), "newer than every installed release (9.0.0 never installed)"
    tracked = compat_from_json({**compat_json(tonight), "tracking": {"axes": {"torch": {"requested": "latest", "resolved": "2.10.0"}}}})
    assert not is_addition(tracked, baseline, "torch", "2.10.0"), "what latest resolved to is a release"


def test_additions_and_dropped_cells_come_after_the_findings(tmp_path: Path) -> None:
    smoke = [load_run_file(ISSUE33 / f"{cell}.json") for cell in SMOKE]
    compat = merge_runs(smoke, profile="smoke", commit="abc1234", generated="2026-11-24T00:00:00+00:00", declared=declared())
    dropped = msgspec.structs.replace(
        compat, expectation=ExpectationSummary(ExpectationSource.PLAN, "the plan (4 cells)", ("gone-1", "gone-2"))
    )
    baseline = msgspec.structs.replace(compat, cells=tuple(c for c in compat.cells if c.pins["torch"] != "2.5.1"))
    report = analyse(dropped, baseline)
    assert report.releases and all(g.addition for g in report.releases), "torch 2.5.1 is older than 2.15.0: added on purpose"
    terminal = render_terminal(report)
    assert "NEW RELEASE" not in terminal and "torch 2.5.1 (new in this matrix)" in terminal
    assert terminal.splitlines()[-1].startswith("2 baseline cell(s) are not in this plan")
    assert terminal.index("torch 2.5.1 (new in this matrix)") > terminal.index("variant "), "after the table"
    assert "not in this plan" not in report.expectation_text
    markdown = render_markdown(report)
    assert markdown.rstrip().splitlines()[-1].startswith("2 baseline cell(s) are not in this plan")
    assert markdown.index("## New in this matrix") > markdown.index("## autocast")


def test_the_system_cell_sits_where_its_observed_releases_are_never_in_an_unpinned_column() -> None:
    compat = one_variant(["torch"], {"a": ({"torch": "2.5.1"}, "reproduced"), "b": ({"torch": "2.15.0"}, "fixed")})
    data = compat_json(compat)
    data["cells"].append({"id": "system", "pins": {}, "environment": {"python": "3.11.7", "torch": "2.15.0+cpu"}})
    data["results"]["c::v[cpu]"]["system"] = {"outcome": "fixed"}
    (picture,), _ = pictures(compat_from_json(data))
    assert picture.values == (("2.5.1", "2.15.0"),) and picture.tracks[0].marks[("2.15.0",)].cells == ("b", "system")
    assert boundary_text(picture) == "torch 2.5.1 ✗ → 2.15.0 ✓"
