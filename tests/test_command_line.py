"""A cell's command line is one short line (issue 35 item 4): everything about the cell travels in its spec file.

nox logs every command it runs. With the input key (about 25 file hashes), the
axis spec, the pins and the origin on it, that line was about 4 KB a cell; they
now go into ``<reports>/spec/<cell>.json`` and the command names that file.
The e2e run's own nox output is read in ``tests/test_e2e.py``; here the
builder is checked on every planned cell, at a long checkout path, with
reports outside the checkout (as on CI).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import msgspec
import pytest

from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.cellspec import read_options
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import plan_all
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.command import CellSpec, pytest_command, run_file_path, write_spec
from bugmatrix.run.envbuild import cell_venv
from bugmatrix.run.inputkey import input_key

ROOT = Path(__file__).resolve().parent.parent
#: What nox's log line may hold at most (the issue's bound; without key and spec the old line was ~600 at a CI path).
LIMIT = 400


def logged(command: list[str]) -> str:
    """The line nox logs for ``session.run(*command)``."""
    return "nox > " + shlex.join(command)


@pytest.mark.parametrize("reports_inside", [True, False], ids=["build-reports", "ci-reports-outside"])
def test_every_planned_cells_command_is_one_short_line(tmp_path: Path, reports_inside: bool) -> None:
    matrix = load_resolved_matrix(ROOT / "matrix.toml")
    cells = plan_all(matrix, load_catalog(ROOT / "cases", matrix))
    # A long checkout path, as on a CI runner: tmp_path stands for /home/runner/work in the measured line.
    root = tmp_path / "bugmatrix-reproductions" / "bugmatrix-reproductions"
    reports = root / "build" / "reports" if reports_inside else tmp_path / "_temp" / "bugmatrix-reports"
    lock = sorted((ROOT / "locks").glob("*.txt"))[0]
    key = input_key(ROOT, lock, (), sys.executable)
    # Every planned cell, and the longest id a case environment's sibling of a CUDA twin can have today.
    longest_planned = max(cells, key=lambda c: len(c.id))
    sibling = (
        longest_planned.id.removesuffix("-cuda") + "-with-setuptools-lt-81-cuda",
        longest_planned.pins,
        Env(requires=["setuptools<81"]),
    )
    lines = {}
    for cell_id, pins, extra in [*((c.id, c.pins, c.extra) for c in cells), sibling]:
        run_file = run_file_path(reports, cell_id)
        spec = CellSpec(cell_id, pins, extra=extra)
        spec_file = write_spec(
            matrix, spec, run_file, junit=reports / "junit" / f"{cell_id}.xml", root=root, input_key=key,
            origin={"date": "2026-11-24", "commit": "0" * 40, "run": "https://github.com/o/r/actions/runs/1"},
        )  # fmt: skip
        command = pytest_command(cell_venv(root, cell_id) / "bin" / "python", spec, spec_file, root=root)
        lines[cell_id] = logged(command).replace(str(tmp_path), "/home/runner/work")
    longest = max(lines, key=lambda c: len(lines[c]))
    assert len(lines[longest]) < LIMIT, f"{len(lines[longest])} characters for {longest}: {lines[longest]}"
    assert len(lines) > 50 and longest == sibling[0]
    # The spec file holds what left the line: the whole input key among it, so the run file still records it.
    spec = read_options(reports / "spec" / f"{longest}.json")
    assert spec.cell == longest and spec.input_key == msgspec.to_builtins(key) and spec.pins
    assert spec.run_file == (f"build/reports/runs/{longest}.json" if reports_inside else str(run_file_path(reports, longest)))


def test_the_spec_file_is_refused_in_one_line_when_damaged(tmp_path: Path) -> None:
    from bugmatrix.errors import BugmatrixError

    path = tmp_path / "spec.json"
    for text, said in [
        ("{", "not valid JSON"),
        (json.dumps({"schema": "bugmatrix.cellspec/0"}), "schema 'bugmatrix.cellspec/0' is not 'bugmatrix.cellspec/1'"),
        (json.dumps({"schema": "bugmatrix.cellspec/1", "pinz": {}}), "pinz: unknown key"),
        (json.dumps({"schema": "bugmatrix.cellspec/1", "pins": {"torch": 2}}), "pins: {'torch': 2} is not an object of str -> str"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(BugmatrixError) as info:
            read_options(path)
        assert "\n" not in str(info.value) and str(info.value).startswith(f"--bugmatrix-spec {path}: {said}"), str(info.value)
