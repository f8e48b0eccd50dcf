"""Input keys: a changed case source, lock or harness module invalidates exactly the cells it should, and says why.

Keys are computed by the runner's own ``cell_key`` for the nightly profile's
real cells, in a copy of the checkout's harness, cases and locks (edited here,
never the checkout).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.ids import VariantId
from bugmatrix.files import file_digest
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, plan_cells, sibling_id
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.inputkey import KEY_SCHEMA, InputKey, differences, harness_files, input_key
from bugmatrix.run.lock import assembled_lock, requirements_digest
from bugmatrix.run.runner import CellSpec, cell_key

ROOT = Path(__file__).resolve().parent.parent
MATRIX = load_resolved_matrix(ROOT / "matrix.toml")
# The nightly's CPU cells that have a committed lock: slices (issue 33) plan cells the committed locks predate.
# TODO(locks): every nightly cell, once the locks are re-made for the slices.
CELLS = [
    c for c in plan_cells(MATRIX, "nightly", load_catalog(ROOT / "cases", MATRIX))
    if c.device == "cpu" and (ROOT / "locks" / f"{c.id}.txt").exists()
]  # fmt: skip


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The parts of the checkout a key reads: the harness, the cases, conftest.py, pyproject.toml and the nightly cells' locks."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "bugmatrix", root / "bugmatrix", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "cases", root / "cases", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "locks" / "pieces", root / "locks" / "pieces")  # the hash blocks the locks refer to
    for cell in CELLS:
        shutil.copy(ROOT / "locks" / f"{cell.id}.txt", root / "locks")
    return root


def keys(root: Path) -> dict[str, InputKey]:
    found = {}
    for cell in CELLS:
        key, why = cell_key(MATRIX, CellSpec(cell.id, cell.pins, variants=cell.variants), root)
        assert key is not None, f"{cell.id}: {why}"
        found[cell.id] = key
    return found


def changed(before: dict[str, InputKey], after: dict[str, InputKey]) -> set[str]:
    return {cell for cell in before if before[cell].digest != after[cell].digest}


def runs_case(cell: Cell, case: str) -> bool:
    return any(VariantId.parse(v).case == case for v in cell.variants)


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_every_nightly_cell_has_a_key_and_an_unchanged_checkout_keeps_it(checkout: Path) -> None:
    first = keys(checkout)
    assert changed(first, keys(checkout)) == set(), "nothing changed: the same keys"
    parts = next(iter(first.values())).parts
    assert parts["schema"] == KEY_SCHEMA and set(parts) >= {"lock", "cases", "harness", "platform", "python", "gpu", "providers"}
    assert len({k.digest for k in first.values()}) == len(CELLS), "every cell's key is its own (its lock differs)"


def test_a_changed_case_source_invalidates_exactly_the_cells_that_run_it(checkout: Path) -> None:
    before = keys(checkout)
    append(checkout / "cases" / "t5_loss_no_grad_fn.py", "\n# a comment is a change too: the key hashes the source\n")
    after = keys(checkout)
    expected = {c.id for c in CELLS if runs_case(c, "t5_loss_no_grad_fn")}
    assert expected and expected != {c.id for c in CELLS}, "the test needs cells on both sides"
    assert changed(before, after) == expected
    some = next(iter(expected))
    assert differences(before[some].parts, after[some].parts) == ["case file cases/t5_loss_no_grad_fn.py changed"]


def test_a_changed_lock_invalidates_exactly_its_cell(checkout: Path) -> None:
    before = keys(checkout)
    target = CELLS[0].id
    append(checkout / "locks" / f"{target}.txt", "# re-created\n")
    after = keys(checkout)
    assert changed(before, after) == {target}
    assert differences(before[target].parts, after[target].parts) == ["lock changed"]


def test_a_stale_lock_means_no_key_at_all(checkout: Path) -> None:
    """A cell without a current lock is never reused: its resolution is not fixed until it is installed."""
    cell = CELLS[0]
    lock = checkout / "locks" / f"{cell.id}.txt"
    lock.write_text(lock.read_text().replace("# requirements-sha256: ", "# requirements-sha256: 0"))
    key, why = cell_key(MATRIX, CellSpec(cell.id, cell.pins, variants=cell.variants), checkout)
    assert key is None and "no current lock" in why and "stale" in why


def test_a_case_environments_sibling_is_keyed_by_its_own_lock_and_requirements(checkout: Path) -> None:
    """A ``-with-`` sibling installs its pins plus the workaround's requirements from its own lock: its key is that lock's, and a
    changed workaround requirement leaves it without a key (it runs) while its cell's key stays."""
    base = CELLS[0]
    extra = Env(requires=["filelock<4"])
    sibling = Cell(sibling_id(base.id, extra), base.pins, base.profiles, base.device, base.variants[:1], base.interpreter, extra, base.id)
    text = (checkout / "locks" / f"{base.id}.txt").read_text(encoding="utf-8")
    old = requirements_digest(MATRIX.requirements_for(base.pins))
    new = requirements_digest(MATRIX.requirements_for(sibling.pins, extra=sibling.extra))
    assert old != new and old in text, "the workaround's requirement is part of the lock's requirements"
    lock = checkout / "locks" / f"{sibling.id}.txt"
    header = text.replace(old, new).replace("# requirement: ", "# requirement: filelock<4\n# requirement: ", 1)
    lock.write_text(header, encoding="utf-8")  # stands in for the one nox -s lock writes
    before = keys(checkout)
    key, why = cell_key(MATRIX, CellSpec.of(sibling), checkout)
    assert key is not None, why
    assert key.parts["lock"] == file_digest(assembled_lock(checkout, lock)) != before[base.id].parts["lock"], "the complete lock's digest"
    assert next(iter(key.parts["cases"])) == f"cases/{VariantId.parse(sibling.variants[0]).case}.py"
    other = Cell(
        sibling.id,
        sibling.pins,
        sibling.profiles,
        sibling.device,
        sibling.variants,
        sibling.interpreter,
        Env(requires=["filelock<3.20"]),
        base.id,
    )
    key, why = cell_key(MATRIX, CellSpec.of(other), checkout)
    assert key is None and "stale" in why and "+filelock<3.20" in why and "-filelock<4" in why
    assert changed(before, keys(checkout)) == set(), "the cell beside it keeps its key"


def test_a_changed_harness_module_invalidates_every_cell_and_a_host_module_none(checkout: Path) -> None:
    before = keys(checkout)
    append(checkout / "bugmatrix" / "report" / "diff.py", "\n# host-only code never runs in a cell\n")
    assert changed(before, keys(checkout)) == set()
    append(checkout / "bugmatrix" / "cell" / "outcomes.py", "\n# the classifier runs in every cell\n")
    after = keys(checkout)
    assert changed(before, after) == {c.id for c in CELLS}
    assert differences(before[CELLS[0].id].parts, after[CELLS[0].id].parts) == ["harness bugmatrix/cell/outcomes.py changed"]


def test_a_shared_module_the_cell_code_starts_importing_joins_the_harness(checkout: Path) -> None:
    """The harness is found by reading imports, so a new import is covered without an edit to the key."""
    assert checkout / "bugmatrix" / "paths.py" not in harness_files(checkout)
    append(checkout / "bugmatrix" / "cell" / "ids.py", "\n\ndef _later() -> None:\n    from bugmatrix.paths import ROOT  # noqa: F401\n")
    assert checkout / "bugmatrix" / "paths.py" in harness_files(checkout)
    assert {p.relative_to(checkout).as_posix() for p in harness_files(checkout)} >= {
        "conftest.py", "bugmatrix/__init__.py", "bugmatrix/errors.py", "bugmatrix/files.py", "bugmatrix/cell/plugin.py",
    }  # fmt: skip


def test_machine_parts_are_named_when_they_differ(checkout: Path) -> None:
    lock = checkout / "locks" / f"{CELLS[0].id}.txt"
    here = input_key(checkout, lock, CELLS[0].variants, "/no/such/python", gpu="none")
    gpu = input_key(checkout, lock, CELLS[0].variants, "/no/such/python", gpu="NVIDIA H100 80GB HBM3, 550.54.15")
    assert here.digest != gpu.digest
    assert differences(here.parts, gpu.parts) == ["gpu none → NVIDIA H100 80GB HBM3, 550.54.15"]
    assert here.parts["python"].startswith("unknown (/no/such/python"), "an interpreter that cannot be asked never matches a real one"
    assert differences({**here.parts, "schema": "bugmatrix.key/0"}, here.parts) == [
        "the key's schema changed (bugmatrix.key/0 → bugmatrix.key/1)"
    ]
