"""Cells and their envs: each smoke cell on the fork runner and on xdist against its floor, the smoke and full profiles
against theirs, what lean mode costs, and what a cell env costs: its build (the runner's uv against virtualenv + pip, both
from the cell's lock), its disk, a nightly's downloads. A cell's *floor* is one import of its stack plus the variants' own
compute, one at a time (xdist's durations are no floor: each worker's first variant pays the import); a profile's floor
and why cells on different torch releases share no disk: docs/performance.md."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

from packaging.utils import canonicalize_name

from bugmatrix.cell.runfile import RunRecord
from bugmatrix.cell.runners import Fork, Runner, Xdist, default_workers
from bugmatrix.documents.run import load_run_file
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.diskbudget import free_gib, heavy_distributions, lean_needed, uv_cache_dir
from bugmatrix.run.envbuild import IMPORT_CHECK, InstallFailed, cell_venv, uv_command
from bugmatrix.run.pool import slots
from bugmatrix.run.runner import CellSpec, Environment, built_python, bytecode_env, prepare, run_cell
from bugmatrix.tools.benchmark.table import CommandFailed, Measurement, Sampler, skipped, timed, timed_nox
from bugmatrix.tools.cachesize import GB, heavy_pins, measure_cells

__all__ = [
    "FLOOR_BOUND",
    "CellFloor",
    "DiskPeak",
    "cached_wheel_sets",
    "compare_outcomes",
    "disk_kib",
    "floor_rows",
    "heavy_wheels",
    "measure_builds",
    "measure_ci_cache",
    "measure_disk",
    "measure_full",
    "measure_lean_cost",
    "measure_runners",
    "measure_sessions",
    "measure_smoke",
    "profile_floor",
    "smoke_floor",
    "smoke_from_runs",
    "stack_imports",
    "uv_cache_of",
]

#: The full profile's wall time may be at most this many times its floor (issue 36).
FLOOR_BOUND = 1.5


def stack_imports(matrix: Matrix, catalog: Catalog, cell: Cell) -> tuple[list[str], list[str]]:
    """What a cell's process imports once: its axis modules, and the ``Case(imports=...)`` of the cases it runs."""
    runs = set(cell.variants)
    declared = [name for case in catalog.cases if any(v.id in runs for v in case.variants) for name in case.imports]
    return matrix.import_modules(cell.pins), list(dict.fromkeys(declared))


def _import_seconds(python: Path, modules: Sequence[str], declared: Sequence[str] = (), root: Path | None = None) -> float:
    """Wall time of a fresh interpreter importing the stack as the fork runner's cell process does (``declared`` resolved
    by its preload, ``os._exit``); the best of two, since the first may read a cold disk."""
    code = "import os, " + ", ".join(modules)
    if declared:
        code += f"; from bugmatrix.cell.preload import resolve_attribute; [resolve_attribute(n) for n in {list(declared)!r}]"
    code += "; os._exit(0)"
    env = bytecode_env({**os.environ, **({"PYTHONPATH": str(root)} if root else {})}, python.parent.parent)
    return min(timed([str(python), "-c", code], env) for _ in range(2))


@dataclass(frozen=True)
class CellFloor:
    """What one cell cannot go below, in seconds: its build from a warm cache, one import of its stack, its variants' compute."""

    cell: str
    build_s: float
    import_s: float
    compute_s: float

    @property
    def total(self) -> float:
        return self.build_s + self.import_s + self.compute_s


def profile_floor(floors: Sequence[CellFloor], jobs: int) -> float:
    """Seconds a profile cannot go below with ``jobs`` cells at once: the cells' floors summed, shared perfectly."""
    if jobs < 1:
        msg = f"jobs={jobs}: a profile runs at least one cell at a time"
        raise ValueError(msg)
    return sum(f.total for f in floors) / jobs


def floor_rows(label: str, wall_s: float | None, floors: Sequence[CellFloor], jobs: int) -> list[Measurement]:
    """Two rows: the profile's floor (with its parts) and the measured wall time against it, in minutes."""
    floor = profile_floor(floors, jobs) / 60
    parts = {name: sum(getattr(f, f"{name}_s") for f in floors) / 60 for name in ("build", "import", "compute")}
    note = " + ".join(f"{name} {minutes:.1f}" for name, minutes in parts.items()) + f" min, / {jobs} at once"
    return [
        Measurement(f"{label}: floor ({len(floors)} cells)", floor, None, "min", note=note),
        Measurement(f"{label}: wall vs floor", None if wall_s is None else wall_s / 60, floor, "min", "<=", FLOOR_BOUND, note=note),
    ]


def _measure_floors(root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], runs: Path) -> list[CellFloor]:
    """Each cell's floor after a run into ``runs``: a fresh build from the warm cache, one import, the run file's compute
    (a cell without a run file, or that does not install, is left out so the floor stays a floor)."""
    floors = []
    with tempfile.TemporaryDirectory(prefix="bugmatrix-floor-") as scratch:
        for cell in cells:
            path = runs / f"{cell.id}.json"
            if not path.exists():
                continue
            venv = Path(scratch) / "venv"
            started = time.perf_counter()
            try:
                environment = prepare(matrix, CellSpec.of(cell), root=root, venv=venv, check_imports=False)
            except InstallFailed:
                continue
            build = time.perf_counter() - started
            imports = _import_seconds(environment.python, *stack_imports(matrix, catalog, cell), root=root)
            compute = sum(r.duration_s for r in load_run_file(path).results)
            floors.append(CellFloor(cell.id, build, imports, compute))
            shutil.rmtree(venv, ignore_errors=True)
    return floors


def _timed_cell(root: Path, matrix: Matrix, spec: CellSpec, run_file: Path) -> tuple[float, float, Path]:
    """One whole cell through the runner (build or reuse, pytest, run file): (pytest's seconds, the whole run's, its interpreter)."""
    pytest_s = 0.0

    def execute(command: Sequence[str], env: Mapping[str, str]) -> int:
        nonlocal pytest_s
        pytest_s = timed(command, env, ok=(0, 1), cwd=root)  # 1: an outcome differs; still a full run
        return 0

    started = time.perf_counter()
    done = run_cell(matrix, spec, run_file, execute=execute, root=root)
    if done.environment is None:
        raise CommandFailed(f"cell {spec.id} cannot be built: {(done.install_failed or 'no environment').splitlines()[-1]}")
    return pytest_s, time.perf_counter() - started, done.environment.python


def measure_lean_cost(root: Path, matrix: Matrix, cells: Sequence[Cell]) -> list[Measurement]:
    """The smoke cells with their venvs kept (reused) against lean (each venv removed first: rebuilt from the warm cache)."""
    kept = lean = 0.0
    with tempfile.TemporaryDirectory(prefix="bugmatrix-lean-") as scratch:
        for cell in cells:
            spec = CellSpec.of(cell)
            _timed_cell(root, matrix, spec, Path(scratch) / "warmup.json")  # the kept venv exists, built if it was not
            kept += _timed_cell(root, matrix, spec, Path(scratch) / f"{cell.id}-kept.json")[1]
            shutil.rmtree(cell_venv(root, cell.id), ignore_errors=True)
            lean += _timed_cell(root, matrix, spec, Path(scratch) / f"{cell.id}-lean.json")[1]
    note = "lean rebuilds each venv from the warm cache; a pruned torch stack is also downloaded again next run (not counted)"
    return [Measurement(f"lean vs kept environments: {len(cells)} smoke cells", lean, kept, "s", note=note)]


def smoke_floor(run: RunRecord, imports: float) -> float:
    """What a cell cannot go below: importing its stack plus its variants' own time."""
    return imports + sum(r.duration_s for r in run.results)


def _run_timed(root: Path, matrix: Matrix, cell: Cell, runner: Runner, run_file: Path) -> tuple[float, RunRecord, Path]:
    wall, _, python = _timed_cell(root, matrix, replace(CellSpec.of(cell), runner=runner), run_file)
    return wall, load_run_file(run_file), python


def compare_outcomes(old: RunRecord, new: RunRecord) -> dict[str, str]:
    """variant id -> "" where both runs recorded the same outcome, else what each recorded (a variant one lacks differs too)."""
    before, after = ({r.id: r.outcome.value for r in run.results} for run in (old, new))
    ids = sorted(set(before) | set(after))
    return {i: "" if before.get(i) == after.get(i) else f"{i}: {before.get(i)} -> {after.get(i)}" for i in ids}


def measure_runners(root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], repeat: int = 1) -> list[Measurement]:
    """Each cell (env reused) on xdist and on the fork runner against its floor, and whether their outcomes agree.

    ``repeat`` > 1 alternates the runners and keeps each one's fastest run (the least disturbed)."""
    rows: list[Measurement] = []
    pairs, differ = 0, []
    xdist, fork = Xdist(default_workers()), Fork(default_workers())
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        for cell in cells:
            runs: dict[Runner, list[tuple[float, RunRecord]]] = {xdist: [], fork: []}
            for attempt in range(max(1, repeat)):
                for runner in (xdist, fork) if attempt % 2 == 0 else (fork, xdist):
                    wall, run, _ = _run_timed(root, matrix, cell, runner, Path(tmp) / f"{cell.id}-{runner.name}-{attempt}.json")
                    runs[runner].append((wall, run))
            old_wall, new_wall = (min(w for w, _ in runs[r]) for r in (xdist, fork))
            _, alone, python = _run_timed(root, matrix, cell, Fork(1), Path(tmp) / f"{cell.id}-alone.json")
            runs[fork].append((0.0, alone))  # its outcomes are compared too
            imports = _import_seconds(python, *stack_imports(matrix, catalog, cell), root=root)
            compute = sum(r.duration_s for r in alone.results)
            note = f"floor: import {imports:.1f}s + compute {compute:.1f}s" + (f"; fastest of {repeat}" if repeat > 1 else "")
            rows.append(Measurement(f"cell {cell.id}: fork runner vs floor", new_wall, imports + compute, "s", "<=", 1.15, note=note))
            rows.append(Measurement(f"cell {cell.id}: xdist -n {xdist.workers} vs floor", old_wall, imports + compute, "s", note=note))
            xdist_runs = [run for _, run in runs[xdist]]
            for index, (_, after) in enumerate(runs[fork]):  # each fork run (the one-child run too) against an xdist run
                compared = compare_outcomes(xdist_runs[index % len(xdist_runs)], after)
                pairs += len(compared)
                differ += [f"{cell.id} {line}" for line in compared.values() if line]
    note = "every (variant, cell) outcome equal" if not differ else "DIFFER: " + "; ".join(differ[:5])
    rows.append(
        Measurement(f"outcomes: fork runner = xdist, {len(cells)} cells", pairs - len(differ), pairs, "pairs", ">=", 1.0, note=note)
    )
    return rows


def measure_sessions(root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], repeat: int = 2) -> list[Measurement]:
    """Each cell's whole ``nox -s "cell(<id>)" -- --no-reuse`` (after one uncounted session that builds its env; the
    fastest of ``repeat``) against one import of its stack."""
    rows: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-session-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp}
        for cell in cells:
            session = ("-s", f"cell({cell.id})", "--", "--no-reuse")
            timed_nox(root, env, *session)  # builds (or checks) the environment: not what is measured
            load = os.getloadavg()[0]
            wall = min(timed_nox(root, env, *session) for _ in range(max(1, repeat)))
            python = built_python(root, cell.id)
            if python is None:
                rows.append(skipped(f"cell {cell.id}: whole nox session vs one import", "its environment was not built"))
                continue
            imports = _import_seconds(python, *stack_imports(matrix, catalog, cell), root=root)
            run = load_run_file(Path(tmp) / "runs" / f"{cell.id}.json")
            compute = sum(r.duration_s for r in run.results)
            note = f"{len(run.results)} variants ran ({compute:.1f}s of their own compute); fastest of {max(1, repeat)}; load {load:.1f}"
            name = f"cell {cell.id}: whole nox session (env built) vs one import of its stack"
            rows.append(Measurement(name, wall, imports, "s", "<=", 1.4, note=note))
    return rows


def smoke_from_runs(
    root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], runs_dir: Path, wall: float | None, how: str
) -> Measurement:
    """Smoke wall time (given, or the run files' started..finished) vs the sum of the cells' floors."""
    name = f"smoke profile ({len(cells)} cells) vs sum of floors"
    walls, floors, missing = 0.0, 0.0, []
    for cell in cells:
        path, python = runs_dir / f"{cell.id}.json", built_python(root, cell.id)
        run = load_run_file(path) if path.exists() else None
        if run is None or run.wall_s is None or python is None:
            missing.append(cell.id)
            continue
        walls += run.wall_s
        floors += smoke_floor(run, _import_seconds(python, *stack_imports(matrix, catalog, cell), root=root))
    if missing:
        return skipped(name, f"no finished run file or env for {', '.join(missing)}: run nox -t smoke, or pass --smoke")
    return Measurement(name, wall if wall is not None else walls, floors, "s", "<=", 2, note=how)


def measure_smoke(root: Path, matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], *, now: bool) -> Measurement:
    """``nox -t smoke`` end to end (envs reused, report included) into a temporary reports dir; not ``now``: the last run's."""
    if not now:
        return smoke_from_runs(root, matrix, catalog, cells, output_dir() / "runs", None, "from the last run (run files: pytest only)")
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        wall = timed_nox(root, {**os.environ, "BUGMATRIX_REPORTS": tmp}, "-t", "smoke", ok=(0,))
        return smoke_from_runs(root, matrix, catalog, cells, Path(tmp) / "runs", wall, "nox -t smoke measured now (--smoke)")


class DiskPeak(Sampler):
    """The most disk in use while entered; ``peak`` - ``start`` is what a run added."""

    def __init__(self, path: Path, every: float = 5.0) -> None:
        super().__init__(every, "disk-peak")
        self.path = path
        self.start = self.peak = shutil.disk_usage(path).used

    def sample(self) -> None:
        self.peak = max(self.peak, shutil.disk_usage(self.path).used)

    @property
    def added_gib(self) -> float:
        return (self.peak - self.start) / 2**30


def heavy_wheels(matrix: Matrix, cells: Iterable[Cell]) -> set[tuple[str, str, str]]:
    """(distribution, version, ``cpXY``) of every heavy pinned distribution the cells install."""
    return {
        (canonicalize_name(name), version, "cp" + cell.pins[matrix.interpreter].replace(".", ""))
        for cell in cells
        for name, version in heavy_pins(matrix, cell.pins)
    }


def cached_wheel_sets(cache: Path, wanted: Iterable[tuple[str, str, str]]) -> tuple[int, int]:
    """How many of ``wanted`` wheels uv's cache holds unpacked (``wheels-v*/pypi/<name>/``), of how many."""
    wanted = set(wanted)
    held = sum(any(p.is_dir() and p.name.startswith(f"{v}-{py}-") for p in cache.glob(f"wheels-v*/pypi/{n}/*")) for n, v, py in wanted)
    return held, len(wanted)


def uv_cache_of(env: Mapping[str, str]) -> Path:
    """uv's cache directory as uv itself answers under ``env``."""
    found = subprocess.run([*uv_command(), "cache", "dir"], capture_output=True, text=True, env=dict(env), check=False)
    return Path(found.stdout.strip())


def received_bytes() -> int:
    """Bytes received on every network interface but ``lo`` (0 without ``/proc/net/dev``)."""
    try:
        lines = Path("/proc/net/dev").read_text(encoding="utf-8").splitlines()[2:]
    except OSError:
        return 0
    interfaces = (line.partition(":") for line in lines)
    return sum(int(fields.split()[0]) for name, _, fields in interfaces if name.strip() != "lo" and fields.split())


def measure_full(root: Path, matrix: Matrix, catalog: Catalog, cold: bool, *, cache: Path | None, keep: Path | None) -> list[Measurement]:
    """The full profile (its CPU cells) end to end, every cell venv removed first: wall time, bytes received, the most disk it added and,
    warm, the wall time against its floor. ``cache``: the uv cache of ``--full both`` (cold empties it); without it cold
    uses an empty one of its own, warm the machine's. ``keep``: copy the run's reports directory there."""
    cells = [c for c in plan_cells(matrix, "full", catalog) if c.device == "cpu"]
    how = "cold (empty uv cache)" if cold else ("warm (the cache the cold run left)" if cache else "warm (this machine's uv cache)")
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-full-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp}
        own = cache or (Path(tmp) / "uv-cache" if cold else None)
        if own is not None:
            if cold:
                shutil.rmtree(own, ignore_errors=True)
            own.mkdir(parents=True, exist_ok=True)
            env["UV_CACHE_DIR"] = str(own)
        for venv in (root / ".nox").glob("cell-*"):
            shutil.rmtree(venv, ignore_errors=True)
        held, wanted = cached_wheel_sets(uv_cache_of(env), heavy_wheels(matrix, cells))
        free = free_gib(own or uv_cache_dir())
        chosen = slots(len(cells) or 1, cores=len(os.sched_getaffinity(0)), free=free, jobs=os.environ.get("BUGMATRIX_JOBS") or None)
        lean = lean_needed(chosen.jobs)  # at the start: auto may turn lean as the run fills the disk
        command = [sys.executable, "-m", "bugmatrix", "--matrix", str(root / "matrix.toml"), "--cases", str(root / "cases")]
        received = received_bytes()
        load = os.getloadavg()[0]
        with DiskPeak(Path(tmp)) as disk:
            wall = timed([*command, "run", "--profile", "full", "--jobs", str(chosen.jobs), "--no-reuse"], env, cwd=root)
            wall += timed_nox(root, env, "-s", "report-full")
        downloaded = (received_bytes() - received) / 1e9
        ran = len(list((Path(tmp) / "runs").glob("*.json")))
        start = f"; the uv cache held {held} of its {wanted} heavy wheels at the start" if cells else ""
        mode = "lean" if lean else "kept (auto: lean once the disk needs it)"
        what = f"bugmatrix run --profile full --jobs {chosen.jobs}, {mode} environments{start}; load average {load:.1f} at the start"
        network = "this machine's network interfaces, all traffic"
        rows = [
            Measurement(f"full profile, {how}: wall ({ran} cells)", wall / 60, None, "min", note=what),
            Measurement(f"full profile, {how}: bytes received", downloaded, None, "GB", note=network),
            Measurement(f"full profile, {how}: most disk added at once", disk.added_gib, None, "GiB", note="sampled every 5 s"),
        ]
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("uv-cache"))
        if not cold:  # the floor builds from the warm cache the run used
            with mock.patch.dict(os.environ, {"UV_CACHE_DIR": str(own)}) if own is not None else contextlib.nullcontext():
                floors = _measure_floors(root, matrix, catalog, cells, Path(tmp) / "runs")
            rows += floor_rows(f"full profile, {how}", wall, floors, chosen.jobs)
    return rows


#: pip as uv sees the world: PyPI only. This machine's pip config adds a local wheel dir and a torch cap.
PIP_KEEP = {"PIP_CERT", "PIP_DEFAULT_TIMEOUT"}
PRIMED = ".bugmatrix-primed"


def _uv_build(root: Path, matrix: Matrix, cell: Cell, venv: Path, cache: Path) -> tuple[float, Environment]:
    """The runner's build of ``cell`` into a new ``venv`` with ``cache`` as uv's cache: (seconds, the environment)."""
    with mock.patch.dict(os.environ, {"UV_CACHE_DIR": str(cache)}):  # the runner's uv commands inherit the environment
        start = time.perf_counter()
        environment = prepare(matrix, CellSpec.of(cell), root=root, venv=venv)
        return time.perf_counter() - start, environment


def _pip_build(venv: Path, python: str, install: Sequence[str], modules: Sequence[str], cache: Path) -> float:
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
    _pip_build(scratch / "pip-prime", python, install, modules, cache)
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
        uv_cold, environment = _uv_build(root, matrix, cell, base / "uv-cold", base / "uv-cache")
        uv_warm, _ = _uv_build(root, matrix, cell, base / "uv-warm", base / "uv-cache")
        # pip installs the lock the runner used (exactly those distributions), else the requirements
        install = ["--require-hashes", "--no-deps", "-r", str(environment.lock)] if environment.lock else matrix.requirements_for(cell.pins)
        if quick:
            pip_cache, note = primed_pip_cache(root, base, cell.python, install, modules)
            cold = Measurement(cold_name, uv_cold, None, "s", note="pip cold skipped (--quick); uv cold measured")
        else:
            pip_cache, note = base / "pip-cache", ""
            pip_cold = _pip_build(base / "pip-cold", cell.python, install, modules, pip_cache)
            cold = Measurement(cold_name, uv_cold, pip_cold, "s", ">=", 2, speedup=True)
        pip_warm = _pip_build(base / "pip-warm", cell.python, install, modules, pip_cache)
        if not any(p.is_file() and p.name != PRIMED for p in pip_cache.rglob("*")):
            note = "pip cached nothing (index sent no cache headers): warm pip downloaded again"
    locked = f"both from {environment.lock.name}" if environment.lock else "both unlocked (no current lock)"
    notes = [note, "pip from PyPI like uv (PIP_CONFIG_FILE=/dev/null)", locked, "both import-checked"]
    return [cold, Measurement(warm_name, uv_warm, pip_warm, "s", ">=", 10, speedup=True, note="; ".join(filter(None, notes)))]


def disk_kib(paths: Sequence[Path]) -> int:
    """KiB used by ``paths`` together: one ``du`` invocation counts a hard-linked inode once."""
    out = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def _heavy_release(venv: Path) -> str:
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
        by_release.setdefault(_heavy_release(env), []).append(env)
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
