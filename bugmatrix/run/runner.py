"""The one way to run a cell: lock, environment, import check, pytest, run file, cleanup.

Every path that runs cases in a cell's environment comes through here: the
``cell`` and ``system`` sessions, ``bisect`` (one variant per probe),
``stability`` (one cell N times), the benchmark (a cell re-run against its
floor) and ``repro`` (a cell's interpreter for a fresh traceback). They used to
repeat these steps, and the copies drifted (bisect once rebuilt a locked cell
unlocked; stability once dropped the JUnit file). What differs between callers
is an argument here (which variants, how many workers, which venv, how the
command is executed and timed), never a copy of a step:

1. :func:`prepare`: the cell's lock when it is current (else the pins from
   ``matrix.toml``, and the reason the lock was not used), the venv built or
   reused by :func:`~bugmatrix.run.envbuild.ensure_environment` (whole or not at
   all, import-checked);
2. :func:`run_cell`: that, then the pytest command
   (:func:`~bugmatrix.run.command.pytest_command`), executed by the caller's
   ``execute``; a cell that cannot be built gets a run file saying
   ``install-failed`` with the resolver's reason instead;
3. :func:`release`: ``BUGMATRIX_DISK=lean`` gives the cell's disk back
   (:mod:`~bugmatrix.run.diskbudget`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bugmatrix.paths import ROOT
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.command import cell_env, pytest_command
from bugmatrix.run.diskbudget import is_lean, needed_later, release_cell
from bugmatrix.run.envbuild import InstallFailed, cell_venv, ensure_environment, record_install_failure
from bugmatrix.run.lock import lock_for

__all__ = ["CellRun", "CellSpec", "Environment", "Execute", "built_python", "prepare", "release", "run_cell"]

#: Runs a command with an environment and returns its exit code (nox's session.run, a subprocess with a timeout, ...).
Execute = Callable[[Sequence[str], Mapping[str, str]], int]


@dataclass(frozen=True)
class CellSpec:
    """Which cell: its id and pins as planned (``pins=None``: the current interpreter as it is, the system cell).

    ``tracked`` names the pins a profile's ``latest`` chose (``bugmatrix.releases.tracking.tracked_for``),
    recorded in the run file even when the cell cannot be installed.
    """

    id: str
    pins: Mapping[str, str] | None
    tracked: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    interpreter: Path | None = None  # pins=None only: an interpreter as it is (default: this one)
    extra: tuple[str, ...] = ()  # an install workaround's requirements (a sibling cell: bugmatrix.plan.cells.Cell.extra)

    @classmethod
    def of(cls, cell: Cell, tracked: Mapping[str, Mapping[str, str]] | None = None) -> CellSpec:
        """The spec of a planned cell: its id, pins and (for an install workaround's sibling) extra requirements."""
        return cls(cell.id, cell.pins, dict(tracked or {}), extra=cell.extra)


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
    """What running a cell gave: its run file, and either the environment and pytest's exit code, or why it could not be built."""

    run_file: Path
    environment: Environment | None
    install_failed: str | None = None
    returncode: int | None = None


def prepare(matrix: Matrix, spec: CellSpec, *, root: Path = ROOT, venv: Path | None = None) -> Environment:
    """The cell's environment, built or reused: from its current lock, else unlocked (the reason is kept).

    ``venv`` defaults to the cell's nox venv (``.nox/cell-<id>``); bisect passes its own for
    releases no planned cell pins. Raises :class:`~bugmatrix.run.envbuild.InstallFailed`
    with the resolver's or the importer's reason.
    """
    if spec.pins is None:
        return Environment(spec.interpreter or Path(sys.executable))
    python, requirements = spec.pins[matrix.interpreter], matrix.requirements_for(spec.pins, extra=spec.extra)
    lock, unlocked = lock_for(root, spec.id, requirements, python)
    target = venv or cell_venv(root, spec.id)
    built = ensure_environment(target, python, requirements, matrix.import_modules(spec.pins), lock=lock)
    return Environment(target / "bin" / "python", target, lock, unlocked, built)


def built_python(root: Path, cell_id: str) -> Path | None:
    """The interpreter of a cell whose venv exists already (nothing is built), else None."""
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
    workers: str | None = None,
    runner: str | None = None,
    prepared: Callable[[Environment], None] | None = None,
) -> CellRun:
    """Prepare the cell, run its cases into ``run_file``; an environment that cannot be built is recorded as install-failed.

    ``runner``/``workers`` override how the variants run (:func:`~bugmatrix.run.command.runner_flags`),
    ``select`` narrows to node ids (bisect: one variant), ``extra`` is passed to pytest
    (``-k``, ``--bugmatrix-resume``, a session's posargs), ``prepared`` is told about the
    environment before pytest starts (the nox session logs whether it was built and from
    which lock). ``execute`` runs the command and returns its exit code.
    """
    try:
        environment = prepare(matrix, spec, root=root, venv=venv)
    except InstallFailed as exc:
        assert spec.pins is not None  # the current interpreter needs no install
        record_install_failure(run_file, spec.id, spec.pins, str(exc), tracked=spec.tracked)
        return CellRun(run_file, None, install_failed=str(exc))
    if prepared is not None:
        prepared(environment)
    command = pytest_command(
        environment.python, matrix, cell_id=spec.id, pins=spec.pins, run_file=run_file, junit=junit,
        select=select, extra=extra, root=root, tracked=spec.tracked, installed=spec.extra,
        **({"workers": workers} if workers else {}), **({"runner": runner} if runner else {}),
    )  # fmt: skip
    return CellRun(run_file, environment, returncode=execute(command, cell_env(root)))


def release(matrix: Matrix, spec: CellSpec, order: Sequence[CellSpec], *, root: Path = ROOT) -> list[str]:
    """``BUGMATRIX_DISK=lean``: remove the cell's venv, and its heavy wheels from uv's cache when no later cell in ``order`` needs them.

    Returns what was cleaned from the cache; does nothing (and returns []) unless lean.
    """
    if not is_lean() or spec.pins is None:
        return []
    later = needed_later([(c.id, matrix.requirements_for(c.pins, extra=c.extra)) for c in order if c.pins is not None], spec.id)
    return release_cell(cell_venv(root, spec.id), drop_cache=not later)
