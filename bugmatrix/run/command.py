"""A cell's spec, its spec file, its pytest command, its environment variables and where its run file goes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.cellspec import CellOptions
from bugmatrix.cell.descendants import PARENT_ENV
from bugmatrix.cell.runners import Runner, chosen_runner
from bugmatrix.files import write_text_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.matrix import Matrix
from bugmatrix.run.inputkey import InputKey

__all__ = ["CellSpec", "cell_env", "pytest_command", "run_file_path", "spec_path", "write_spec"]


@dataclass(frozen=True)
class CellSpec:
    """Which cell: its id and pins as planned (``pins=None``: the current interpreter as it is, the system cell);
    ``tracked``: the pins a profile's ``latest`` chose; ``locks``: a directory of locks instead of the committed ones."""

    id: str
    pins: Mapping[str, str] | None
    tracked: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    interpreter: Path | None = None  # pins=None only: an interpreter as it is (default: this one)
    extra: Env = field(default_factory=Env)  # a case's environment beyond the pins (a sibling cell)
    variants: tuple[str, ...] = ()
    locks: Path | None = None
    runner: Runner = field(default_factory=chosen_runner)

    @classmethod
    def of(cls, cell: Cell, tracked: Mapping[str, Mapping[str, str]] | None = None) -> CellSpec:
        """The spec of a planned cell."""
        return cls(cell.id, cell.pins, dict(tracked or {}), extra=cell.extra, variants=tuple(cell.variants))


def run_file_path(reports: Path, cell_id: str) -> Path:
    """``<reports>/runs/<cell>.json``: the report refuses a file whose name is not its cell."""
    return reports / "runs" / f"{cell_id}.json"


def spec_path(run_file: Path) -> Path:
    """``<reports>/spec/<cell>.json`` beside (never inside: every ``*.json`` is a run file) ``runs/``, else beside the run file."""
    if run_file.parent.name == "runs":
        return run_file.parent.parent / "spec" / run_file.name
    return run_file.with_name(f"{run_file.stem}.spec.json")


def _short(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def write_spec(
    matrix: Matrix,
    spec: CellSpec,
    run_file: Path,
    *,
    junit: Path | None = None,
    root: Path = ROOT,
    input_key: InputKey | None = None,
    origin: Mapping[str, str] | None = None,
) -> Path:
    """Write the spec file: everything the cell's plugin is told, so the command nox logs stays short."""
    ordered = matrix.ordered(spec.pins) if spec.pins is not None else {}
    options = CellOptions(
        cell=spec.id,
        run_file=_short(run_file, root),
        junit=_short(junit, root) if junit else None,
        pins=ordered,
        requested={axis: t["requested"] for axis, t in spec.tracked.items()},
        axes=tuple(a for a in ordered if a in matrix.package_axes) if spec.pins is not None else None,
        environment=spec.extra.to_json() or None,
        variants=spec.variants or None,
        axis_spec=matrix.axis_spec(spec.pins),
        input_key=msgspec.to_builtins(input_key),
        origin=dict(origin) if origin is not None else None,
        cell_deadline_s=matrix.cell_deadline_s,
    )
    path = spec_path(run_file)
    write_text_atomic(path, json.dumps(options.to_json(), indent=1) + "\n")  # unsorted: the pins' order is the display order
    return path


def pytest_command(
    python: str | Path, spec: CellSpec, spec_file: Path, targets: Sequence[str] = ("cases",), extra: Sequence[str] = (), root: Path = ROOT
) -> list[str]:
    """The cell's pytest argv, run from ``root``, handed ``spec_file``; ``targets``: files, directories or node ids."""
    head = [str(python), *spec.extra.flags, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q", "-rs"]
    return [*head, "--bugmatrix-spec", _short(spec_file, root), *spec.runner.pytest_args(), *extra]


def cell_env(root: Path = ROOT) -> dict[str, str]:
    """The harness importable, hashes seeded, and this process's pid (the cell dies with it)."""
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0", PARENT_ENV: str(os.getpid())}
