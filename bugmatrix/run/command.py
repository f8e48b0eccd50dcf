"""A cell's pytest command, its environment variables and where its run file goes.

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

from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.inputkey import InputKey

__all__ = ["RUNNERS", "WORKERS", "cell_env", "pytest_command", "run_file_path", "runner_flags"]

#: Processes per cell (variants at once): 2 matches this project's 2-core machines.
WORKERS = os.environ.get("BUGMATRIX_WORKERS", "2")

#: How a cell runs its variants. ``fork`` (the default): the cell imports its stack once and forks a process per
#: variant, ``WORKERS`` at once (measured on 2 cores: 1.0x its floor where xdist's 2 workers import the stack twice,
#: see the README's Performance section); ``xdist``: ``WORKERS`` pytest-xdist workers, variants in-process in each;
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
    installed: Sequence[str] = (),
    variants: Sequence[str] = (),
    input_key: InputKey | None = None,
    origin: Mapping[str, str] | None = None,
) -> list[str]:
    """The cell's pytest invocation. ``pins=None``: the current environment as it is (the ``system`` cell).

    ``runner`` and ``workers``: how the variants run (:func:`runner_flags`); ``select`` narrows to node ids (``cases/x.py::v[cpu]``); ``extra`` is passed
    through (``-k``, ``--bugmatrix-resume``, a session's posargs); ``tracked``
    (``bugmatrix.releases.tracking.tracked_for``) names the pins a ``latest`` chose; ``installed``
    is an install workaround's requirements the cell was built with (its sibling environment); ``variants``
    are the planned variant ids, the only ones the cell runs (empty: those its axes and ``installed`` admit).
    ``input_key`` and ``origin`` are recorded in the run file as given.
    """
    targets = [str(root / node) for node in select] or [str(root / "cases")]
    command = [
        str(python), "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q", "-rs",
        "--bugmatrix-cell", cell_id, "--bugmatrix-run-file", str(run_file),
        "--bugmatrix-axis-spec", json.dumps(matrix.axis_spec(pins)),
        *runner_flags(runner, workers),
    ]  # fmt: skip
    if pins is not None:
        ordered = matrix.ordered(pins)
        command += ["--bugmatrix-pins", ",".join(f"{k}={v}" for k, v in ordered.items())]
        command += ["--bugmatrix-axes", ",".join(a for a in ordered if a in matrix.package_axes)]
    if installed:
        command += ["--bugmatrix-installed", json.dumps(list(installed))]
    if variants:
        command += ["--bugmatrix-variants", json.dumps(list(variants))]
    if tracked:
        command += ["--bugmatrix-requested", ",".join(f"{axis}={t['requested']}" for axis, t in tracked.items())]
    if input_key is not None:
        command += ["--bugmatrix-input-key", json.dumps(input_key.to_json(), sort_keys=True)]
    if origin is not None:
        command += ["--bugmatrix-origin", json.dumps(dict(origin), sort_keys=True)]
    if junit is not None:
        command += ["--junitxml", str(junit)]
    return [*command, *extra]


def cell_env(root: Path = ROOT) -> dict[str, str]:
    """The environment a cell's pytest gets: the harness importable (not installed), hashes seeded."""
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"}
