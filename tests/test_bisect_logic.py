"""Bisect as an algorithm: few probes, same answer as a linear scan, install failures skipped; a boundary is reproduced <-> fixed.

The last tests run the whole ``bisect`` command over a stand-in registry answer with its probes played by a rule (no
environment is built): it searches the matrix's range of the axis by default and says so first, and ``--publish``
refuses a change that is not reproduced <-> fixed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import REFERENCE
from bugmatrix.tools.bisect import BisectResult, Probe, bisect_versions, default_out, is_boundary, registry_versions
from tests.reference import reference_catalog, reference_matrix

VERSIONS = [f"2.{minor}.{patch}" for minor in range(16) for patch in range(2)]  # 32 releases


def prober(flip_at: str, broken: frozenset[str] = frozenset()) -> tuple[list[str], object]:
    calls: list[str] = []

    def probe(version: str) -> Probe:
        calls.append(version)
        if version in broken:
            return Probe(version, "install-failed", "no wheel")
        return Probe(version, "fixed" if VERSIONS.index(version) >= VERSIONS.index(flip_at) else "reproduced")

    return calls, probe


@pytest.mark.parametrize("flip_at", ["2.0.1", "2.7.0", "2.11.0", "2.15.1"])
def test_bisect_matches_linear_within_log2_plus_two(flip_at: str) -> None:
    calls, probe = prober(flip_at)
    _, last, first = bisect_versions(VERSIONS, probe)
    assert first.version == flip_at and last.version == VERSIONS[VERSIONS.index(flip_at) - 1]
    assert len(calls) <= math.ceil(math.log2(len(VERSIONS))) + 2
    _, linear_last, linear_first = bisect_versions(VERSIONS, prober(flip_at)[1], linear=True)
    assert (linear_last.version, linear_first.version) == (last.version, first.version)


def test_uninstallable_releases_are_skipped_not_outcomes() -> None:
    broken = frozenset({"2.7.1", "2.8.0", "2.15.1"})
    _, probe = prober("2.8.1", broken)
    _, last, first = bisect_versions(VERSIONS, probe)
    assert first.version == "2.8.1" and last.version == "2.7.0"
    assert all(p.outcome != "install-failed" for p in (last, first))


def test_no_flip_reports_no_boundary() -> None:
    def probe(version: str) -> Probe:
        return Probe(version, "reproduced")

    probes, last, first = bisect_versions(VERSIONS, probe)
    assert last is None and first is None and len(probes) == 2


def test_registry_filtering_and_empty_range() -> None:
    releases = {
        "releases": {
            "2.4.0": [{"yanked": False}], "2.4.1": [{"yanked": False}], "2.5.0rc1": [{"yanked": False}],
            "2.5.0": [{"yanked": True}], "2.5.1": [{"yanked": False}], "2.6.0": [], "2.6.1.post1": [{"yanked": False}],
        }
    }  # fmt: skip
    assert registry_versions("torch", low="2.4.1", high=None, fetch=lambda name: releases)[0] == ["2.4.1", "2.5.1"]
    assert "2.5.0rc1" in registry_versions("torch", low=None, high=None, pre=True, fetch=lambda name: releases)[0]
    with pytest.raises(BugmatrixError, match=r"no torch releases between 3\.0 and the latest"):
        registry_versions("torch", low="3.0", high=None, fetch=lambda name: releases)


def test_a_published_result_lands_where_cases_cite_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``bisect`` writes under the output directory; ``--publish`` into reports/bisect/, the path a case's evidence names."""
    monkeypatch.setenv("BUGMATRIX_REPORTS", str(tmp_path))
    assert default_out("autocast_cache::core[cpu]", "torch") == tmp_path / "bisect" / "autocast_cache-core-cpu--torch.json"
    assert default_out("autocast_cache::core[cpu]", "torch", publish=True) == REFERENCE / "bisect" / "autocast_cache-core-cpu--torch.json"


def _files(*names: str, yanked: str | None = None, requires: str | None = None) -> list[dict[str, object]]:
    return [
        {"filename": n, "yanked": yanked is not None, "yanked_reason": yanked, "requires_python": requires} for n in names
    ]  # fmt: skip


#: transformers-like (pure Python wheels) and torch-like (one wheel per CPython) releases, as the registry's JSON lists them.
PROJECT = {
    "releases": {
        "4.51.3": _files("transformers-4.51.3-py3-none-any.whl", "transformers-4.51.3.tar.gz"),
        "4.52.0": _files("transformers-4.52.0-py3-none-any.whl", yanked="wrong dependency pins"),
        "4.52.1": _files("transformers-4.52.1-py3-none-any.whl", requires=">=3.12"),
        "4.52.2": _files("x-4.52.2-cp310-cp310-manylinux_2_28_x86_64.whl", "x-4.52.2-cp312-cp312-manylinux_2_28_x86_64.whl"),
        "4.52.3": _files("x-4.52.3-cp311-cp311-manylinux_2_28_x86_64.whl", "x-4.52.3-cp311-cp311-macosx_11_0_arm64.whl"),
        "4.52.4": _files("x-4.52.4-cp38-abi3-manylinux2014_x86_64.whl"),
        "4.52.5": _files("x-4.52.5-cp311-cp311-macosx_11_0_arm64.whl", "x-4.52.5.tar.gz"),
        "4.53.0.dev0": _files("x-4.53.0.dev0-py3-none-any.whl"),
    }
}


def test_bisect_says_which_releases_it_leaves_out_and_why() -> None:
    """No network: the registry client's JSON, as fetch returns it."""
    versions, skipped = registry_versions("transformers", low=None, high=None, fetch=lambda name: PROJECT, python="3.11")
    assert versions == ["4.51.3", "4.52.3", "4.52.4", "4.52.5"], "an abi3 wheel and an sdist install on 3.11; a dev release is no release"
    assert [(s.version, s.reason) for s in skipped] == [
        ("4.52.0", "yanked: wrong dependency pins"),
        ("4.52.1", "requires Python >=3.12, this bisect runs 3.11"),
        ("4.52.2", "no wheel for Python 3.11 on x86_64 Linux, and no sdist"),
    ]
    on_312 = registry_versions("transformers", low=None, high=None, fetch=lambda name: PROJECT, python="3.12")[0]
    assert on_312[:3] == ["4.51.3", "4.52.1", "4.52.2"]


def test_the_summary_warns_when_a_left_out_release_lies_inside_the_boundary() -> None:
    from bugmatrix.tools.bisect import BisectResult, Skipped

    result = BisectResult("c::v[cpu]", "transformers", {}, ["4.51.3", "4.52.1"], skipped=[Skipped("4.52.0", "yanked")])
    result.last_before, result.first_after = Probe("4.51.3", "fixed"), Probe("4.52.1", "reproduced")
    summary = result.summary()
    assert "4.52.1 is reproduced (first change among the releases run; transformers 4.52.0 lies between and was not run (yanked)" in summary
    assert result.to_json()["skipped"] == [{"version": "4.52.0", "reason": "yanked"}], "the result file keeps them"
    result.skipped = [Skipped("4.50.0", "yanked")]
    assert "not run" not in result.summary(), "one outside the boundary changes nothing"


# --- a boundary is reproduced <-> fixed, inside the matrix's range (issue 44) ------------------------------------------

#: Lightning-like releases: the oldest fail another way (``different``), 2.0.x up to 2.5.4 reproduce, 2.5.5 on is fixed.
RELEASES = ["1.8.0", "1.8.4", "1.9.5", "2.0.0", "2.0.3", "2.0.9", "2.1.4", "2.3.3", "2.5.4", "2.5.5", "2.6.6"]


def layered(version: str, *, reproduces: bool = True) -> str:
    if Version(version) < Version("2.0"):
        return "different"
    return "reproduced" if reproduces and Version(version) < Version("2.5.5") else "fixed"


@pytest.mark.parametrize("linear", [False, True])
def test_old_releases_that_fail_another_way_are_searched_through_not_taken_for_the_boundary(linear: bool) -> None:
    _, last, first = bisect_versions(RELEASES, lambda v: Probe(v, layered(v)), linear=linear)
    assert (last.version, last.outcome, first.version, first.outcome) == ("2.5.4", "reproduced", "2.5.5", "fixed")
    assert is_boundary(last, first)


def test_a_change_from_another_outcome_is_said_and_is_no_boundary() -> None:
    """Without a fixed release in range, different -> reproduced is the change found: reported as such, never a boundary."""
    probes, last, first = bisect_versions(RELEASES[:9], lambda v: Probe(v, layered(v)))
    assert (last.outcome, first.outcome) == ("different", "reproduced") and not is_boundary(last, first)
    result = BisectResult("c::v[cpu]", "lightning", {}, RELEASES[:9], probes=probes, last_before=last, first_after=first)
    assert "is different" in result.summary() and "not one between reproduced and fixed, so no boundary" in result.summary()


def _bisect_args(tmp_path: Path, **given: object) -> argparse.Namespace:
    options = {"package": "lightning", "low": None, "high": None, "pre": False, "versions": None, "linear": False}
    options |= {"timeout": 60.0, "out": tmp_path / "bisect.json", "publish": True, "root": tmp_path}
    return argparse.Namespace(**(options | given))


def _run(monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace, reproduces: bool = True) -> tuple[int, list[str]]:
    """``run_bisect`` for the reference catalogue's Lightning variant, its probes and the registry played by stand-ins (no env built)."""
    from bugmatrix.tools import bisect

    probed: list[str] = []

    def probe(root: Path, matrix: object, pins: dict[str, str], variant: object, timeout: float) -> tuple[Probe, bool]:
        probed.append(pins["lightning"])
        return Probe(pins["lightning"], layered(pins["lightning"], reproduces=reproduces)), False

    releases = {"releases": {v: [{"filename": f"lightning-{v}-py3-none-any.whl"}] for v in RELEASES}}
    monkeypatch.setattr(bisect, "run_variant_in", probe)
    monkeypatch.setattr(bisect, "fetch_project", lambda name: releases)
    variant = reference_catalog().find("autocast_cache::lightning_manual_optimization[cpu]")
    matrix = reference_matrix()
    held = {"python": "3.11", "torch": "2.5.1", "lightning": matrix.base["lightning"]}
    return bisect.run_bisect(args, matrix, variant, held), probed


def test_bisect_searches_the_matrix_s_range_and_says_it_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, probed = _run(monkeypatch, _bisect_args(tmp_path))
    first_line = capsys.readouterr().out.splitlines()[0]
    assert first_line.startswith("autocast_cache::lightning_manual_optimization[cpu]: bisect over 7 lightning releases 2.0.3..2.6.6 ")
    assert "(from the matrix's first lightning release, 2.0.3 to the latest; --from/--to for another range)" in first_line
    assert code == 0 and min(probed, key=Version) == "2.0.3", "nothing older than the matrix's first release is run"
    result = json.loads((tmp_path / "bisect.json").read_text(encoding="utf-8"))
    assert (result["last_before"]["version"], result["first_after"]["version"]) == ("2.5.4", "2.5.5") and result["boundary"]


def test_publish_refuses_a_change_that_is_not_reproduced_to_fixed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From 1.8.0 where nothing reproduces: different -> fixed is written where it was asked, and publishing it is refused in one line."""
    args = _bisect_args(tmp_path, low="1.8.0")
    with pytest.raises(BugmatrixError) as info:
        _run(monkeypatch, args, reproduces=False)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--publish refused: lightning 1.9.5 different, lightning 2.0.0 fixed: ")
    assert f"(the result is in {tmp_path / 'bisect.json'})" in message
    assert json.loads((tmp_path / "bisect.json").read_text(encoding="utf-8"))["boundary"] is False, "kept, and says it is none"
    assert "(from --from 1.8.0 to the latest; " in capsys.readouterr().out.splitlines()[0]
    code, _ = _run(monkeypatch, args)
    assert code == 0, "from 1.8.0 where 2.0.x reproduce: the different releases are searched through, the boundary published"
    result = json.loads((tmp_path / "bisect.json").read_text(encoding="utf-8"))
    assert (result["last_before"]["outcome"], result["first_after"]["outcome"]) == ("reproduced", "fixed")
