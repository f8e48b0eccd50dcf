"""An axis changes only the cells that span it (issue 23 item 2).

Adding ``[axes.<x>]`` with a ``[base]`` pin must leave every planned cell id,
lock and baseline key unchanged, and adding a case that spans it must add
cells without touching the others. Checked on the live ``matrix.toml`` and
``cases/`` (whatever a user has made of them: the property holds for any
valid catalogue) and on the frozen reference (:mod:`tests.reference`), by
comparing what the plan hands on: the plan document of every profile byte for
byte, and per cell its requirements (the lock's input), import modules and
axis spec.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_BF16, Case
from bugmatrix.cell.outcomes import Signature
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import plan_cells, plan_document
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from tests.reference import REFERENCE_MATRIX, reference_catalog

ROOT = Path(__file__).resolve().parent.parent
AXIS, PREFIX = "probeaxis", "prb"


def with_axis(text: str) -> str:
    """The matrix text with one more axis (a made-up distribution: nothing installs it), pinned in [base] and listed by every profile."""
    assert "[base]\n" in text, "the matrix has no [base] table to pin the new axis in"
    text = text.replace("[base]\n", f'[base]\n{AXIS} = "2.0"\n', 1)
    for line in [line for line in text.splitlines() if line.startswith("[profiles.")]:
        table = text[text.index(line + "\n") :].split("\n\n", 1)[0]
        if "\ncomputed = " not in table:  # a computed profile lists no versions: it picks among its within profile's cells
            text = text.replace(line + "\n", f'{line}\n{AXIS} = ["1.0", "2.0"]\n', 1)
    return text + f'\n[axes.{AXIS}]\nprefix = "{PREFIX}"\ndistributions = {{ {AXIS} = "{AXIS}" }}\nversions = ["1.0", "2.0"]\n'


def fingerprint(matrix: Matrix, catalog: Catalog) -> dict[str, str]:
    """profile -> what the plan hands on, as text: the plan document, and each cell's requirements, modules and axis spec."""
    found = {}
    for profile in matrix.profiles:
        cells = plan_cells(matrix, profile, catalog)
        per_cell = {c.id: [matrix.requirements_for(c.pins), matrix.import_modules(c.pins), matrix.axis_providers(c.pins)] for c in cells}
        found[profile] = json.dumps([plan_document(matrix, profile, cells), per_cell], sort_keys=True)
    return found


def real() -> tuple[Path, Catalog]:
    path = ROOT / "matrix.toml"
    return path, load_catalog(ROOT / "cases", load_resolved_matrix(path))


def reference() -> tuple[Path, Catalog]:
    return REFERENCE_MATRIX, reference_catalog()


@pytest.mark.parametrize("source", [real, reference], ids=["live", "reference"])
def test_adding_an_axis_changes_no_planned_cell(tmp_path: Path, source: object) -> None:
    """Every profile's plan, byte for byte: ids, pins, variants, requirements (so locks), modules, axis specs."""
    path, catalog = source()  # type: ignore[operator]
    copy = tmp_path / "matrix.toml"
    copy.write_text(with_axis(path.read_text(encoding="utf-8")), encoding="utf-8")
    for computed in load_resolved_matrix(path).computed.values():  # a computed profile's committed choice, beside the copy
        if computed.exists():
            shutil.copy(computed, tmp_path)
    grown = load_resolved_matrix(copy)
    assert AXIS in grown.axes and grown.base[AXIS] == "2.0"
    before, after = fingerprint(load_resolved_matrix(path), catalog), fingerprint(grown, catalog)
    assert before.keys() == after.keys()
    for profile in before:
        assert after[profile] == before[profile], f"profile {profile}: adding [axes.{AXIS}] changed its plan"


def _spanning_case(spans: tuple[str, ...]) -> str:
    return (
        "from bugmatrix import CPU_BF16, Case, Signature\n\n"
        f'case = Case(id="probe_case", title="probe", signature=Signature("never"), axes={spans!r})\n\n\n'
        "@case.variant(devices=(CPU_BF16,))\ndef core(device, dtype):\n    return {}\n\n\n"
        f"@case.variant(devices=(CPU_BF16,), axes=({AXIS!r},))\ndef alone(device, dtype):\n    return {{}}\n"
    )


@pytest.mark.parametrize("source", [real, reference], ids=["live", "reference"])
def test_a_case_spanning_a_new_axis_adds_cells_and_moves_none(tmp_path: Path, source: object) -> None:
    """With the axis and a case spanning (held axes..., x) and (x,) alone: every old cell is still there, same pins, same variants."""
    path, catalog = source()  # type: ignore[operator]
    copy = tmp_path / "matrix.toml"
    copy.write_text(with_axis(path.read_text(encoding="utf-8")), encoding="utf-8")
    for computed in load_resolved_matrix(path).computed.values():
        if computed.exists():
            shutil.copy(computed, tmp_path)
    grown = load_resolved_matrix(copy)
    spans = (*[a for a in grown.held_axes if a != grown.interpreter], AXIS)
    if source is real:
        cases = tmp_path / "cases"
        shutil.copytree(ROOT / "cases", cases, ignore=shutil.ignore_patterns("__pycache__"))
        (cases / "probe_case.py").write_text(_spanning_case(spans), encoding="utf-8")
        bigger = load_catalog(cases, grown)
    else:
        case = Case(id="probe_case", title="probe", signature=Signature("never"), axes=spans)
        case.variant(devices=(CPU_BF16,))(lambda device, dtype: {})
        bigger = Catalog((*catalog.cases, case))
    old_matrix = load_resolved_matrix(path)
    for profile in old_matrix.profiles:
        old = {c.id: (dict(c.pins), c.device, c.variants) for c in plan_cells(old_matrix, profile, catalog)}
        new = {c.id: (dict(c.pins), c.device, c.variants) for c in plan_cells(grown, profile, bigger)}
        moved = sorted(cid for cid in old if new.get(cid) != old[cid])
        assert not moved, f"profile {profile}: {moved[:3]} moved or changed their variants"
        added = set(new) - set(old)
        assert added and all(PREFIX in cid for cid in added), f"profile {profile}: new cells must be the axis's own: {sorted(added)}"
        assert all(new[cid][0][AXIS] in ("1.0", "2.0") for cid in added)
