"""A cell's pytest command, its spec file, its environment variables and where its run file goes.

Built here only, and used by the one runner (:mod:`bugmatrix.run.runner`) that
every path runs a cell through (the ``cell``/``system`` sessions, bisect,
stability, the benchmark), so they cannot drift apart (bisect once dropped
xdist and PATH, stability once dropped JUnit): what differs between them is an
argument, not a copy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.cellspec import CellOptions
from bugmatrix.cell.descendants import PARENT_ENV
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_text_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.inputkey import InputKey

__all__ = ["RUNNERS", "WORKERS", "cell_env", "pytest_command", "run_file_path", "runner_flags", "spec_path"]

#: Processes per cell (variants at once): 2 matches this project's 2-core machines.
WORKERS = os.environ.get("BUGMATRIX_WORKERS", "2")

#: How a cell runs its variants. ``fork`` (the default): the cell imports its stack once and forks a process per
#: variant, ``WORKERS`` at once (measured on 2 cores: 1.0x its floor where xdist's 2 workers import the stack twice,
#: see docs/performance.md); ``xdist``: ``WORKERS`` pytest-xdist workers, variants in-process in each;
#: ``inline``: one process, no isolation (the variant being run is named in the run file, for --bugmatrix-resume).
RUNNERS = ("fork", "xdist", "inline")
RUNNER = os.environ.get("BUGMATRIX_RUNNER", "fork")


def runner_flags(runner: str, workers: str) -> list[str]:
    """The pytest flags of a runner: the one place a cell's default parallelism is decided."""
    if runner not in RUNNERS:
        msg = f"BUGMATRIX_RUNNER={runner!r} is not a runner; use one of {', '.join(RUNNERS)}"
        raise BugmatrixError(msg)
    return {
        "fork": ["-n", "0", "--bugmatrix-forks", workers],
        "xdist": ["-n", workers, "--bugmatrix-forks", "0"],
        "inline": ["-n", "0", "--bugmatrix-forks", "0"],
    }[runner]


def run_file_path(reports: Path, cell_id: str) -> Path:
    """``<reports>/runs/<cell>.json``: the report refuses a file whose name is not its cell."""
    return reports / "runs" / f"{cell_id}.json"


def spec_path(run_file: Path) -> Path:
    """Where a run's spec file goes: ``<reports>/spec/<cell>.json`` beside ``<reports>/runs/``, else beside the run file.

    Never inside ``runs/``: every ``*.json`` there is read as a run file.
    """
    if run_file.parent.name == "runs":
        return run_file.parent.parent / "spec" / run_file.name
    return run_file.with_name(f"{run_file.stem}.spec.json")


def _short(path: Path, root: Path) -> str:
    """``path`` relative to the repository when it is inside it (pytest starts there), else as it is."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def pytest_command(
    python: str | Path,
    matrix: Matrix,
    *,
    cell_id: str,
    pins: Mapping[str, str] | None,
    run_file: Path,
    junit: Path | None = None,
    workers: str = WORKERS,
    runner: str = RUNNER,
    select: Sequence[str] = (),
    extra: Sequence[str] = (),
    root: Path = ROOT,
    tracked: Mapping[str, Mapping[str, str]] | None = None,
    environment: Env | None = None,
    variants: Sequence[str] = (),
    input_key: InputKey | None = None,
    origin: Mapping[str, str] | None = None,
    targets: Sequence[str] = ("cases",),
) -> list[str]:
    """The cell's pytest invocation, to be run from ``root``; writes the cell's spec file (:func:`spec_path`) it names.

    ``pins=None``: the current environment as it is (the ``system`` cell). ``runner`` and ``workers``: how the
    variants run (:func:`runner_flags`); ``select`` narrows to node ids (``cases/x.py::v[cpu]``), else ``targets``
    are collected (both relative to ``root``, or absolute); ``extra`` is passed through (``-k``, ``--bugmatrix-resume``, a session's
    posargs); ``tracked`` (``bugmatrix.releases.tracking.tracked_for``) names the pins a ``latest`` chose;
    ``environment`` is the case environment the cell was built with (a sibling cell: its interpreter flags go on the
    command line, its variables are the caller's to set); ``variants`` are the planned variant ids, the only ones the
    cell runs (empty: those its axes and ``environment`` admit).
    ``input_key`` and ``origin`` are recorded in the run file as given; ``[harness] cell_deadline_s`` goes to the cell
    as its spec's ``cell_deadline_s`` (``--bugmatrix-cell-deadline`` overrides it by hand). Everything about the cell goes into the spec
    file, so the command nox logs stays one short line (``tests/test_command_line.py``).
    """
    ordered = matrix.ordered(pins) if pins is not None else {}
    options = CellOptions(
        cell=cell_id,
        run_file=_short(run_file, root),
        junit=_short(junit, root) if junit else None,
        pins=ordered,
        requested={axis: t["requested"] for axis, t in (tracked or {}).items()},
        axes=tuple(a for a in ordered if a in matrix.package_axes) if pins is not None else None,
        environment=(environment or Env()).to_json() or None,
        variants=tuple(variants) or None,
        axis_spec=matrix.axis_spec(pins),
        input_key=input_key.to_json() if input_key is not None else None,
        origin=dict(origin) if origin is not None else None,
        cell_deadline_s=matrix.cell_deadline_s,
    )
    spec = spec_path(run_file)
    write_text_atomic(spec, json.dumps(options.to_json(), indent=1) + "\n")  # unsorted: the pins' order is the display order
    found = [*select] or [*targets]  # relative to root, where pytest starts
    return [
        str(python),
        *(environment.flags if environment else ()),
        "-m",
        "pytest",
        *found,
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        "--bugmatrix-spec",
        _short(spec, root),
        *runner_flags(runner, workers),
        *extra,
    ]


def cell_env(root: Path = ROOT) -> dict[str, str]:
    """The environment a cell's pytest gets: the harness importable (not installed), hashes seeded, and the pid of
    this process, which starts it: the cell dies with it, even when it dies before the cell's pytest got going
    (:func:`~bugmatrix.cell.descendants.die_with_runner`)."""
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0", PARENT_ENV: str(os.getpid())}
