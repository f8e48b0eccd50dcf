"""Bisect as an algorithm: few probes, same answer as a linear scan, install failures skipped."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import REFERENCE
from bugmatrix.tools.bisect import Probe, bisect_versions, default_out, registry_versions

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
    assert registry_versions("torch", low="2.4.1", high=None, fetch=lambda name: releases) == ["2.4.1", "2.5.1"]
    assert "2.5.0rc1" in registry_versions("torch", low=None, high=None, pre=True, fetch=lambda name: releases)
    with pytest.raises(BugmatrixError, match=r"no torch releases between 3\.0 and the latest"):
        registry_versions("torch", low="3.0", high=None, fetch=lambda name: releases)


def test_a_published_result_lands_where_cases_cite_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``bisect`` writes under the output directory; ``--publish`` into reports/bisect/, the path a case's evidence names."""
    monkeypatch.setenv("BUGMATRIX_REPORTS", str(tmp_path))
    assert default_out("autocast_cache::core[cpu]", "torch") == tmp_path / "bisect" / "autocast_cache-core-cpu--torch.json"
    assert default_out("autocast_cache::core[cpu]", "torch", publish=True) == REFERENCE / "bisect" / "autocast_cache-core-cpu--torch.json"
