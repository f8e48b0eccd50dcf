"""Run a whole profile within this machine's disk: drop what no later cell needs.

The full profile holds ~18 distinct torch wheel sets; each costs about 4.5 GB
of uv cache plus its venv (CUDA wheels: torch, triton and the nvidia-*
libraries), which is more than a developer machine's ~80 GB at once. With
``BUGMATRIX_DISK=lean`` a cell session, after recording its run file, removes
its own venv and, when no later cell of the plan pins the same torch, removes
that torch stack from uv's cache (``uv cache clean``) and prunes the rest. A
later run of that cell rebuilds it (a minute: PyPI is fast); a cell that needs
the same torch again later in the order keeps the cache warm.

"Later" is the plan's order, which is the order ``nox -t <profile>`` runs the
cells in; a cell of another profile counts too, which only prunes less. With
cells side by side (:mod:`bugmatrix.run.pool`) "later" is every cell still
running or waiting, and the cache is pruned under an exclusive lock
(:func:`cache_lock`) that every environment build holds shared: a prune never
removes wheels a concurrent ``uv pip sync`` is reading or writing.

Lean is not free: every cell rebuilds its venv (seconds from a warm cache) and
a pruned torch stack is downloaded again on the next run. So it is the default
only where the disk needs it: ``BUGMATRIX_DISK=lean`` or ``keep`` decide; unset
(or ``auto``), :func:`lean_needed` asks as each cell ends whether the free disk
under uv's cache still holds the next torch stack(s) (:data:`STACK_GIB` each)
beside :data:`MARGIN_GIB`: environments are kept while it does, given back from
then on. :func:`disk_need_gib` is what a whole set of cells needs kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bugmatrix.run.envbuild import uv_command

__all__ = [
    "KEEP",
    "LEAN",
    "MARGIN_GIB",
    "STACK_GIB",
    "cache_lock",
    "disk_need_gib",
    "free_gib",
    "heavy_distributions",
    "is_lean",
    "lean_needed",
    "needed_by",
    "needed_later",
    "release_cell",
    "uv_cache_dir",
]

LEAN = "lean"
KEEP = "keep"
#: What one torch release's wheels take in uv's cache (torch, triton, the CUDA libraries; measured: 4-5 GB).
STACK_GIB = 4.5
#: Room left for everything else (the small wheels, the venvs' own files, reports, the rest of the machine).
MARGIN_GIB = 10.0
#: Distributions that make up a torch release's bulk; the rest is small and shared.
HEAVY_NAMES = frozenset({"torch", "triton", "pytorch-triton"})
HEAVY_PREFIXES = ("nvidia-", "cuda-")


def is_lean() -> bool:
    """``BUGMATRIX_DISK=lean`` asks cell sessions to give their disk back (explicitly; see :func:`lean_needed` for the default)."""
    return os.environ.get("BUGMATRIX_DISK", "").strip().lower() == LEAN


def disk_need_gib(requirements: Iterable[Sequence[str]]) -> float:
    """What running cells of these requirements keeps on disk with kept environments: one stack per distinct torch pin, and the margin."""
    stacks = {frozenset(_heavy_pins(r)) for r in requirements} - {frozenset()}
    return len(stacks) * STACK_GIB + MARGIN_GIB


def uv_cache_dir() -> Path:
    """uv's cache directory as uv finds it (``$UV_CACHE_DIR``, else ``$XDG_CACHE_HOME/uv``, else ``~/.cache/uv``), without running uv."""
    if os.environ.get("UV_CACHE_DIR"):
        return Path(os.environ["UV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv"


def free_gib(path: Path) -> float:
    """Free disk on the filesystem holding ``path`` (its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free / 2**30


def lean_needed(jobs: int = 1) -> bool:
    """Lean or kept environments, asked as each cell ends: ``$BUGMATRIX_DISK`` when it says ``lean`` or ``keep``; else (unset,
    ``auto``) lean only once the free disk under uv's cache cannot hold the next ``jobs`` torch stacks beside the margin.

    Greedy on purpose: a profile's cells keep their environments while the disk has room (no rebuild, no download next
    run), and the run turns lean from the cell after which it has not, so a profile larger than the disk still fits. A
    developer's ``nox`` with a few stacks cached never prunes; a CI runner's ~14 GB is lean from the first cell.
    """
    value = os.environ.get("BUGMATRIX_DISK", "").strip().lower()
    if value in (LEAN, KEEP):
        return value == LEAN
    if value not in ("", "auto"):
        from bugmatrix.errors import BugmatrixError

        msg = f"BUGMATRIX_DISK={value!r}: use lean, keep or auto (unset: auto, lean only where the disk needs it)"
        raise BugmatrixError(msg)
    return free_gib(uv_cache_dir()) < MARGIN_GIB + STACK_GIB * max(1, jobs)


def needed_by(others: Iterable[Sequence[str]], mine: Sequence[str]) -> bool:
    """Whether any of ``others`` (requirements of cells still running or waiting) pins one of ``mine``'s heavy distributions."""
    heavy = _heavy_pins(mine)
    return any(heavy & _heavy_pins(requirements) for requirements in others)


@contextlib.contextmanager
def cache_lock(root: Path, *, exclusive: bool) -> Iterator[None]:
    """Builds hold it shared, a lean prune of uv's cache exclusive: cells side by side never prune under a running install.

    A ``flock`` on ``<root>/.nox/uv-cache.lock``: released by the kernel when its holder dies, so a killed cell never wedges the rest.
    """
    path = root / ".nox" / "uv-cache.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def needed_later(order: Sequence[tuple[str, Sequence[str]]], cell_id: str) -> bool:
    """Whether a cell after ``cell_id`` in ``order`` ((id, requirements) pairs, in run order) pins one of its heavy distributions.

    "Heavy" is the bulk of a release in uv's cache (see :func:`heavy_distributions`):
    a later cell pinning the same ``torch==2.15.0`` keeps the cache warm for it.
    """
    ids = [cid for cid, _ in order]
    if cell_id not in ids:
        return True  # unknown position: keep the cache
    index = ids.index(cell_id)
    mine = _heavy_pins(order[index][1])
    return any(mine & _heavy_pins(requirements) for _, requirements in order[index + 1 :])


def _heavy_pins(requirements: Sequence[str]) -> set[str]:
    """``{"torch==2.15.0"}``: the exact pins of heavy distributions among ``requirements``."""
    found = set()
    for text in requirements:
        requirement = Requirement(text)
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact and heavy_distributions([requirement.name]):
            found.add(f"{canonicalize_name(requirement.name)}=={exact[0]}")
    return found


def heavy_distributions(names: Iterable[str]) -> list[str]:
    """The torch stack among installed distribution names (normalised, sorted)."""
    normal = {canonicalize_name(n) for n in names}
    return sorted(n for n in normal if n in HEAVY_NAMES or n.startswith(HEAVY_PREFIXES))


def _installed(python: Path) -> list[str]:
    listed = subprocess.run(
        [*uv_command(), "pip", "list", "--python", str(python), "--format", "json"], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        return []
    return [entry["name"] for entry in json.loads(listed.stdout or "[]")]


def release_cell(venv: Path, *, drop_cache: bool, root: Path | None = None) -> list[str]:
    """Remove ``venv``; with ``drop_cache`` also clean its torch stack from uv's cache (under :func:`cache_lock` of ``root``). Returns what was cleaned."""
    cleaned = heavy_distributions(_installed(venv / "bin" / "python")) if drop_cache and venv.exists() else []
    shutil.rmtree(venv, ignore_errors=True)
    if cleaned:
        with cache_lock(root, exclusive=True) if root is not None else contextlib.nullcontext():
            subprocess.run([*uv_command(), "cache", "clean", *cleaned], capture_output=True, check=False)
            subprocess.run([*uv_command(), "cache", "prune"], capture_output=True, check=False)
    return cleaned
