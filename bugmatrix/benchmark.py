"""``nox -s benchmark``: what a matrix run costs, against its floor and the alternatives.

A nightly matrix of dozens of environments lives or dies by environment build
and start-up cost, so each number is printed as a ratio in one run:

* env build, uv vs nox's default virtualenv+pip, cold (empty caches) and warm
  (populated cache, new venv): uv hard-links from its cache, pip copies;
* a re-run of a cell with its env reused vs the floor (importing the stack once
  plus the variants' own compute time): the harness's overhead;
* the smoke profile's wall time vs the sum of its cells' floors (``--smoke``);
* rendering the report for 1,000 cells x 20 variants;
* disk used by all cell envs vs one (hard links are counted once by ``du``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bugmatrix.bisect import env_dir
from bugmatrix.discover import discover_variants, projections
from bugmatrix.envbuild import prepare_environment, uv_command
from bugmatrix.matrix import load_matrix
from bugmatrix.plan import Cell, find_cell, import_modules, plan_cells, requirements_for
from bugmatrix.runfile import RunRecord, VariantRecord, load_run_file, write_json_atomic

__all__ = ["Measurement", "disk_kib", "format_table", "main"]


@dataclass(frozen=True)
class Measurement:
    """One row: a value against its baseline, and the target for the ratio."""

    name: str
    value: float
    baseline: float
    unit: str
    target: str  # e.g. ">= 10" (baseline/value) or "<= 1.5" (value/baseline)

    @property
    def ratio(self) -> float:
        speedup = self.target.startswith(">=")
        return (self.baseline / self.value if speedup else self.value / self.baseline) if self.value and self.baseline else float("nan")

    @property
    def met(self) -> bool:
        op, bound = self.target.split()
        return self.ratio >= float(bound) if op == ">=" else self.ratio <= float(bound)


def format_table(rows: Sequence[Measurement]) -> str:
    """An aligned text table: measurement | value | baseline | ratio | target | met."""
    head = f"{'measurement':52} {'value':>10} {'baseline':>10} {'ratio':>8}  {'target':8} met"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.name:52} {r.value:>8.2f}{r.unit:2} {r.baseline:>8.2f}{r.unit:2} {r.ratio:>7.1f}x  {r.target:8} {'yes' if r.met else 'NO'}"
        )
    return "\n".join(lines)


def disk_kib(paths: Sequence[Path]) -> int:
    """KiB used by ``paths`` together; ``du`` counts a hard-linked file once per invocation."""
    out = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def _timed(command: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    """Wall time of a command that must succeed; on failure, its own last words."""
    start = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        msg = f"{command[0]} ... exited {done.returncode}: {' / '.join(tail)}"
        raise RuntimeError(msg)
    return time.perf_counter() - start


def measure_builds(cell: Cell, requirements: list[str], quick: bool) -> list[Measurement]:
    """uv vs virtualenv+pip for one cell, warm (and cold unless ``quick``)."""
    uv, rows = uv_command(), []
    pip_env = {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # plain PyPI, like uv
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        uv_cache, pip_cache = base / "uv-cache", base / "pip-cache"

        def uv_build(name: str, cache: Path | None) -> float:
            env = {"UV_CACHE_DIR": str(cache)} if cache else {}
            return _timed([*uv, "venv", "-q", "-p", cell.python, str(base / name)], env) + _timed(
                [*uv, "pip", "install", "-q", "--python", str(base / name / "bin" / "python"), *requirements], env
            )

        def pip_build(name: str) -> float:
            env = {**pip_env, "PIP_CACHE_DIR": str(pip_cache)}
            python = shutil.which(f"python{cell.python}") or sys.executable
            return _timed([sys.executable, "-m", "virtualenv", "-q", "-p", python, str(base / name)], env) + _timed(
                [str(base / name / "bin" / "python"), "-m", "pip", "install", "-q", *requirements], env
            )

        if not quick:
            uv_cold = uv_build("uv-cold", uv_cache)
            pip_cold = pip_build("pip-cold")
            rows.append(Measurement("env build, cold cache: uv vs virtualenv+pip", uv_cold, pip_cold, "s", ">= 1"))
            uv_warm = uv_build("uv-warm", uv_cache)
            pip_warm = pip_build("pip-warm")
        else:
            uv_warm = uv_build("uv-warm", None)  # the shared cache, warm from earlier cells
            pip_build("pip-prime")  # fills the private pip cache first
            pip_warm = pip_build("pip-warm")
        rows.append(Measurement("env build, warm cache, new venv: uv vs virtualenv+pip", uv_warm, pip_warm, "s", ">= 10"))
    return rows


def measure_reuse(root: Path, cell: Cell, python: Path) -> Measurement:
    """A cell re-run with its env reused vs import + the variants' own time."""
    modules = ",".join(import_modules(load_matrix(root / "matrix.toml"), cell.pins))
    imports = _timed([str(python), "-c", f"import {modules}"])
    with tempfile.TemporaryDirectory() as tmp:
        run_file = Path(tmp) / "run.json"
        wall = _timed(
            [str(python), "-m", "pytest", str(root / "cases"), "-q", "-p", "no:cacheprovider", "-n", os.environ.get("BUGMATRIX_WORKERS", "2"),
             "--bugmatrix-axes", ",".join(cell.axes), "--bugmatrix-run-file", str(run_file)],
            {"PYTHONPATH": str(root)},
        )  # fmt: skip
        compute = sum(r.duration_s for r in load_run_file(run_file).results)
    return Measurement(f"cell re-run, env reused ({cell.id}) vs floor", wall, imports + compute, "s", "<= 1.5")


def measure_smoke(root: Path, cells: list[Cell]) -> Measurement:
    """``nox -t smoke`` (cells only) wall time vs the sum of their floors."""
    wall = _timed([sys.executable, "-m", "nox", "-t", "smoke", "-k", "cell"], {"BUGMATRIX_REPORTS": tempfile.mkdtemp()}, cwd=root)
    floors = 0.0
    for cell in cells:
        measured = measure_reuse(root, cell, env_dir(root, cell.pins) / "bin" / "python")
        floors += measured.baseline
    return Measurement(f"smoke profile ({len(cells)} cells, envs reused) vs sum of floors", wall, floors, "s", "<= 2")


def measure_report() -> Measurement:
    """merge + render for 1,000 cells x 20 variants, against the 1 s budget."""
    from bugmatrix.report.merge import merge_runs
    from bugmatrix.report.render_html import render_html

    runs = [
        RunRecord(cell=f"c{i:04d}", pins={"torch": "2.5.1"}, environment={}, started="", finished="", results=[
            VariantRecord(id=f"case::v{j:02d}[cpu]", case="case", variant=f"v{j:02d}", device="cpu", kind="core", workaround_for=None,
                          outcome="fixed" if (i + j) % 3 else "reproduced", expected=None, verdict="new", signature_matched=False,
                          message="m", duration_s=0.1)
            for j in range(20)
        ])
        for i in range(1000)
    ]  # fmt: skip
    start = time.perf_counter()
    render_html(merge_runs(runs, profile="full", commit="bench", generated="now"), [])
    return Measurement("report for 1,000 cells x 20 variants vs 1 s budget", time.perf_counter() - start, 1.0, "s", "<= 1")


def measure_disk(root: Path) -> list[Measurement]:
    """Disk of cell envs: those sharing one torch vs one env, and all vs one env per torch.

    Hard links can only share identical files: cells on different torch releases
    carry different CUDA libraries, so the floor for the whole matrix is one
    env per distinct torch, not one env.
    """
    envs = sorted(p for p in (root / ".nox").glob("cell-*") if (p / "bin" / "python").exists())
    groups: dict[str, list[Path]] = {}
    for env in envs:
        match = re.search(r"-torch(\d+-\d+-\d+)", env.name)
        groups.setdefault(match.group(1) if match else env.name, []).append(env)
    if not groups:
        return []
    torch, shared = max(groups.items(), key=lambda item: len(item[1]))
    rows = []
    if len(shared) > 1:
        one = max(disk_kib([e]) for e in shared)
        rows.append(
            Measurement(
                f"disk: {len(shared)} cell envs on torch {torch.replace('-', '.')} vs one",
                disk_kib(shared) / 1024,
                one / 1024,
                "Mi",
                "<= 2",
            )
        )
    floor = sum(max(disk_kib([e]) for e in group) for group in groups.values())
    rows.append(
        Measurement(
            f"disk: all {len(envs)} cell envs vs one env per torch ({len(groups)})", disk_kib(envs) / 1024, floor / 1024, "Mi", "<= 1.5"
        )
    )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, write reports/benchmark.json."""
    parser = argparse.ArgumentParser(prog="nox -s benchmark --", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--cell", help="cell for the build and reuse measurements (default: smallest smoke cell)")
    parser.add_argument("--quick", action="store_true", help="skip the cold-cache builds (~3 GB of downloads each)")
    parser.add_argument("--smoke", action="store_true", help="also time the whole smoke profile")
    parser.add_argument("--skip-builds", action="store_true", help="skip the uv vs pip env builds")
    args = parser.parse_args(argv)
    root = args.root
    matrix = load_matrix(root / "matrix.toml")
    smoke = [c for c in plan_cells(matrix, "smoke", projections(discover_variants(root / "cases"))) if c.device == "cpu"]
    cell = find_cell(smoke, args.cell) if args.cell else min(smoke, key=lambda c: len(c.pins))
    venv = env_dir(root, cell.pins)
    if not (venv / "bin" / "python").exists():
        subprocess.run([*uv_command(), "venv", "-q", "-p", cell.python, str(venv)], check=True)
    prepare_environment(venv, requirements_for(matrix, cell.pins), import_modules(matrix, cell.pins))

    rows: list[Measurement] = []
    out = root / "reports" / "benchmark.json"

    def record(*measured: Measurement | None) -> None:
        """Keep every number as soon as it exists: a later step failing loses nothing."""
        rows.extend(m for m in measured if m is not None)
        for m in measured:
            if m is not None:
                print(f"  measured: {m.name}: {m.value:.2f}{m.unit} vs {m.baseline:.2f}{m.unit}", flush=True)
        write_json_atomic(out, {
            "cell": cell.id, "quick": args.quick, "machine": f"{os.cpu_count()} cores",
            "rows": [asdict(r) | {"ratio": round(r.ratio, 2), "met": r.met} for r in rows],
        })  # fmt: skip

    if not args.skip_builds:
        record(*measure_builds(cell, requirements_for(matrix, cell.pins), args.quick))
    record(measure_reuse(root, cell, venv / "bin" / "python"))
    record(measure_report())
    record(*measure_disk(root))
    if args.smoke:
        record(measure_smoke(root, smoke))
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
