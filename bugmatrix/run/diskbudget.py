"""Run a whole profile within this machine's disk: each torch release's wheels take ~4.5 GB of uv's cache (a profile holds
~18), so lean, a cell that ends removes its venv and, when no later (or running) cell pins its torch, cleans that stack."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from bugmatrix.errors import BugmatrixError
from bugmatrix.run.envbuild import flocked, run_uv
from bugmatrix.run.lock import pinned_distributions

__all__ = [
    "LEAN",
    "MARGIN_GIB",
    "STACK_GIB",
    "cache_lock",
    "free_gib",
    "heavy_distributions",
    "lean_needed",
    "needed_by",
    "release_cell",
    "uv_cache_dir",
]

LEAN = "lean"
#: What one torch release's wheels take in uv's cache (torch, triton, the CUDA libraries; measured: 4-5 GB).
STACK_GIB = 4.5
#: Room left for everything else (the small wheels, the venvs' own files, reports, the rest of the machine).
MARGIN_GIB = 10.0
#: Distributions that make up a torch release's bulk; the rest is small and shared.
HEAVY_NAMES = frozenset({"torch", "triton", "pytorch-triton"})
HEAVY_PREFIXES = ("nvidia-", "cuda-")


def uv_cache_dir() -> Path:
    """uv's cache directory as uv finds it (``$UV_CACHE_DIR``, ``$XDG_CACHE_HOME/uv``, ``~/.cache/uv``)."""
    return Path(os.environ.get("UV_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv")


def free_gib(path: Path) -> float:
    """Free disk on the filesystem holding ``path`` (its nearest existing parent)."""
    return shutil.disk_usage(next(p for p in (path, *path.parents) if p.exists())).free / 2**30


def lean_needed(jobs: int = 1) -> bool:
    """``$BUGMATRIX_DISK`` when ``lean`` or ``keep``; else lean once the free disk cannot hold the next ``jobs`` torch stacks
    beside the margin (asked as each cell ends)."""
    value = os.environ.get("BUGMATRIX_DISK", "").strip().lower()
    if value in (LEAN, "keep"):
        return value == LEAN
    if value not in ("", "auto"):
        msg = f"BUGMATRIX_DISK={value!r}: use lean, keep or auto (unset: auto, lean only where the disk needs it)"
        raise BugmatrixError(msg)
    return free_gib(uv_cache_dir()) < MARGIN_GIB + STACK_GIB * max(1, jobs)


def needed_by(others: Iterable[Sequence[str]], mine: Sequence[str]) -> bool:
    """Whether any of ``others`` (requirements) pins one of ``mine``'s heavy distributions."""
    heavy = _heavy_pins(mine)
    return any(heavy & _heavy_pins(requirements) for requirements in others)


def cache_lock(root: Path, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
    """Builds hold it shared, a lean prune of uv's cache exclusive: a ``flock`` on ``<root>/.nox/uv-cache.lock``."""
    return flocked(root / ".nox" / "uv-cache.lock", exclusive=exclusive)


def _heavy_pins(requirements: Sequence[str]) -> set[str]:
    return {f"{canonicalize_name(n)}=={v}" for n, v in pinned_distributions(requirements).items() if heavy_distributions([n])}


def heavy_distributions(names: Iterable[str]) -> list[str]:
    """The torch stack among installed distribution names (normalised, sorted)."""
    normal = {canonicalize_name(n) for n in names}
    return sorted(n for n in normal if n in HEAVY_NAMES or n.startswith(HEAVY_PREFIXES))


def release_cell(venv: Path, *, drop_cache: bool, root: Path | None = None) -> list[str]:
    """Remove ``venv``; with ``drop_cache`` also clean its torch stack from uv's cache (under :func:`cache_lock`); what was cleaned."""
    cleaned: list[str] = []
    if drop_cache and venv.exists():  # its torch stack, as uv lists what is installed
        listed = run_uv("pip", "list", "--python", str(venv / "bin" / "python"), "--format", "json")
        cleaned = heavy_distributions(entry["name"] for entry in json.loads(listed.stdout or "[]")) if listed.returncode == 0 else []
    shutil.rmtree(venv, ignore_errors=True)
    if cleaned:
        with cache_lock(root, exclusive=True) if root is not None else contextlib.nullcontext():
            run_uv("cache", "clean", *cleaned)
            run_uv("cache", "prune")
    return cleaned
