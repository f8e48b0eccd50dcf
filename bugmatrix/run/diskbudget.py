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
cells in; a cell of another profile counts too, which only prunes less.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bugmatrix.run.envbuild import uv_command

__all__ = ["LEAN", "heavy_distributions", "is_lean", "needed_later", "release_cell"]

LEAN = "lean"
#: Distributions that make up a torch release's bulk; the rest is small and shared.
HEAVY_NAMES = frozenset({"torch", "triton", "pytorch-triton"})
HEAVY_PREFIXES = ("nvidia-", "cuda-")


def is_lean() -> bool:
    """``BUGMATRIX_DISK=lean`` asks cell sessions to give their disk back (any other value: keep everything)."""
    return os.environ.get("BUGMATRIX_DISK", "").strip().lower() == LEAN


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


def release_cell(venv: Path, *, drop_cache: bool) -> list[str]:
    """Remove ``venv``; with ``drop_cache`` also clean its torch stack from uv's cache. Returns what was cleaned."""
    cleaned = heavy_distributions(_installed(venv / "bin" / "python")) if drop_cache and venv.exists() else []
    shutil.rmtree(venv, ignore_errors=True)
    if cleaned:
        subprocess.run([*uv_command(), "cache", "clean", *cleaned], capture_output=True, check=False)
        subprocess.run([*uv_command(), "cache", "prune"], capture_output=True, check=False)
    return cleaned
