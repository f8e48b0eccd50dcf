"""The one way to run a cell (lock, environment, import check, pytest, run file, cleanup) for every path that runs cases
in a cell's environment (the ``cell``/``system`` sessions, bisect, stability, the benchmark, repro): the steps cannot drift."""

from __future__ import annotations

import datetime as dt
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec

from bugmatrix.cell.descendants import reaping
from bugmatrix.cell.preload import IMPORT_CHECK_ENV
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.run import load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.provenance import origin_now
from bugmatrix.run.command import CellSpec, cell_env, pytest_command, write_spec
from bugmatrix.run.diskbudget import cache_lock, lean_needed, needed_by, release_cell
from bugmatrix.run.envbuild import InstallFailed, cell_venv, ensure_environment, find_interpreter
from bugmatrix.run.inputkey import InputKey, input_key
from bugmatrix.run.lock import lock_for
from bugmatrix.run.reuse import Decision, ReusePolicy, decide

__all__ = [
    "CellRun",
    "CellSpec",
    "Environment",
    "Execute",
    "built_python",
    "bytecode_env",
    "cell_key",
    "prepare",
    "record_install_failure",
    "release",
    "run_cell",
    "unfinished",
]

#: Runs a command with an environment and returns its exit code (nox's session.run, a subprocess with a timeout, ...).
Execute = Callable[[Sequence[str], Mapping[str, str]], int]


@dataclass(frozen=True)
class Environment:
    """A cell's interpreter, ready to run the cases."""

    python: Path
    venv: Path | None = None  # None: the current interpreter (system cell)
    lock: Path | None = None  # the lock it was installed from
    unlocked: str | None = None  # why it was installed without a lock (no lock, a stale one)
    built: bool = False  # built now, rather than reused unchanged


@dataclass(frozen=True)
class CellRun:
    """What running a cell gave: its run file, environment, pytest's exit code, why it could not be built, or the run it reused."""

    run_file: Path
    environment: Environment | None
    install_failed: str | None = None
    returncode: int | None = None
    decision: Decision | None = None
    #: Why the run file is not the whole record of the pytest that ran (None: it is, or pytest did not run).
    unfinished: str | None = None
    seconds: float = 0.0  # how long it took, where a pool process timed it

    @property
    def reused(self) -> bool:
        return self.decision is not None and self.decision.reused is not None


def prepare(matrix: Matrix, spec: CellSpec, *, root: Path = ROOT, venv: Path | None = None, check_imports: bool = True) -> Environment:
    """The cell's environment, built or reused from its current lock, else unlocked (the reason kept); raises InstallFailed."""
    if spec.pins is None:
        return Environment(spec.interpreter or Path(sys.executable))
    python, requirements = spec.pins[matrix.interpreter], matrix.requirements_for(spec.pins, extra=spec.extra)
    lock, unlocked = lock_for(root, spec.id, requirements, python, directory=spec.locks)
    target = venv or cell_venv(root, spec.id)
    modules = matrix.import_modules(spec.pins) if check_imports else []
    with cache_lock(root, exclusive=False):  # a lean prune of uv's cache waits for this build (cells side by side)
        built = ensure_environment(
            target, python, requirements, modules, lock=lock, no_build=matrix.file.harness.no_build, absent=spec.extra.absent
        )
    return Environment(target / "bin" / "python", target, lock, unlocked, built)


def built_python(root: Path, cell_id: str) -> Path | None:
    """The interpreter of a cell whose venv exists already, else None (nothing is built)."""
    python = cell_venv(root, cell_id) / "bin" / "python"
    return python if python.exists() else None


def run_cell(
    matrix: Matrix,
    spec: CellSpec,
    run_file: Path,
    *,
    execute: Execute,
    root: Path = ROOT,
    venv: Path | None = None,
    junit: Path | None = None,
    select: Sequence[str] = (),
    extra: Sequence[str] = (),
    prepared: Callable[[Environment], None] | None = None,
    reuse: ReusePolicy | None = None,
    log: Callable[[str], None] | None = None,
) -> CellRun:
    """Reuse a previous run of the same inputs, or prepare the cell and run its cases into ``run_file`` (install-failed
    when it cannot be built). ``select``/``extra`` narrow the run (no reuse); ``prepared`` is told the environment."""
    origin = origin_now(root)
    key, unkeyed = cell_key(matrix, spec, root)
    decision = decide(reuse, spec, key, unkeyed=unkeyed, narrowed=[*select, *extra])
    if log is not None:
        log(decision.why)
    if decision.reused is not None and key is not None:  # its results, with tonight's origin and tracking and ``reused_from``
        _write_run(run_file, replace(decision.reused, reused_from=dict(decision.reused.observed or {})), spec, key, origin)
        return CellRun(run_file, None, decision=decision)
    try:
        environment = prepare(matrix, spec, root=root, venv=venv, check_imports=False)
    except InstallFailed as exc:
        record_install_failure(run_file, spec, str(exc), key, origin)
        return CellRun(run_file, None, install_failed=str(exc), decision=decision)
    if prepared is not None:
        prepared(environment)
    if environment.lock is not None:  # the key of what is really there: the venv's own interpreter
        key = input_key(root, environment.lock, spec.variants, str(environment.python), providers=matrix.axis_spec(spec.pins))
    spec_file = write_spec(matrix, spec, run_file, junit=junit, root=root, input_key=key if environment.lock else None, origin=origin)
    command = pytest_command(environment.python, spec, spec_file, targets=select or ("cases",), extra=extra, root=root)
    modules = matrix.import_modules(spec.pins) if spec.pins is not None else []
    since = dt.datetime.now(dt.UTC).replace(microsecond=0)
    env = cell_env(root) | dict(spec.extra.variables) | ({IMPORT_CHECK_ENV: ",".join(modules)} if modules else {})
    # What the cell leaves running when it dies itself (a variant aborts the process that runs it) comes back here.
    with reaping(when="after the cell's pytest ended") as left:
        code = execute(command, bytecode_env(env, environment.venv))
    if left and log is not None:
        log(f"killed {len(left)} process(es) the cell left running: " + "; ".join(left))
    return CellRun(run_file, environment, returncode=code, decision=decision, unfinished=unfinished(run_file, since))


def record_install_failure(
    run_file: Path, spec: CellSpec, reason: str, key: InputKey | None = None, origin: Mapping[str, str] | None = None
) -> None:
    """Write the run file of a cell that could not be built (no results, the reason kept; never reused)."""
    assert spec.pins is not None  # the current interpreter needs no install
    stamp, install = dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), {"status": "failed", "reason": reason}
    run = RunRecord(spec.id, dict(spec.pins), {}, axes=list(spec.pins), started=stamp, finished=stamp, install=install, complete=True)
    _write_run(run_file, run, spec, key, origin)


def _write_run(run_file: Path, run: RunRecord, spec: CellSpec, key: InputKey | None, origin: Mapping[str, str] | None) -> None:
    tracked = {axis: dict(t) for axis, t in spec.tracked.items()}
    run = replace(run, input_key=msgspec.to_builtins(key), origin=dict(origin) if origin else None, tracked=tracked)
    write_json_atomic(run_file, run.to_json())


def unfinished(run_file: Path, since: dt.datetime) -> str | None:
    """Why ``run_file`` is not the whole record of a cell run that started at ``since`` (None: it is); never decided
    from pytest's exit code (a variant can end its process with any code; a killed cell leaves the old file)."""
    try:
        run = load_run_file(run_file)
    except BugmatrixError as exc:
        return f"no readable run file: {exc}"
    try:
        fresh = dt.datetime.fromisoformat(run.started) >= since
    except (TypeError, ValueError):  # malformed, or naive beside the aware ``since``: not a file this run wrote
        fresh = False
    if not fresh:
        return f"{run_file} was not written by this run (it is from a run started {run.started or 'at an unknown time'}): the cell ended before it recorded anything"
    if not run.complete:
        recorded = {r.id for r in run.results}
        running = f"; it was running {', '.join(run.running)}" if run.running else ""
        return (
            f"{run_file} is not complete: {len(recorded & set(run.selected))} of {len(run.selected)} selected variant(s) recorded{running}"
        )
    return None


def bytecode_env(env: Mapping[str, str], venv: Path | None) -> dict[str, str]:
    """``env`` with the bytecode cached in ``<venv>/.bytecode`` (uv installs no ``.pyc``: 7.6 s of a 26 s run compiled)."""
    if venv is None:
        return dict(env)
    # Empty rather than removed: an executor that lays ``env`` over its own (nox's session.run) would bring it back.
    return {**env, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(venv / ".bytecode")}


_interpreter = functools.cache(find_interpreter)  # once per process: one process plans and runs many cells


def cell_key(matrix: Matrix, spec: CellSpec, root: Path = ROOT) -> tuple[InputKey | None, str]:
    """The cell's input key before anything is built, or None and why it has none."""
    if spec.pins is None:
        return None, "the current interpreter as it is (no lock)"
    python = spec.pins[matrix.interpreter]
    lock, unlocked = lock_for(root, spec.id, matrix.requirements_for(spec.pins, extra=spec.extra), python, directory=spec.locks)
    if lock is None:
        return None, f"no current lock ({unlocked}): its resolution is not fixed until it is installed"
    try:
        interpreter = _interpreter(python)
    except InstallFailed as exc:
        return None, str(exc)
    return input_key(root, lock, spec.variants, interpreter, providers=matrix.axis_spec(spec.pins)), ""


def release(
    matrix: Matrix,
    spec: CellSpec,
    order: Sequence[CellSpec],
    *,
    root: Path = ROOT,
    venv: Path | None = None,
    others: Sequence[CellSpec] | None = None,
    jobs: int = 1,
) -> list[str]:
    """When lean: remove the cell's venv, and its heavy wheels from uv's cache unless a cell still to come (after it in
    ``order``, or ``others`` running or waiting beside it) needs them; what was cleaned."""
    if spec.pins is None or not lean_needed(jobs):
        return []
    planned = [c for c in order if c.pins is not None]
    ids = [c.id for c in planned]
    if others is None and spec.id in ids:  # one at a time: those after it in ``order`` are still to come
        others = planned[ids.index(spec.id) + 1 :]
    mine = matrix.requirements_for(spec.pins, extra=spec.extra)
    later = others is None or needed_by((matrix.requirements_for(c.pins, extra=c.extra) for c in others if c.pins is not None), mine)
    busy = {spec.id, *(c.id for c in others or ())}  # unknown position: the cache is kept
    # The venvs kept by cells neither running nor still to come go first: their hard links keep uv's cache from shrinking.
    for cid in ids:
        if cid not in busy and cell_venv(root, cid).exists():
            release_cell(cell_venv(root, cid), drop_cache=False)
    return release_cell(venv or cell_venv(root, spec.id), drop_cache=not later, root=root)
