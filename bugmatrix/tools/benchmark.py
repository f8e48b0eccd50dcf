"""``nox -s benchmark``: what a matrix run costs, against its floor and the alternatives.

A nightly matrix of dozens of pinned environments lives or dies by how fast
they are built, reused and stored, so every number is printed as a ratio, all
measured in one run on the same machine:

* **env build, uv vs virtualenv+pip**, cold (fresh empty caches: the first CI
  run, or a new torch release) and warm (populated cache, new venv: every new
  cell after the first). pip runs with ``PIP_CONFIG_FILE=/dev/null`` and no
  ``PIP_*`` index settings, so both tools install the same wheels from PyPI;
* **a cell re-run with its env reused vs its floor** (importing the stack once
  plus the variants' own ``duration_s``): the harness's own overhead, which a
  bisect or a stability run pays on every step;
* **the smoke profile's wall time vs the sum of its cells' floors**: measured
  with ``--smoke``, else read from the last run's run files (pytest only);
* **the report for 1,000 cells x 20 variants**: the full profile must stay
  cheap to render on every push;
* **disk of all cell envs vs one** (and vs one env per torch release): uv
  hard-links from its cache, so cells that share wheels share inodes (``du``
  counts each inode once per invocation); 20 envs must not cost 20 copies.
"""

from __future__ import annotations

import argparse
import datetime as dt
import operator
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import Cell, find_cell, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.command import cell_env, pytest_command
from bugmatrix.run.envbuild import cell_venv, find_interpreter, uv_command
from bugmatrix.tools.stability import cell_python

__all__ = ["CommandFailed", "Measurement", "disk_kib", "format_table", "main", "skipped", "smoke_floor", "smoke_from_runs"]

OPS = {"<": operator.lt, "<=": operator.le, ">=": operator.ge}
#: pip as uv sees the world: PyPI only. This machine's pip config adds a local wheel dir and a torch cap.
PIP_KEEP = {"PIP_CERT", "PIP_DEFAULT_TIMEOUT"}
PRIMED = ".bugmatrix-primed"


class CommandFailed(Exception):
    """A measured command exited non-zero; the message is its last words."""


@dataclass(frozen=True)
class Measurement:
    """One row: a value against its baseline, and the bound its ratio must meet.

    ``speedup`` rows compare how many times faster the value is (baseline / value);
    the others how much the value costs over its baseline (value / baseline).
    A row without a value says in ``note`` why it was not measured.
    """

    name: str
    value: float | None
    baseline: float | None
    unit: str
    op: str = ""  # "<", "<=", ">=", or "" for no target
    bound: float = 0.0
    speedup: bool = False
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.value or not self.baseline:
            return None
        return self.baseline / self.value if self.speedup else self.value / self.baseline

    @property
    def target(self) -> str:
        return f"{self.op} {self.bound:g}x" if self.op else ""

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None or not self.op else OPS[self.op](self.ratio, self.bound)


def skipped(name: str, why: str) -> Measurement:
    """A row that was not measured, saying why."""
    return Measurement(name, None, None, "", note=why)


def format_table(rows: Sequence[Measurement]) -> str:
    """An aligned table: measurement | value | baseline | ratio | target | met? | note."""

    def amount(x: float | None, unit: str) -> str:
        return "-" if x is None else f"{x:.2f} {unit}"

    cells = [
        (r.name, amount(r.value, r.unit), amount(r.baseline, r.unit), "-" if r.ratio is None else f"{r.ratio:.2f}x",
         r.target or "-", {True: "yes", False: "NO", None: "-"}[r.met], r.note)
        for r in rows
    ]  # fmt: skip
    head = ("measurement", "value", "baseline", "ratio", "target", "met?", "note")
    widths = [max(len(row[i]) for row in [head, *cells]) for i in range(len(head) - 1)]
    lines = []
    for row in [head, *cells]:
        left = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True))]
        lines.append("  ".join([*left, row[4].ljust(widths[4]), row[5].ljust(widths[5]), row[6]]).rstrip())
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def disk_kib(paths: Sequence[Path]) -> int:
    """KiB used by ``paths`` together: one ``du`` invocation counts a hard-linked inode once."""
    out = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def _timed(command: Sequence[str], env: Mapping[str, str] | None = None, ok: tuple[int, ...] = (0,), cwd: Path | None = None) -> float:
    """Wall seconds of ``command`` (run with exactly ``env`` when given)."""
    start = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, env=dict(env or os.environ), cwd=cwd, check=False)
    if done.returncode not in ok:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        msg = f"{' '.join([Path(command[0]).name, *command[1:3]])} exited {done.returncode}: {tail}"
        raise CommandFailed(msg)
    return time.perf_counter() - start


def _pip_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_KEEP}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": str(cache)}


def uv_build(venv: Path, python: str, requirements: Sequence[str], cache: Path) -> float:
    """``uv venv`` + ``uv pip install`` into a new venv, with ``cache`` as uv's cache."""
    env = {**os.environ, "UV_CACHE_DIR": str(cache)}
    made = _timed([*uv_command(), "venv", "-q", "--no-python-downloads", "-p", find_interpreter(python), str(venv)], env)
    return made + _timed([*uv_command(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *requirements], env)


def pip_build(venv: Path, python: str, requirements: Sequence[str], cache: Path) -> float:
    """``python -m virtualenv`` + ``pip install`` into a new venv, with ``cache`` as pip's cache."""
    env = _pip_env(cache)
    interpreter = shutil.which(f"python{python}") or sys.executable
    made = _timed([sys.executable, "-m", "virtualenv", "-q", "-p", interpreter, str(venv)], env)
    return made + _timed([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *requirements], env)


def primed_pip_cache(root: Path, scratch: Path, python: str, requirements: Sequence[str]) -> tuple[Path, str]:
    """``--quick``'s pip cache, kept in ``.nox/benchmark-cache/pip``; an unmeasured install fills it once per requirement set."""
    cache = root / ".nox" / "benchmark-cache" / "pip"
    cache.mkdir(parents=True, exist_ok=True)
    primed, wanted = cache / PRIMED, " ".join(requirements)
    if wanted in (primed.read_text(encoding="utf-8").splitlines() if primed.exists() else []):
        return cache, "--quick: pip cache kept in .nox/benchmark-cache"
    pip_build(scratch / "pip-prime", python, requirements, cache)
    with primed.open("a", encoding="utf-8") as handle:
        handle.write(wanted + "\n")
    return cache, "--quick: pip cache filled first by an unmeasured install"


def measure_builds(root: Path, cell: Cell, requirements: Sequence[str], quick: bool) -> list[Measurement]:
    """uv vs virtualenv+pip for one cell: cold (fresh caches) and warm (populated caches, new venvs); ``quick``: no cold pip."""
    cold_name, warm_name = "env build, cold cache: uv vs virtualenv+pip", "env build, warm cache, new venv: uv vs virtualenv+pip"
    (root / ".nox").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-", dir=root / ".nox") as tmp:  # ~15 GB: a disk, not a tmpfs /tmp
        base = Path(tmp)
        uv_cold = uv_build(base / "uv-cold", cell.python, requirements, base / "uv-cache")
        uv_warm = uv_build(base / "uv-warm", cell.python, requirements, base / "uv-cache")
        if quick:
            pip_cache, note = primed_pip_cache(root, base, cell.python, requirements)
            cold = Measurement(cold_name, uv_cold, None, "s", note="pip cold skipped (--quick); uv cold measured")
        else:
            pip_cache, note = base / "pip-cache", ""
            pip_cold = pip_build(base / "pip-cold", cell.python, requirements, pip_cache)
            cold = Measurement(cold_name, uv_cold, pip_cold, "s", ">=", 2, speedup=True)
        pip_warm = pip_build(base / "pip-warm", cell.python, requirements, pip_cache)
        if not any(p.is_file() and p.name != PRIMED for p in pip_cache.rglob("*")):
            note = "pip cached nothing (index sent no cache headers): warm pip downloaded again"
    notes = [note, "pip from PyPI like uv (PIP_CONFIG_FILE=/dev/null)"]
    return [cold, Measurement(warm_name, uv_warm, pip_warm, "s", ">=", 10, speedup=True, note="; ".join(filter(None, notes)))]


def import_seconds(python: Path, modules: Sequence[str]) -> float:
    """Wall time of importing the cell's stack once, in a fresh interpreter."""
    return _timed([str(python), "-c", "import " + ", ".join(modules)])


def smoke_floor(run: RunRecord, imports: float) -> float:
    """What a cell cannot go below: importing its stack plus its variants' own time."""
    return imports + sum(r.duration_s for r in run.results)


def measure_reuse(root: Path, matrix: Matrix, cell: Cell) -> Measurement:
    """A cell re-run with its env reused vs the floor (import + the variants' ``duration_s``)."""
    python = cell_python(root, matrix, cell)
    imports = import_seconds(python, matrix.import_modules(cell.pins))
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        run_file = Path(tmp) / "run.json"
        wall = _timed(
            pytest_command(python, matrix, cell_id=cell.id, pins=cell.pins, run_file=run_file, root=root), cell_env(root), ok=(0, 1)
        )  # 1: an outcome differs; still a full run
        floor = smoke_floor(load_run_file(run_file), imports)
    return Measurement(
        f"cell re-run, env reused ({cell.id}) vs floor", wall, floor, "s", "<=", 1.5, note=f"floor: import {imports:.1f}s + variants"
    )


def _wall(run: RunRecord) -> float | None:
    try:
        return (dt.datetime.fromisoformat(run.finished) - dt.datetime.fromisoformat(run.started)).total_seconds()
    except ValueError:
        return None


def smoke_from_runs(root: Path, matrix: Matrix, cells: Sequence[Cell], runs_dir: Path, wall: float | None, how: str) -> Measurement:
    """Smoke wall time (given, or the run files' started..finished) vs the sum of the cells' floors."""
    name = f"smoke profile ({len(cells)} cells) vs sum of floors"
    walls, floors, missing = 0.0, 0.0, []
    for cell in cells:
        path, python = runs_dir / f"{cell.id}.json", cell_venv(root, cell.id) / "bin" / "python"
        run = load_run_file(path) if path.exists() else None
        seconds = _wall(run) if run else None
        if run is None or seconds is None or not python.exists():
            missing.append(cell.id)
            continue
        walls += seconds
        floors += smoke_floor(run, import_seconds(python, matrix.import_modules(cell.pins)))
    if missing:
        return skipped(name, f"no finished run file or env for {', '.join(missing)}: run nox -t smoke, or pass --smoke")
    return Measurement(name, wall if wall is not None else walls, floors, "s", "<=", 2, note=how)


def measure_smoke(root: Path, matrix: Matrix, cells: Sequence[Cell]) -> Measurement:
    """``nox -t smoke`` end to end (envs reused, report included) into a temporary reports dir."""
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp}
        wall = _timed([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-t", "smoke"], env, cwd=root)
        return smoke_from_runs(root, matrix, cells, Path(tmp) / "runs", wall, "nox -t smoke measured now (--smoke)")


class DiskPeak:
    """Samples the disk in use (and the uv cache's filesystem) in a thread; ``peak`` - ``start`` is what a run added."""

    def __init__(self, path: Path, every: float = 5.0) -> None:
        self.path, self.every = path, every
        self.start = self.peak = shutil.disk_usage(path).used
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="disk-peak", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, shutil.disk_usage(self.path).used)

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, shutil.disk_usage(self.path).used)

    @property
    def added_gib(self) -> float:
        return (self.peak - self.start) / 2**30


def cached_torch_sets(cache: Path, cells: Sequence[Cell]) -> tuple[int, int]:
    """How many of the cells' (torch, Python) wheels uv's cache holds unpacked, of how many.

    Read from uv's cache layout (``wheels-v*/pypi/torch/<version>-cp<XY>-<platform>/``,
    uv 0.5 and later); a layout it does not recognise reads as none held. It says how
    warm a "warm" run really was: the full profile's wheels (~34 GB zipped) do not
    fit beside everything else on a developer machine, so some are always fetched.
    """
    wanted = {(c.pins["torch"], c.python.replace(".", "")) for c in cells if "torch" in c.pins}
    unpacked = [p.name for p in cache.glob("wheels-v*/pypi/torch/*") if p.is_dir()]
    held = {(torch, py) for torch, py in wanted if any(name.startswith(f"{torch}-cp{py}-") for name in unpacked)}
    return len(held), len(wanted)


def _uv_cache_dir(env: Mapping[str, str]) -> Path:
    found = subprocess.run([*uv_command(), "cache", "dir"], capture_output=True, text=True, env=dict(env), check=False)
    return Path(found.stdout.strip())


def measure_full(root: Path, cold: bool, cells: Sequence[Cell] = ()) -> list[Measurement]:
    """``BUGMATRIX_DISK=lean nox -t full`` end to end: wall time and the most disk it added at any moment.

    Cold: an empty uv cache of its own (every wheel downloaded) and no cell venvs; warm: the
    machine's uv cache as it is (the row says how many of the profile's torch wheels it held).
    Lean either way: the full profile's ~18 torch wheel sets do not fit on this machine at
    once (see bugmatrix/run/diskbudget.py).
    """
    how = "cold (empty uv cache)" if cold else "warm (this machine's uv cache)"
    with tempfile.TemporaryDirectory(prefix="bugmatrix-bench-full-") as tmp:
        env = {**os.environ, "BUGMATRIX_REPORTS": tmp, "BUGMATRIX_DISK": "lean"}
        if cold:
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            for venv in (root / ".nox").glob("cell-*"):
                shutil.rmtree(venv, ignore_errors=True)
        held, wanted = cached_torch_sets(_uv_cache_dir(env), cells)
        with DiskPeak(Path(tmp)) as disk:
            wall = _timed([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-t", "full"], env, cwd=root, ok=(0, 1))
        ran = len(list((Path(tmp) / "runs").glob("*.json")))
    start = f"; the uv cache held {held} of its {wanted} torch wheels at the start" if cells else ""
    return [
        Measurement(f"full profile, {how}: wall ({ran} cells)", wall / 60, None, "min", note=f"BUGMATRIX_DISK=lean nox -t full{start}"),
        Measurement(f"full profile, {how}: most disk added at once", disk.added_gib, None, "GiB", note="sampled every 5 s"),
    ]


SYNTHETIC_OUTCOMES = ("reproduced", "fixed", "fixed", "different", "skipped", "crashed", "timeout")


def _synthetic_record(cell: int, variant: int) -> VariantRecord:
    outcome = SYNTHETIC_OUTCOMES[(cell + variant) % len(SYNTHETIC_OUTCOMES)]
    kind = ("core", "framework", "workaround", "core")[variant % 4]
    return VariantRecord(
        id=f"case{variant // 4}::v{variant}[cpu]", case=f"case{variant // 4}", variant=f"v{variant}", device="cpu", kind=Kind(kind),
        workaround_for=f"v{variant - 2}" if kind == "workaround" else None, outcome=Outcome(outcome), expected=Outcome.REPRODUCED,
        verdict=Verdict("as-expected" if outcome == "reproduced" else "unexpected-fix" if outcome == "fixed" else "new-failure-mode"),
        signature_matched=outcome == "reproduced", message=f"RuntimeError: <mat1> & mat2 must have the same dtype ({cell})",
        duration_s=0.1, evidence="https://github.com/pytorch/pytorch/issues/1", log="" if outcome == "fixed" else "Traceback ...\n" * 40,
    )  # fmt: skip


def synthetic_runs(cells: int = 1000, variants: int = 20) -> list[RunRecord]:
    """A full-profile-sized set of run files: every outcome and verdict, log tails on failures."""
    return [
        RunRecord(
            cell=f"py311-torch2.{i % 16}.0-pl2.{i // 16 % 10}.0-tf4.{i // 160}.0", pins={"python": "3.11", "torch": f"2.{i % 16}.0"},
            environment={"python": "3.11.7", "torch": f"2.{i % 16}.0", "platform": "linux"},
            started="2026-01-01T00:00:00+00:00", finished="2026-01-01T00:00:09+00:00",
            results=[_synthetic_record(i, j) for j in range(variants)],
        )
        for i in range(cells)
    ]  # fmt: skip


def measure_report() -> Measurement:
    """merge_runs + render_html for 1,000 cells x 20 variants, against the 1 s budget."""
    name = "report: merge + render 1,000 cells x 20 variants vs 1 s"
    try:
        from bugmatrix.report.merge import merge_runs
        from bugmatrix.report.night import analyse
        from bugmatrix.report.render_html import render_html
    except ImportError as exc:
        return skipped(name, f"report renderer not importable ({exc}); needs bugmatrix/report/merge.py, night.py and render_html.py")
    runs = synthetic_runs()
    start = time.perf_counter()
    render_html(analyse(merge_runs(runs, profile="full", commit="benchmark", generated="2026-01-01T00:00:00+00:00")))
    return Measurement(name, time.perf_counter() - start, 1.0, "s", "<", 1)


def measure_report_with_history(nights: int = 90) -> Measurement:
    """What ``report`` does each night at scale: merge, read and extend 90 nights of history, pictures, page and compat.md.

    The history file is written beforehand (not timed): reading it back is part
    of every night's cost, building it is not.
    """
    name = f"report: 1,000 cells x 20 variants with {nights} nights of history (merge, releases, history, pictures, html, md) vs 1 s"
    from bugmatrix.report.history import Night, append_night, load_history, night_from_compat, write_history
    from bugmatrix.report.merge import merge_runs
    from bugmatrix.report.night import analyse
    from bugmatrix.report.render_html import render_html
    from bugmatrix.report.render_md import render_markdown

    runs = synthetic_runs()
    first = dt.date(2026, 1, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        night = night_from_compat(merge_runs(runs, profile="full", commit="past", generated="2026-01-01T00:00:00+00:00"), "")
        past = [Night((first + dt.timedelta(days=i)).isoformat(), "past", "full", night.cells, night.outcomes) for i in range(nights - 1)]
        write_history(path, past)
        start = time.perf_counter()
        compat = merge_runs(runs, profile="full", commit="benchmark", generated="2026-04-01T00:00:00+00:00")
        kept = append_night(load_history(path), night_from_compat(compat, (first + dt.timedelta(days=nights - 1)).isoformat()))
        report = analyse(compat, None, kept)  # releases, moved, agreement, pictures, history: once, for every view
        render_html(report)
        render_markdown(report)
        write_history(path, kept)
        elapsed = time.perf_counter() - start
    return Measurement(name, elapsed, 1.0, "s", "<", 1)


def torch_release(venv: Path) -> str:
    """The torch version installed in ``venv`` (from its dist-info), or "" when there is none."""
    found = sorted(venv.glob("lib/python*/site-packages/torch-*.dist-info"))
    return found[0].name.removeprefix("torch-").removesuffix(".dist-info") if found else ""


def measure_disk(root: Path) -> list[Measurement]:
    """Disk of all cell envs vs one; of the envs sharing one torch vs one; of all vs one env per torch.

    Hard links share identical files only: cells on different torch releases carry
    different torch and CUDA wheels, so the whole matrix's floor is one env per torch.
    """
    envs = sorted(p for p in (root / ".nox").glob("cell-*") if (p / "bin" / "python").exists())
    if len(envs) < 2:
        return [skipped("disk: cell envs vs one", f"{len(envs)} cell env(s) in .nox; run nox -t smoke first")]
    each = {env: disk_kib([env]) / 1024 for env in envs}
    by_torch: dict[str, list[Path]] = {}
    for env in envs:
        by_torch.setdefault(torch_release(env), []).append(env)
    torch, shared = max(by_torch.items(), key=lambda item: len(item[1]))
    together = disk_kib(envs) / 1024
    floor = disk_kib([max(group, key=each.__getitem__) for group in by_torch.values()]) / 1024  # their shared files once, too
    return [
        Measurement(f"disk: all {len(envs)} cell envs vs the largest one", together, max(each.values()), "MiB", "<", 2,
                    note=f"N={len(envs)} on {len(by_torch)} torch releases; target set for 20 envs"),
        Measurement(f"disk: {len(shared)} cell envs on torch {torch} vs one", disk_kib(shared) / 1024, max(each[e] for e in shared), "MiB", "<", 2,
                    note="what uv's hard links share"),
        Measurement(f"disk: all {len(envs)} cell envs vs one env per torch ({len(by_torch)})", together, floor, "MiB", "<=", 1.5),
    ]  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nox -s benchmark --", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--cell", help="cell for the build and reuse measurements (default: the smoke CPU cell with the fewest packages)")
    parser.add_argument("--quick", action="store_true", help="skip the cold pip build (a cold CUDA torch install downloads ~3 GB)")
    parser.add_argument("--smoke", action="store_true", help="time `nox -t smoke` now instead of reading the last run's run files")
    parser.add_argument(
        "--full", choices=("cold", "warm", "both"), help="also run the whole full profile (about an hour each; cold downloads every wheel)"
    )
    parser.add_argument("--skip-builds", action="store_true", help="skip the uv vs virtualenv+pip builds altogether")
    parser.add_argument(
        "--out", type=Path, help="where the JSON goes (default: <output>/benchmark.json; the committed one is reports/benchmark.json)"
    )
    return parser


def measure_ci_cache(matrix: Matrix, catalog: Catalog) -> list[Measurement]:
    """What a cold nightly downloads, and what its uv caches hold against GitHub's 10 GB (resolved, not downloaded)."""
    from bugmatrix.tools.cachesize import GB, cache_key, measure

    cells = plan_cells(matrix, "nightly", catalog)
    size = measure((cache_key(c.pins), matrix.requirements_for(c.pins), c.python) for c in cells)
    note = f"{len(cells)} jobs, {len(size.per_key)} cache keys, {size.files} distinct files"
    return [
        Measurement("nightly cold download, every job", size.jobs_bytes / GB, None, "GB", note=note),
        Measurement("nightly distinct files", size.total_bytes / GB, None, "GB"),
        Measurement("uv caches, one per torch release", size.cached_bytes / GB, None, "GB"),
        Measurement("same, CUDA runtime wheels trimmed (saved)", size.kept_bytes / GB, 10.0, "GB", op="<", bound=1.0,
                    note="baseline: GitHub's 10 GB per repository"),
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, write <output>/benchmark.json (after every row, so a failure loses nothing)."""
    args = _parser().parse_args(argv)
    root, out = args.root, args.out or output_dir() / "benchmark.json"
    try:
        matrix = load_resolved_matrix(root / "matrix.toml")
        catalog = load_catalog(root / "cases", matrix)  # imports every case module: once, for every step
        smoke = [c for c in plan_cells(matrix, "smoke", catalog) if c.device == "cpu"]
        cell = find_cell(smoke, args.cell) if args.cell else min(smoke, key=lambda c: len(matrix.requirements_for(c.pins)))
    except BugmatrixError as exc:
        print(f"bugmatrix: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE

    def smoke_row() -> list[Measurement]:
        if args.smoke:
            return [measure_smoke(root, matrix, smoke)]
        return [smoke_from_runs(root, matrix, smoke, output_dir() / "runs", None, "from the last run (run files: pytest only)")]

    def build_rows() -> list[Measurement]:
        if args.skip_builds:
            return [skipped("env builds: uv vs virtualenv+pip", "skipped (--skip-builds)")]
        return measure_builds(root, cell, matrix.requirements_for(cell.pins), args.quick)

    steps: list[tuple[str, Callable[[], list[Measurement]]]] = [
        ("env builds", build_rows),
        ("cell re-run", lambda: [measure_reuse(root, matrix, cell)]),
        ("smoke profile", smoke_row),
        ("report", lambda: [measure_report(), measure_report_with_history()]),
        ("disk", lambda: measure_disk(root)),
        ("nightly download and CI cache", lambda: measure_ci_cache(matrix, catalog)),
    ]
    if args.full:
        kinds = {"cold": (True,), "warm": (False,), "both": (True, False)}[args.full]
        full = [c for c in plan_cells(matrix, "full", catalog) if c.device == "cpu"]
        steps += [(f"full profile ({'cold' if c else 'warm'})", lambda c=c: measure_full(root, c, full)) for c in kinds]
    rows: list[Measurement] = []
    for label, measure in steps:
        print(f"benchmark: {label} ...", flush=True)
        try:
            rows += measure()
        except (CommandFailed, BugmatrixError, subprocess.CalledProcessError) as exc:
            rows.append(skipped(label, f"failed: {exc}"))
        write_json_atomic(out, {
            "cell": cell.id, "quick": args.quick, "cores": os.cpu_count(),
            "rows": [asdict(r) | {"ratio": r.ratio and round(r.ratio, 3), "met": r.met} for r in rows],
        })  # fmt: skip
    print(format_table(rows))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
