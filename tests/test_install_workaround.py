"""A workaround that is an install change (issue 23 deliver item 4): planned beside its target, run with its body, counted like any.

``case.install_workaround(name, workaround_for=..., requires=["setuptools<81"])``
declares it; the planner adds, beside every cell that runs the target, a
sibling cell with the same pins and those requirements that runs only the
workaround (the target's body); the report counts it where the target
reproduced, as "held" (with the plan, which says which cell is whose sibling).
The fast tests pin the declaration and the plan down; the e2e test builds both
environments of a fixture with uv, runs them through the runner and reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_BF16, CUDA_FP16, Case, CaseError, Expect
from bugmatrix.cell.outcomes import Signature
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import plan_cells, plan_document, sibling_id
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.command import run_file_path
from bugmatrix.run.envbuild import cell_venv, fresh_venv
from bugmatrix.run.lock import lock_path
from tests.fixtureproject import run_smoke_night

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "install_workaround"
TINY = Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml"


def _case() -> Case:
    case = Case(id="demo", title="t", signature=Signature("x"), axes=("torch",))
    case.variant(devices=(CUDA_FP16, CPU_BF16))(core)
    case.install_workaround("numpy_below_2", workaround_for="core", requires=["numpy<2"], expect=(Expect("fixed"),))
    return case


def core(device: str, dtype: object) -> dict[str, bool]:
    return {}


def test_an_install_workaround_runs_the_target_body_with_its_requirements() -> None:
    _, core_cpu, cuda, cpu = _case().variants
    assert [(v.id, v.kind, v.workaround_for, v.install) for v in (cuda, cpu)] == [
        ("demo::numpy_below_2[cuda]", "workaround", "core", ("numpy<2",)),
        ("demo::numpy_below_2[cpu]", "workaround", "core", ("numpy<2",)),
    ]
    assert cpu.fn is core_cpu.fn and cpu.axes == core_cpu.axes and cpu.doc == "core with numpy<2 installed"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workaround_for": "nothing", "requires": ["numpy<2"]}, "workaround_for='nothing' is not declared above"),
        ({"workaround_for": "core", "requires": []}, "names no requirement"),
        ({"workaround_for": "core", "requires": ["numpy<<2"]}, "'numpy<<2' is not a requirement"),
    ],
)
def test_a_bad_install_workaround_is_one_line(kwargs: dict, message: str) -> None:
    case = Case(id="demo", title="t", signature=Signature("x"), axes=("torch",))
    case.variant(devices=(CPU_BF16,))(core)
    with pytest.raises(CaseError, match=message):
        case.install_workaround("w", **kwargs)


def test_a_sibling_cell_is_planned_beside_every_cell_that_runs_the_target() -> None:
    """Same pins, the extra requirements, only the workaround; the target's cells do not run it; the plan says whose sibling."""
    matrix = load_matrix(TINY)
    cells = plan_cells(matrix, "smoke", Catalog((_case(),)))
    by_id = {c.id: c for c in cells}
    assert [c.id for c in cells if c.device == "cpu"] == [
        "py311-torch2.1.2", "py311-torch2.1.2-with-numpy-lt-2", "py311-torch2.3.1", "py311-torch2.3.1-with-numpy-lt-2",
    ]  # fmt: skip
    sibling, base = by_id["py311-torch2.1.2-with-numpy-lt-2"], by_id["py311-torch2.1.2"]
    assert sibling.pins == base.pins and sibling.extra == ("numpy<2",) and sibling.sibling_of == base.id
    assert sibling.variants == ("demo::numpy_below_2[cuda]", "demo::numpy_below_2[cpu]")
    assert "demo::numpy_below_2[cpu]" not in base.variants and "demo::core[cpu]" in base.variants
    assert matrix.requirements_for(sibling.pins, extra=sibling.extra) == ["torch==2.1.2", "numpy<2", *matrix.harness]
    entry = next(c for c in plan_document(matrix, "smoke", cells)["cells"] if c["id"] == sibling.id)
    assert entry["requires"] == ["numpy<2"] and entry["sibling_of"] == base.id
    assert "requires" not in next(c for c in plan_document(matrix, "smoke", cells)["cells"] if c["id"] == base.id)
    assert sibling_id("c", ("setuptools<81", "numpy>=1.20,<2")) == "c-with-setuptools-lt-81-and-numpy-lt-2-ge-1.20"


def test_a_cuda_twins_sibling_installs_its_cpu_siblings_lock_and_no_name_is_taken_twice(tmp_path: Path) -> None:
    """Every CUDA cell is its CPU cell's id + ``-cuda`` (siblings too), so it installs that cell's lock (the only one ``nox -s lock``
    writes) and the re-resolve lane finds it; a workaround sibling (``-with-``) and a fresh-lane run of any cell never share a
    venv or a run file."""
    cells = plan_cells(load_matrix(TINY), "smoke", Catalog((_case(),)))
    cuda = {c.id: c for c in cells if c.device == "cuda"}
    assert set(cuda) == {"py311-torch2.3.1-cuda", "py311-torch2.3.1-with-numpy-lt-2-cuda"}
    assert cuda["py311-torch2.3.1-with-numpy-lt-2-cuda"].sibling_of == "py311-torch2.3.1-cuda"
    cpu = {c.id for c in cells if c.device == "cpu"}
    for twin in cuda.values():
        assert lock_path(tmp_path, twin.id) in {lock_path(tmp_path, c) for c in cpu}, f"{twin.id} has no CPU cell's lock to install"
    reports = tmp_path / "reports"
    locked = [p for c in cells for p in (cell_venv(tmp_path, c.id), run_file_path(reports, c.id))]
    fresh = [p for c in cells for p in (fresh_venv(tmp_path, c.id), run_file_path(reports / "fresh", c.id))]
    assert len(set(locked)) == len(locked) and len(set(fresh)) == len(fresh) and not set(locked) & set(fresh)


def test_an_install_workaround_on_an_axis_that_no_release_satisfies_names_the_case_file(tmp_path: Path) -> None:
    """``torch<2`` where torch is an axis is read from torch's cells; where no listed torch satisfies it, the case file is named."""
    case = Case(id="demo", title="t", signature=Signature("x"), axes=("torch",))
    case.variant(devices=(CPU_BF16,))(core)
    case.install_workaround("other_torch", workaround_for="core", requires=["torch<2"])
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(TINY), "smoke", Catalog((case,), tmp_path / "cases"))
    assert str(info.value) == (
        f"{tmp_path / 'cases' / 'demo.py'}: install workaround 'other_torch' requires 'torch<2', a release of axis 'torch', "
        f"but no release in axes.torch.versions of {TINY} satisfies it; list one there"
    )


@pytest.mark.e2e
def test_an_install_workaround_is_built_run_and_counted_as_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both environments built with uv; the target reproduces where setuptools is absent, the workaround is fixed beside it."""
    night = run_smoke_night(FIXTURE, tmp_path)
    assert [c.id for c in night.cells] == ["py311", "py311-with-setuptools-lt-81"]
    assert night.report_code == 0
    compat = night.compat()
    target = compat["results"]["pkg_resources_gone::import_pkg_resources[cpu]"]
    assert list(target) == ["py311"] and target["py311"]["outcome"] == "reproduced"
    assert target["py311"]["workarounds"] == ["setuptools_below_81"], "held beside the cell, counted in it"
    workaround = compat["results"]["pkg_resources_gone::setuptools_below_81[cpu]"]
    assert {cell: entry["outcome"] for cell, entry in workaround.items()} == {"py311-with-setuptools-lt-81": "fixed"}
    markdown = (night.reports / "compat.md").read_text(encoding="utf-8")
    assert "| ✗ reproduced — works: setuptools\\_below\\_81 |" in markdown, markdown[-1500:]
    assert "workarounds fixed where it reproduced: setuptools_below_81 ✓ 1/1" in capsys.readouterr().out


def _axis_case(requires: list[str], axes: tuple[str, ...] = ("torch", "lightning")) -> Case:
    case = Case(id="demo", title="t", signature=Signature("x"), axes=axes)
    case.variant(devices=(CPU_BF16,))(core)
    case.install_workaround("old_lightning", workaround_for="core", requires=requires, expect=(Expect("fixed"),))
    return case


def test_an_install_workaround_on_an_axis_runs_in_that_axis_cells_that_satisfy_it() -> None:
    """``lightning<2.1`` where lightning is an axis (issue 33 item 7): no sibling, no contradiction; it runs where pl < 2.1."""
    cells = plan_cells(load_matrix(TINY), "nightly", Catalog((_axis_case(["lightning<2.1"]),)))
    assert not [c for c in cells if c.extra], "no sibling environment"
    runs = {c.id: c.variants for c in cells if c.device == "cpu"}
    assert runs["py311-torch2.1.2-pl2.0.3"] == ("demo::core[cpu]", "demo::old_lightning[cpu]")
    assert runs["py311-torch2.1.2-pl2.2.5"] == ("demo::core[cpu]",), "pl 2.2.5 does not satisfy lightning<2.1"


def test_the_rest_of_such_a_workaround_is_a_sibling_beside_the_cells_that_satisfy_the_axis_part() -> None:
    """``["pytorch-lightning<2.1", "setuptools<81"]``: setuptools in a sibling, only beside the pl 2.0.3 cells."""
    cells = plan_cells(load_matrix(TINY), "nightly", Catalog((_axis_case(["pytorch-lightning<2.1", "setuptools<81"]),)))
    siblings = {c.id: (c.extra, c.variants) for c in cells if c.extra and c.device == "cpu"}
    assert siblings == {
        f"py311-torch{t}-pl2.0.3-with-setuptools-lt-81": (("setuptools<81",), ("demo::old_lightning[cpu]",))
        for t in ("2.0.1", "2.1.2", "2.3.1")
    }


def test_an_install_workaround_on_an_axis_the_case_does_not_span_names_the_case_file(tmp_path: Path) -> None:
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(TINY), "nightly", Catalog((_axis_case(["lightning<2.1"], axes=("torch",)),), tmp_path))
    assert str(info.value).startswith(
        f"{tmp_path / 'demo.py'}: install workaround 'old_lightning' requires 'lightning<2.1', a release of axis"
    )
    assert "which the case does not span; add 'lightning' to its variants' axes=" in str(info.value)


def test_a_workaround_requirement_that_contradicts_a_constraint_names_the_case_file(tmp_path: Path) -> None:
    """``setuptools>=81`` against the matrix's ``setuptools<81`` for old Lightning: the case file first, then the matrix entry."""
    matrix_text = TINY.read_text().replace(
        "[harness]", '[[constraints]]\nwhen = { lightning = "<2.1" }\nrequires = ["setuptools<81"]\nwhy = "t"\n\n[harness]'
    )
    path = tmp_path / "matrix.toml"
    path.write_text(matrix_text)
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(path), "nightly", Catalog((_axis_case(["setuptools>=81"]),), tmp_path / "cases"))
    message = str(info.value)
    assert message.startswith(
        f"{tmp_path / 'cases' / 'demo.py'}: install workaround requires 'setuptools>=81', which contradicts constraints[1]"
    )
    assert "narrow the workaround's requires" in message and "\n" not in message
