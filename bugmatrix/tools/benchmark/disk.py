"""Disk: what the cell envs hold together against one env, and what a nightly downloads and caches.

uv hard-links from its cache, so cells sharing wheels share inodes (one ``du`` counts each once); cells on different
heavy releases (torch and its CUDA libraries) share nothing, so the matrix's floor is one env per such release.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.diskbudget import heavy_distributions
from bugmatrix.tools.benchmark.table import Measurement, skipped
from bugmatrix.tools.cachesize import GB, measure_cells

__all__ = ["Sampler", "disk_kib", "heavy_release", "measure_ci_cache", "measure_disk"]


class Sampler:
    """Calls :meth:`sample` in a daemon thread every ``every`` seconds while entered, and once more on leaving."""

    def __init__(self, every: float, name: str) -> None:
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def sample(self) -> None:
        """Take one sample now."""
        raise NotImplementedError

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def disk_kib(paths: Sequence[Path]) -> int:
    """KiB used by ``paths`` together: one ``du`` invocation counts a hard-linked inode once."""
    out = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def heavy_release(venv: Path) -> str:
    """The heavy distributions installed in ``venv`` with their versions ("torch 2.5.1"); "" when none."""
    found = []
    for info in sorted(venv.glob("lib/python*/site-packages/*.dist-info")):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        if heavy_distributions([name]) and not name.startswith(("nvidia", "cuda")):
            found.append(f"{name} {version}")
    return ", ".join(found)


def measure_disk(root: Path) -> list[Measurement]:
    """Disk of all cell envs vs one; of the envs sharing one heavy release vs one; of all vs one env per heavy release."""
    envs = sorted(p for p in (root / ".nox").glob("cell-*") if (p / "bin" / "python").exists())
    if len(envs) < 2:
        return [skipped("disk: cell envs vs one", f"{len(envs)} cell env(s) in .nox; run nox -t smoke first")]
    each = {env: disk_kib([env]) / 1024 for env in envs}
    by_release: dict[str, list[Path]] = {}
    for env in envs:
        by_release.setdefault(heavy_release(env), []).append(env)
    release, shared = max(by_release.items(), key=lambda item: len(item[1]))
    together = disk_kib(envs) / 1024
    floor = disk_kib([max(group, key=each.__getitem__) for group in by_release.values()]) / 1024  # their shared files once, too
    note = f"N={len(envs)} on {len(by_release)} heavy releases; target set for 20 envs"
    sharing = f"disk: {len(shared)} cell envs on {release} vs one"
    return [
        Measurement(f"disk: all {len(envs)} cell envs vs the largest one", together, max(each.values()), "MiB", "<", 2, note=note),
        Measurement(sharing, disk_kib(shared) / 1024, max(each[e] for e in shared), "MiB", "<", 2, note="what uv's hard links share"),
        Measurement(f"disk: all {len(envs)} cell envs vs one env per heavy release ({len(by_release)})", together, floor, "MiB", "<=", 1.5),
    ]


def measure_ci_cache(matrix: Matrix, catalog: Catalog) -> list[Measurement]:
    """What a cold nightly downloads, and what its uv caches hold against GitHub's 10 GB (resolved, not downloaded)."""
    cells = plan_cells(matrix, "nightly", catalog)
    size = measure_cells(matrix, cells)
    note = f"{len(cells)} jobs, {len(size.per_key)} cache keys, {size.files} distinct files"
    github = "baseline: GitHub's 10 GB per repository"
    return [
        Measurement("nightly cold download, every job", size.jobs_bytes / GB, None, "GB", note=note),
        Measurement("nightly distinct files", size.total_bytes / GB, None, "GB"),
        Measurement("uv caches, one per heavy release", size.cached_bytes / GB, None, "GB"),
        Measurement("same, CUDA runtime wheels trimmed (saved)", size.kept_bytes / GB, 10.0, "GB", "<", 1.0, note=github),
    ]
