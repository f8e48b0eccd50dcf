"""A case's versions are its own (issue 44).

* ``Case(versions=...)`` adds releases of a shared axis to that case's cells only:
  a case beside the T5 case (the same Lightning x transformers axes) with two
  transformers releases the matrix does not list leaves every other case's cells,
  variants and ``plan --cost`` line as they were, in every profile.
* Its mistakes are one line naming the case file, at plan time: a version that is
  no release, one matrix.toml lists already, an axis it does not span, a version
  its cross leaves out.

Everything plans the frozen reference catalogue and matrix (:mod:`tests.reference`), never ``cases/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_FP32, Case, CaseError
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Signature
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell, plan_cells
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.releases.registry import Releases
from bugmatrix.releases.tracking import load_plan, load_resolved_matrix
from tests.fullscale import full_runs
from tests.reference import REFERENCE_MATRIX, reference_catalog, reference_matrix
from tests.test_case_cost import cost_lines, reference_runs

OWN = ("4.51.3", "4.52.1")  # real transformers releases (tests/fixtures/registry) the reference matrix does not list


def _body(name: str) -> Callable[[str, object], dict[str, bool]]:
    """A variant body named ``name`` (each registers once)."""

    def body(device: str, dtype: object) -> dict[str, bool]:
        return {}

    body.__name__ = name
    return body


def newcomer(axes: tuple[str, ...] = ("torch", "transformers"), **declared: object) -> Case:
    """A case on torch x transformers (issue 44's second newcomer), or on other axes: two variants, its own declarations."""
    case = Case(id="newcomer", title="t", signature=Signature("x"), axes=axes, **declared)  # type: ignore[arg-type]
    case.variant(devices=(CPU_FP32,))(_body("core"))
    case.variant(devices=(CPU_FP32,), workaround_for="core")(_body("pinned"))
    return case


def per_case(cells: list[Cell], catalog: Catalog) -> dict[str, dict[str, tuple[str, ...]]]:
    """case -> {cell id: the case's variants there}."""
    found = {}
    for case in catalog.cases:
        own = {v.id for v in case.variants}
        found[case.id] = {c.id: tuple(v for v in c.variants if v in own) for c in cells if own & set(c.variants)}
    return found


def test_a_torch_x_transformers_case_with_two_releases_of_its_own_changes_no_other_case(tmp_path: Path) -> None:
    """Issue 44's second newcomer: transformers 4.51.3 and 4.52.1 for its cells; the T5 case keeps its cells and its cost line."""
    matrix, before = reference_matrix(), reference_catalog()
    after = Catalog((*before.cases, newcomer(versions={"transformers": OWN})))
    reference = reference_runs([r for r in full_runs() if r.results], tmp_path / "runs")
    for profile in matrix.profiles:
        lines, grown = cost_lines(before, reference, tmp_path, profile), cost_lines(after, reference, tmp_path, profile)
        assert {case: grown[case] for case in lines} == lines, f"profile {profile}: another case's plan --cost line changed"
    _own_versions_grow_its_cells_only(after)


def test_a_case_on_another_case_s_axes_shares_its_cells_but_not_its_own_releases() -> None:
    """Beside the T5 case (Lightning x transformers): the listed releases' cells are shared, its own releases are its alone."""
    _own_versions_grow_its_cells_only(
        Catalog((*reference_catalog().cases, newcomer(("lightning", "transformers"), versions={"transformers": OWN})))
    )


def _own_versions_grow_its_cells_only(after: Catalog) -> None:
    """In every profile: every other case runs exactly where and what it ran; the newcomer runs at its own releases, alone."""
    matrix, before = reference_matrix(), reference_catalog()
    for profile in matrix.profiles:
        old, new = plan_cells(matrix, profile, before), plan_cells(matrix, profile, after)
        assert per_case(new, before) == per_case(old, before), f"profile {profile}: another case's cells or variants changed"
        mine = per_case(new, after)["newcomer"]
        releases = {c.pins["transformers"] for c in new if c.id in mine}
        assert set(OWN) <= releases, f"profile {profile}: its own releases are planned for it ({sorted(releases)})"
        for cell in new:
            if cell.pins.get("transformers") in OWN:
                assert set(cell.variants) == set(mine[cell.id]), f"{cell.id} runs the newcomer's variants only"
    nightly = per_case(plan_cells(matrix, "nightly", after), after)
    assert len(nightly["t5_loss_no_grad_fn"]) == len(per_case(plan_cells(matrix, "nightly", before), before)["t5_loss_no_grad_fn"])


def test_the_same_releases_in_matrix_toml_would_grow_the_other_case(tmp_path: Path) -> None:
    """Why versions= exists: listed in matrix.toml instead, the T5 case's nightly cells grow with them."""
    text = REFERENCE_MATRIX.read_text(encoding="utf-8")
    listed = ", ".join(f'"{v}"' for v in OWN)
    grown = text.replace('versions = ["4.28.1",', f'versions = [{listed}, "4.28.1",', 1)
    grown = grown.replace('transformers = ["4.29.2",', f'transformers = [{listed}, "4.29.2",', 1)
    grown = grown.replace('transformers = ["4.28.1",', f'transformers = [{listed}, "4.28.1",', 1)
    assert grown.count("4.51.3") == 3, "the fixture's lists moved: update this edit (the axis, nightly, full)"
    (tmp_path / "matrix.toml").write_text(grown, encoding="utf-8")
    matrix = load_resolved_matrix(tmp_path / "matrix.toml")
    catalog = Catalog((*reference_catalog().cases, newcomer()))
    t5 = per_case(plan_cells(matrix, "nightly", catalog), catalog)["t5_loss_no_grad_fn"]
    before = per_case(plan_cells(reference_matrix(), "nightly", reference_catalog()), reference_catalog())["t5_loss_no_grad_fn"]
    assert len(t5) > len(before)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (
            {"versions": {"lightning": ("2.0.4",)}},
            r"^cases/newcomer\.py: versions names axis 'lightning', which none of the case's variants spans",
        ),
        ({"versions": {"numpy": ("1.26.4",)}}, r"^cases/newcomer\.py: versions names axis 'numpy', which .* does not declare"),
        (
            {"versions": {"transformers": OWN}, "cross": {"transformers": "<4.52"}},
            r"^cases/newcomer\.py: versions\.transformers lists '4\.52\.1', which its cross \(transformers<4\.52\) leaves out",
        ),
    ],
)
def test_a_version_the_case_cannot_have_is_one_line_naming_its_file(declared: dict, message: str) -> None:
    with pytest.raises(BugmatrixError, match=message) as info:
        plan_cells(reference_matrix(), "nightly", Catalog((*reference_catalog().cases, newcomer(**declared)), Path("cases")))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "bad", [{"transformers": "4.51.3"}, {"transformers": ("v4.51.3",)}, {"transformers": ("4.51.3", "4.51.3")}, ["4.51.3"]]
)
def test_a_malformed_declaration_is_one_line_at_import(bad: object) -> None:
    with pytest.raises(CaseError, match=r"^case 'bad': versions") as info:
        Case(id="bad", title="t", signature=Signature("x"), versions=bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_version_that_is_no_release_or_is_listed_already_is_one_line(tmp_path: Path) -> None:
    """Like matrix.toml's own versions: checked through the cached registry client, the answer a stand-in here (cached apart)."""
    cache = tmp_path / "registry"
    declared = load_matrix(REFERENCE_MATRIX)
    project = {"releases": {v: [{"filename": f"transformers-{v}-py3-none-any.whl"}] for v in ("4.51.3", "4.52.1")}}

    def check(*versions: str) -> None:
        Releases(cache, lambda name: project).check_case_versions(declared, [("cases/newcomer.py", "transformers", versions)])

    check(*OWN)
    with pytest.raises(BugmatrixError) as info:
        check("4.51.3", "4.51.9")
    assert str(info.value) == (
        "cases/newcomer.py: versions.transformers[1]: '4.51.9' is not a release of transformers on the registry; "
        "correct the version or remove it"
    )
    with pytest.raises(BugmatrixError, match=r"^cases/newcomer\.py: versions\.transformers: '4\.30\.2' is listed in axes\.transformers"):
        Releases().check_case_versions(declared, [("cases/newcomer.py", "transformers", ("4.30.2",))], ask=False)


NEWCOMER_FILE = '''"""A fixture case with its own transformers releases."""

from bugmatrix import CPU_FP32, Case, Signature

case = Case(id="newcomer", title="t", signature=Signature("x"), axes=("lightning", "transformers"), versions={"transformers": VERSIONS})


@case.variant(devices=(CPU_FP32,))
def core(device, dtype):
    return {}
'''


def test_the_plan_refuses_a_case_version_that_is_no_release(tmp_path: Path) -> None:
    """The whole path ``plan`` and ``nox -l`` take (load_plan), offline: against the registry's cached answers."""
    shutil.copy(REFERENCE_MATRIX, tmp_path / "matrix.toml")
    (tmp_path / "cases").mkdir()
    case_file = tmp_path / "cases" / "newcomer.py"
    case_file.write_text(NEWCOMER_FILE.replace("VERSIONS", repr(OWN)), encoding="utf-8")
    planned = load_plan(load_matrix(tmp_path / "matrix.toml"), tmp_path / "cases", offline=True)
    assert {c.pins["transformers"] for c in planned.profile_cells("nightly")} >= set(OWN)
    case_file.write_text(NEWCOMER_FILE.replace("VERSIONS", repr(("4.51.9",))), encoding="utf-8")
    with pytest.raises(BugmatrixError, match=rf"^{case_file}: versions\.transformers\[0\]: '4\.51\.9' is not a release of transformers"):
        load_plan(load_matrix(tmp_path / "matrix.toml"), tmp_path / "cases", offline=True)


def test_an_install_workaround_pinned_to_a_case_s_own_release_runs_in_its_cells() -> None:
    """``Env(requires=["transformers==4.51.3"])``: read from the case's own 4.51.3 cells, where it runs; no release of the matrix holds it."""
    case = newcomer(versions={"transformers": OWN}, environments={"pinned": Env(requires=["transformers==4.51.3"])})
    case.variant(devices=(CPU_FP32,), workaround_for="core", environment="pinned")(_body("pinned_4513"))
    cells = plan_cells(reference_matrix(), "nightly", Catalog((*reference_catalog().cases, case)))
    running = {c.pins["transformers"] for c in cells if "newcomer::pinned_4513[cpu]" in c.variants}
    assert running == {"4.51.3"} and not any(c.extra for c in cells if "newcomer::pinned_4513[cpu]" in c.variants)
