"""Download and cache sizes from uv's resolution, without downloading: tag ranking, sums, one real resolve."""

from __future__ import annotations

from pathlib import Path

from bugmatrix.plan.matrix import load_matrix
from bugmatrix.tools.cachesize import Artifact, _pick, cache_key, measure, resolved_artifacts, target_tags

BASE = "https://files.example/packages"


def test_the_most_specific_compatible_wheel_is_the_one_counted() -> None:
    rank = {tag: i for i, tag in enumerate(target_tags("3.11"))}
    package = {
        "name": "tomli",
        "version": "2.5.0",
        "sdist": {"url": f"{BASE}/tomli-2.5.0.tar.gz", "size": 17},
        "wheels": [
            {"url": f"{BASE}/tomli-2.5.0-py3-none-any.whl", "size": 14},
            {"url": f"{BASE}/tomli-2.5.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "size": 276},
            {"url": f"{BASE}/tomli-2.5.0-cp312-cp312-manylinux_2_17_x86_64.whl", "size": 999},
            {"url": f"{BASE}/tomli-2.5.0-cp311-cp311-manylinux_2_34_x86_64.whl", "size": 888},  # newer glibc than the runners'
        ],
    }
    assert _pick(package, rank) == Artifact("tomli", "2.5.0", "tomli-2.5.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 276)
    assert _pick({**package, "wheels": package["wheels"][2:]}, rank).filename == "tomli-2.5.0.tar.gz"  # no wheel fits: the sdist


def test_cache_key_is_the_heavy_release_and_the_python() -> None:
    """Cells that share torch's wheels share a cache; a Lightning pin does not split it."""
    matrix = load_matrix(Path(__file__).resolve().parent.parent / "matrix.toml")
    assert cache_key(matrix, {"python": "3.11", "torch": "2.15.0", "lightning": "2.6.6"}) == "torch-2.15.0-py3.11"
    assert cache_key(matrix, {"python": "3.10", "torch": "2.0.1", "lightning": "2.0.3"}) == "torch-2.0.1-py3.10"


def test_measure_counts_each_file_once_per_scope() -> None:
    # Real resolution through uv (the registry), small packages only.
    six = resolved_artifacts(["six==1.17.0"], "3.11")
    assert [(a.name, a.filename) for a in six] == [("six", "six-1.17.0-py2.py3-none-any.whl")] and six[0].size > 10_000
    size = measure([("a", ["six==1.17.0"], "3.11"), ("a", ["six==1.17.0"], "3.11"), ("b", ["six==1.17.0", "packaging==24.1"], "3.11")])
    packaging_size = size.total_bytes - six[0].size
    assert size.files == 2 and packaging_size > 10_000
    assert size.jobs_bytes == 3 * six[0].size + packaging_size
    assert size.per_key == {"a": six[0].size, "b": six[0].size + packaging_size} == size.kept_per_key
