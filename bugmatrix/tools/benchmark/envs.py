"""What a cell env costs: its build (the runner's uv against virtualenv + pip), its disk, a nightly's downloads.

Both builds install the cell's lock when it has one, then the same import check; pip runs with ``PIP_CONFIG_FILE=/dev/null``
and no ``PIP_*`` index settings, so both install the same wheels from PyPI. uv hard-links from its cache, so cells sharing
wheels share inodes (one ``du`` counts each once); cells on different heavy releases (torch and its CUDA libraries) share
nothing, so the matrix's floor is one env per such release."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.diskbudget import heavy_distributions
from bugmatrix.run.envbuild import IMPORT_CHECK
from bugmatrix.run.runner import CellSpec, Environment, prepare
from bugmatrix.tools.benchmark.table import Measurement, skipped, timed
from bugmatrix.tools.cachesize import GB, measure_cells

__all__ = ["disk_kib", "heavy_release", "measure_builds", "measure_ci_cache", "measure_disk", "pip_build", "uv_build"]

#: pip as uv sees the world: PyPI only. This machine's pip config adds a local wheel dir and a torch cap.
PIP_KEEP = {"PIP_CERT", "PIP_DEFAULT_TIMEOUT"}
PRIMED = ".bugmatrix-primed"


def uv_build(root: Path, matrix: Matrix, cell: Cell, venv: Path, cache: Path) -> tuple[float, Environment]:
    """The runner's build of ``cell`` into a new ``venv`` with ``cache`` as uv's cache: (seconds, the environment)."""
    with mock.patch.dict(os.environ, {"UV_CACHE_DIR": str(cache)}):  # the runner's uv commands inherit the environment
        start = time.perf_counter()
        environment = prepare(matrix, CellSpec.of(cell), root=root, venv=venv)
        return time.perf_counter() - start, environment


def pip_build(venv: Path, python: str, install: Sequence[str], modules: Sequence[str], cache: Path) -> float:
    """``python -m virtualenv`` + ``pip install INSTALL`` + the runner's import check, with ``cache`` as pip's cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_KEEP}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": str(cache)}
    interpreter = shutil.which(f"python{python}") or sys.executable
    made = timed([sys.executable, "-m", "virtualenv", "-q", "-p", interpreter, str(venv)], env)
    installed = timed([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *install], env)
    return made + installed + timed([str(venv / "bin" / "python"), "-c", IMPORT_CHECK, *modules], env)


def primed_pip_cache(root: Path, scratch: Path, python: str, install: Sequence[str], modules: Sequence[str]) -> tuple[Path, str]:
    """``--quick``'s pip cache, kept in ``.nox/benchmark-cache/pip``; an unmeasured install fills it once per install set."""
    cache = root / ".nox" / "benchmark-cache" / "pip"
    cache.mkdir(parents=True, exist_ok=True)
    primed, wanted = cache / PRIMED, " ".join(install)
    if wanted in (primed.read_text(encoding="utf-8").splitlines() if primed.exists() else []):
        return cache, "--quick: pip cache kept in .nox/benchmark-cache"
    pip_build(scratch / "pip-prime", python, install, modules, cache)
    with primed.open("a", encoding="utf-8") as handle:
        handle.write(wanted + "\n")
    return cache, "--quick: pip cache filled first by an unmeasured install"


def measure_builds(root: Path, matrix: Matrix, cell: Cell, quick: bool) -> list[Measurement]:
    """uv vs virtualenv+pip for one cell: cold (fresh caches) and warm (populated caches, new venvs); ``quick``: no cold pip."""
    cold_name, warm_name = "env build, cold cache: uv vs virtualenv+pip", "env build, warm cache, new venv: uv vs virtualenv+pip"
    modules = matrix.import_modules(cell.pins)
    (root / ".nox").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-", dir=root / ".nox") as tmp:  # ~15 GB: a disk, not a tmpfs /tmp
        base = Path(tmp)
        uv_cold, environment = uv_build(root, matrix, cell, base / "uv-cold", base / "uv-cache")
        uv_warm, _ = uv_build(root, matrix, cell, base / "uv-warm", base / "uv-cache")
        # pip installs the lock the runner used (exactly those distributions), else the requirements
        install = ["--require-hashes", "--no-deps", "-r", str(environment.lock)] if environment.lock else matrix.requirements_for(cell.pins)
        if quick:
            pip_cache, note = primed_pip_cache(root, base, cell.python, install, modules)
            cold = Measurement(cold_name, uv_cold, None, "s", note="pip cold skipped (--quick); uv cold measured")
        else:
            pip_cache, note = base / "pip-cache", ""
            pip_cold = pip_build(base / "pip-cold", cell.python, install, modules, pip_cache)
            cold = Measurement(cold_name, uv_cold, pip_cold, "s", ">=", 2, speedup=True)
        pip_warm = pip_build(base / "pip-warm", cell.python, install, modules, pip_cache)
        if not any(p.is_file() and p.name != PRIMED for p in pip_cache.rglob("*")):
            note = "pip cached nothing (index sent no cache headers): warm pip downloaded again"
    locked = f"both from {environment.lock.name}" if environment.lock else "both unlocked (no current lock)"
    notes = [note, "pip from PyPI like uv (PIP_CONFIG_FILE=/dev/null)", locked, "both import-checked"]
    return [cold, Measurement(warm_name, uv_warm, pip_warm, "s", ">=", 10, speedup=True, note="; ".join(filter(None, notes)))]


def disk_kib(paths: Sequence[Path]) -> int:
    """KiB used by ``paths`` together: one ``du`` invocation counts a hard-linked inode once."""
    out = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def heavy_release(venv: Path) -> str:
    """The heavy distributions installed in ``venv`` with their versions ("torch 2.5.1"); "" when none."""
    installed = (info.name.removesuffix(".dist-info").partition("-") for info in sorted(venv.glob("lib/python*/site-packages/*.dist-info")))
    return ", ".join(f"{n} {v}" for n, _, v in installed if heavy_distributions([n]) and not n.startswith(("nvidia", "cuda")))


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
