"""A case owns the environment it needs (issue 44): declared beside its variants, built as a sibling, never masked by a constraint.

``Case(environments={"bare": Env(absent=["setuptools"])})`` declares it, each
variant names the one it runs in (``environment="bare"``); the planner adds,
beside every cell that runs such a variant, a sibling with the same pins plus
that environment (keyed by what it holds), which runs only those variants. A
requirement on an axis's own distribution runs in the axis's cells that satisfy
it instead. Where the environment names a distribution a ``[[constraints]]``
entry names, the case's environment wins in its cells and the plan says so.
The fast tests pin the declaration and the plan down; the e2e test builds a
real environment-level case (lightning-utilities < 0.11.5 imports
``pkg_resources``) with uv, runs it through the runner and reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_BF16, CUDA_FP16, Case, CaseError, Expect
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Signature
from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import override_notes, plan_cells, plan_document, sibling_id
from bugmatrix.plan.computed import choose
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.command import run_file_path
from bugmatrix.run.envbuild import cell_venv, fresh_venv
from bugmatrix.run.lock import lock_path
from bugmatrix.run.runner import CellSpec, run_cell
from bugmatrix.tools.bisect import run_variant_in
from bugmatrix.tools.check import constraint_changes
from bugmatrix.tools.repro import export_repro
from tests.fixtureproject import run_smoke_night

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "env_case"
TINY = Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml"


def core(device: str, dtype: object) -> dict[str, bool]:
    return {}


def pinned(device: str, dtype: object) -> dict[str, bool]:
    return {}


NUMPY_BELOW_2 = Env(requires=["numpy<2"])


def _case(env: Env = NUMPY_BELOW_2, axes: tuple[str, ...] = ("torch",), devices: tuple = (CUDA_FP16, CPU_BF16)) -> Case:
    case = Case(id="demo", title="t", signature=Signature("x"), axes=axes, environments={"pinned": env})
    case.variant(devices=devices)(core)
    case.variant(devices=devices, environment="pinned", workaround_for="core", expect=(Expect("fixed"),))(pinned)
    return case


def test_a_variant_names_the_environment_it_runs_in() -> None:
    case = _case()
    _, _, cuda, cpu = case.variants
    assert [(v.id, v.kind, v.workaround_for, v.environment) for v in (cuda, cpu)] == [
        ("demo::pinned[cuda]", "workaround", "core", "pinned"),
        ("demo::pinned[cpu]", "workaround", "core", "pinned"),
    ]
    assert cpu.env == Env(requires=["numpy<2"]) and case.variants[0].env == Env()


@pytest.mark.parametrize(
    ("environments", "environment", "message"),
    [
        ({}, "nothing", "environment='nothing' is not declared; add it to Case(environments=...) (declared: none)"),
        ({"e": Env(requires=["numpy<<2"])}, "e", "requires 'numpy<<2' is not a requirement"),
        ({"e": Env(absent=["setuptools<81"])}, "e", "absent 'setuptools<81' is not a distribution name"),
        ({"e": Env(requires=["setuptools<81"], absent=["setuptools"])}, "e", "setuptools is both required and absent"),
        ({"e": Env(flags=("error",))}, "e", "are not interpreter options"),
        ({"e": Env(flags=("-m", "x"))}, "e", "name -m or -c"),
        ({"e": Env(variables={"1X": "y"})}, "e", "is not a variable"),
        ({"e": ["setuptools"]}, "e", "is not an Env"),
    ],
)
def test_a_bad_environment_is_one_line(environments: dict, environment: str, message: str) -> None:
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        case = Case(id="demo", title="t", signature=Signature("x"), axes=("torch",), environments=environments)
        case.variant(devices=(CPU_BF16,), environment=environment)(core)
    assert "\n" not in str(info.value) and "case 'demo'" in str(info.value)


def test_a_sibling_cell_is_planned_beside_every_cell_that_runs_the_variant() -> None:
    """Same pins, the environment, only its variants; the cell does not run them; the plan says whose sibling."""
    matrix = load_matrix(TINY)
    cells = plan_cells(matrix, "smoke", Catalog((_case(),)))
    by_id = {c.id: c for c in cells}
    assert [c.id for c in cells if c.device == "cpu"] == [
        "py311-torch2.1.2", "py311-torch2.1.2-with-numpy-lt-2", "py311-torch2.3.1", "py311-torch2.3.1-with-numpy-lt-2",
    ]  # fmt: skip
    sibling, base = by_id["py311-torch2.1.2-with-numpy-lt-2"], by_id["py311-torch2.1.2"]
    assert sibling.pins == base.pins and sibling.extra == Env(requires=["numpy<2"]) and sibling.sibling_of == base.id
    assert sibling.variants == ("demo::pinned[cuda]", "demo::pinned[cpu]")
    assert "demo::pinned[cpu]" not in base.variants and "demo::core[cpu]" in base.variants
    assert matrix.requirements_for(sibling.pins, extra=sibling.extra) == ["torch==2.1.2", "numpy<2", *matrix.file.harness.requires]
    entry = next(c for c in plan_document(matrix, "smoke", cells)["cells"] if c["id"] == sibling.id)
    assert entry["environment"] == {"requires": ["numpy<2"]} and entry["sibling_of"] == base.id
    assert "environment" not in next(c for c in plan_document(matrix, "smoke", cells)["cells"] if c["id"] == base.id)


def test_a_sibling_is_named_by_what_its_environment_holds() -> None:
    env = Env(requires=["setuptools<81", "numpy>=1.20,<2"], absent=["Typing_Extensions"], variables={"PYTHONWARNINGS": "error"})
    assert sibling_id("c", env) == "c-with-setuptools-lt-81-and-numpy-lt-2-ge-1.20-without-typing-extensions-env-pythonwarnings-error"
    assert sibling_id("c", Env(flags=("-W", "error::DeprecationWarning"))) == "c-flags-w-error-deprecationwarning"
    assert Env(absent=["setuptools"]).describe() == "setuptools absent" and not Env() and Env(flags=("-X", "dev"))


def test_a_cuda_twins_sibling_installs_its_cpu_siblings_lock_and_no_name_is_taken_twice(tmp_path: Path) -> None:
    """Every CUDA cell is its CPU cell's id + ``-cuda`` (siblings too), so it installs that cell's lock (the only one ``nox -s lock``
    writes) and the re-resolve lane finds it; a sibling (``-with-``) and a fresh-lane run of any cell never share a venv or a run file."""
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


def test_an_environment_pinning_an_axis_that_no_release_satisfies_names_the_case_file(tmp_path: Path) -> None:
    """``torch<2`` where torch is an axis is read from torch's cells; where no listed torch satisfies it, the case file is named."""
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(TINY), "smoke", Catalog((_case(Env(requires=["torch<2"])),), tmp_path / "cases"))
    assert str(info.value) == (
        f"{tmp_path / 'cases' / 'demo.py'}: environment 'pinned' of variant 'pinned' requires 'torch<2', a release of axis 'torch', "
        f"but no release in axes.torch.versions of {TINY} satisfies it; list one there"
    )


def test_an_environment_cannot_make_an_axis_absent(tmp_path: Path) -> None:
    with pytest.raises(
        BugmatrixError, match=r"demo.py: environment 'pinned' of variant 'pinned' makes 'torch' absent, which provides axis"
    ):
        plan_cells(load_matrix(TINY), "smoke", Catalog((_case(Env(absent=["torch"])),), tmp_path))


def test_an_environment_pinning_an_axis_runs_in_that_axis_cells_that_satisfy_it() -> None:
    """``lightning<2.1`` where lightning is an axis (a pin workaround): no sibling; it runs where pl < 2.1, where its cell does."""
    cells = plan_cells(
        load_matrix(TINY), "nightly", Catalog((_case(Env(requires=["lightning<2.1"]), ("torch", "lightning"), (CPU_BF16,)),))
    )
    assert not [c for c in cells if c.extra], "no sibling environment"
    runs = {c.id: c.variants for c in cells if c.device == "cpu"}
    assert runs["py311-torch2.1.2-pl2.0.3"] == ("demo::core[cpu]", "demo::pinned[cpu]")
    assert runs["py311-torch2.1.2-pl2.2.5"] == ("demo::core[cpu]",), "pl 2.2.5 does not satisfy lightning<2.1"


def test_the_rest_of_such_an_environment_is_a_sibling_beside_the_cells_that_satisfy_the_axis_part() -> None:
    """``["pytorch-lightning<2.1", "setuptools<81"]``: setuptools in a sibling, only beside the pl 2.0.3 cells."""
    env = Env(requires=["pytorch-lightning<2.1", "setuptools<81"])
    cells = plan_cells(load_matrix(TINY), "nightly", Catalog((_case(env, ("torch", "lightning"), (CPU_BF16,)),)))
    siblings = {c.id: (c.extra, c.variants) for c in cells if c.extra and c.device == "cpu"}
    assert siblings == {
        f"py311-torch{t}-pl2.0.3-with-setuptools-lt-81": (Env(requires=["setuptools<81"]), ("demo::pinned[cpu]",))
        for t in ("2.0.1", "2.1.2", "2.3.1")
    }


def test_an_environment_on_an_axis_the_case_does_not_span_names_the_case_file(tmp_path: Path) -> None:
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(TINY), "nightly", Catalog((_case(Env(requires=["lightning<2.1"])),), tmp_path))
    assert str(info.value).startswith(
        f"{tmp_path / 'demo.py'}: environment 'pinned' of variant 'pinned' requires 'lightning<2.1', a release of axis"
    )
    assert "which the case does not span; add 'lightning' to its variants' axes=" in str(info.value)


def _constrained(tmp_path: Path) -> Path:
    """The tiny matrix with old Lightning's ``setuptools<81`` constraint: what hid the bug of issue 44's first newcomer."""
    text = TINY.read_text().replace(
        "[harness]", '[[constraints]]\nwhen = { lightning = "<2.1" }\nrequires = ["setuptools<81"]\nwhy = "t"\n\n[harness]'
    )
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (Env(absent=["setuptools"]), "(setuptools absent) takes over from constraints[1] (when lightning<2.1): 'setuptools<81' is not installed there"),
        (Env(requires=["setuptools>=81"]), "(setuptools>=81) takes over from constraints[1] (when lightning<2.1): 'setuptools<81' is not installed there"),
    ],
)  # fmt: skip
def test_a_constraint_that_would_mask_a_case_is_caught_at_plan_time(tmp_path: Path, env: Env, says: str) -> None:
    """The case's environment needs setuptools absent (or newer than the constraint allows): it wins in its own cells, and the plan
    document, ``plan``'s notes and ``check`` say so, naming the case file and the constraint; the other cells keep the constraint."""
    matrix = load_matrix(_constrained(tmp_path))
    cells = plan_cells(matrix, "nightly", Catalog((_case(env, ("torch", "lightning"), (CPU_BF16,)),), tmp_path / "cases"))
    siblings = [c for c in cells if c.extra and c.device == "cpu"]
    assert {c.pins["lightning"] for c in siblings} == {"2.0.3", "2.2.5"}
    masked = [c for c in siblings if c.pins["lightning"] == "2.0.3"]
    who = f"{tmp_path / 'cases' / 'demo.py'}'s environment 'pinned' {says}"
    assert all(c.overrides == (who,) for c in masked) and len(masked) == 3
    assert not [c for c in siblings if c.pins["lightning"] == "2.2.5" and c.overrides], "no constraint there, nothing taken over"
    for cell in masked:
        requirements = matrix.requirements_for(cell.pins, extra=cell.extra)
        assert "setuptools<81" not in requirements and set(env.requires) <= set(requirements)
        assert "setuptools<81" in matrix.requirements_for(cell.pins), "its cell (every other case's) keeps the constraint"
    assert override_notes(cells) == [f"{who} (3 cells)"]
    document = plan_document(matrix, "nightly", cells)
    assert [c["overrides"] for c in document["cells"] if "overrides" in c] == [[who]] * 3
    lines = constraint_changes(matrix, Catalog((_case(env, ("torch", "lightning"), (CPU_BF16,)),)), cells, tmp_path / "cases", tmp_path)
    assert "cases/demo.py: constraints[0] (when lightning<2.1) installs pytorch-lightning for lightning in 6 of its 10 cells" in lines
    assert "cases/demo.py: constraints[1] (when lightning<2.1) requires setuptools<81 in 3 of its 10 cells" in lines
    assert any(line.endswith("'setuptools<81' is not installed there in 3 of its 10 cells") for line in lines)


def test_an_environment_that_adds_nothing_to_its_cell_runs_in_the_cell(tmp_path: Path) -> None:
    """``setuptools<81`` where the constraint already installs it: the cell and its sibling would be one environment, so no sibling."""
    matrix = load_matrix(_constrained(tmp_path))
    cells = plan_cells(matrix, "nightly", Catalog((_case(Env(requires=["setuptools<81"]), ("torch", "lightning"), (CPU_BF16,)),)))
    runs = {c.id: c.variants for c in cells if c.device == "cpu"}
    assert runs["py311-torch2.1.2-pl2.0.3"] == ("demo::core[cpu]", "demo::pinned[cpu]")
    assert runs["py311-torch2.1.2-pl2.2.5-with-setuptools-lt-81"] == ("demo::pinned[cpu]",)
    assert not any(c.overrides for c in cells)


def test_an_environment_whose_own_requirements_contradict_names_the_case_file(tmp_path: Path) -> None:
    env = Env(requires=["setuptools<81", "setuptools>=82"])
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(TINY), "smoke", Catalog((_case(env),), tmp_path / "cases"))
    message = str(info.value)
    assert (
        message.startswith(f"{tmp_path / 'cases' / 'demo.py'}: the case's environment requires ") and "fix the Env(requires=...)" in message
    )
    assert "\n" not in message


@pytest.mark.e2e
def test_a_real_environment_level_case_reproduces_and_its_pin_workaround_fixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Acceptance (issue 44): lightning-utilities 0.11.3.post0 imports ``pkg_resources``; its case owns an environment without
    setuptools, against the matrix's ``setuptools<81`` constraint. Every environment is built with uv and run by the runner.

    Where setuptools is absent the stack does not import: the case's bug reads reproduced (its signature, from the import check),
    the pinned workaround reads fixed (in the cell itself: the constraint installs what it pins), and the other case, in the same
    cells, reads what it reads without the environment case.
    """
    matrix = load_matrix(FIXTURE / "matrix.toml")
    alone = plan_cells(
        matrix, "smoke", Catalog(tuple(c for c in load_catalog(FIXTURE / "cases", matrix).cases if c.id == "utilities_apply"))
    )
    night = run_smoke_night(FIXTURE, tmp_path)
    bug, fix = "utilities_pkg_resources::import_utilities[cpu]", "utilities_pkg_resources::setuptools_below_81[cpu]"
    other, upgrade = "utilities_apply::apply_to_collection[cpu]", "utilities_pkg_resources::upgrade_utilities[cpu]"
    assert {c.id: c.variants for c in night.cells} == {
        "py311-lu0.11.3.post0": (other, fix),
        "py311-lu0.11.3.post0-without-setuptools": (bug,),
        "py311-lu0.11.5": (other,),
        "py311-lu0.11.5-with-setuptools-lt-81": (fix,),
        "py311-lu0.11.5-without-setuptools": (bug, upgrade),
    }
    assert [c.overrides for c in night.cells if c.overrides] == [
        (
            f"{tmp_path / 'project' / 'cases' / 'utilities_pkg_resources.py'}'s environment 'without_setuptools' (setuptools absent) "
            "takes over from constraints[0] (when utilities<0.11.5): 'setuptools<81' is not installed there",
        )
    ]
    assert night.report_code == 0
    results = night.compat()["results"]
    reproduced = results[bug]["py311-lu0.11.3.post0-without-setuptools"]
    assert reproduced["outcome"] == "reproduced" and reproduced["verdict"] == "as-expected"
    assert reproduced["message"] == (
        "import lightning_utilities: ModuleNotFoundError: No module named 'pkg_resources' (lightning_utilities/core/imports.py:14)"
    )
    assert reproduced["workarounds"] == ["setuptools_below_81"], "fixed in the cell it is a sibling of"
    assert results[bug]["py311-lu0.11.5-without-setuptools"]["outcome"] == "fixed"
    assert {cell: e["outcome"] for cell, e in results[fix].items()} == {
        "py311-lu0.11.3.post0": "fixed",
        "py311-lu0.11.5-with-setuptools-lt-81": "fixed",
    }
    assert {cell: e["outcome"] for cell, e in results[other].items()} == {"py311-lu0.11.3.post0": "fixed", "py311-lu0.11.5": "fixed"}
    assert {c.id: c.variants for c in alone} == {"py311-lu0.11.3.post0": (other,), "py311-lu0.11.5": (other,)}, "its cells, unchanged"
    runs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (night.reports / "runs").glob("*.json")}
    assert all(r["install"]["status"] == "ok" for r in runs.values()), "a stack that does not import is no install failure"
    assert "setuptools" not in runs["py311-lu0.11.3.post0-without-setuptools"]["environment"]["distributions"]
    assert runs["py311-lu0.11.3.post0"]["environment"]["distributions"]["setuptools"].startswith("80.")
    out = capsys.readouterr().out
    assert (
        "workarounds fixed where it reproduced: setuptools_below_81 ✓ 1/1; "
        "upgrade_utilities avoided by pinning lightning-utilities ≥ 0.11.5, where the bug is absent (1 cell)"
    ) in out, out[-2000:]
    assert results[upgrade] == {"py311-lu0.11.5-without-setuptools": results[upgrade]["py311-lu0.11.5-without-setuptools"]}
    assert main(["--matrix", str(tmp_path / "project" / "matrix.toml"), "--cases", str(tmp_path / "project" / "cases"), "check"]) == 1
    said = capsys.readouterr().out
    assert "bugmatrix: constraint: cases/utilities_pkg_resources.py: " in said and "takes over from constraints[0]" in said
    # Every path builds the variant's own environment: a bisect probe runs in the sibling, a repro says how to make it.
    root, variant = tmp_path / "project", load_catalog(tmp_path / "project" / "cases", matrix).find(bug)
    probe, _ = run_variant_in(root, matrix, {"python": "3.11", "utilities": "0.11.3.post0"}, variant)
    assert (probe.outcome, probe.message) == ("reproduced", reproduced["message"])
    issue = (
        export_repro(matrix, variant, {"python": "3.11", "utilities": "0.11.3.post0"}, tmp_path / "repro", root, fresh=False) / "ISSUE.md"
    )
    text = issue.read_text(encoding="utf-8")
    assert (issue.parent / "requirements.txt").read_text(encoding="utf-8") == "lightning-utilities==0.11.3.post0\n", "no setuptools<81"
    assert "uv pip uninstall --python venv/bin/python setuptools\nvenv/bin/python repro.py" in text


def test_a_computed_profile_reads_a_siblings_outcomes_for_its_cell() -> None:
    """An environment case's bug runs only in siblings: the smoke choice still finds it both ways, under the cells' own ids."""
    case = Case(id="demo", title="t", signature=Signature("x"), axes=("torch",), environments={"bare": Env(absent=["setuptools"])})
    expect = (Expect("reproduced", torch="<2.3"), Expect("fixed", torch=">=2.3"))
    case.variant(devices=(CPU_BF16,), environment="bare", expect=expect)(core)
    matrix = load_matrix(TINY)
    catalog = Catalog((case,))
    candidates = plan_cells(matrix, "nightly", catalog)
    assert all(c.sibling_of for c in candidates), "the case runs nothing in a plain cell"
    choice = choose(matrix, catalog.slices(matrix)[0], candidates)
    assert choice.cells == ("py311-torch2.0.1", "py311-torch2.3.1") and "demo::core[cpu] reproduced" in choice.shows


def test_a_siblings_variables_and_flags_reach_the_cells_process(tmp_path: Path) -> None:
    """The runner starts the cell's pytest with the environment's interpreter flags and variables; its spec file says which."""
    seen: list[tuple[list[str], dict[str, str]]] = []
    extra = Env(variables={"PYTHONWARNINGS": "error::DeprecationWarning"}, flags=("-X", "dev"))
    spec = CellSpec("system", None, extra=extra)
    run_cell(
        load_matrix(TINY), spec, tmp_path / "runs" / "system.json", execute=lambda c, e: seen.append((list(c), dict(e))) or 0, root=ROOT
    )
    ((command, env),) = seen
    assert command[1:5] == ["-X", "dev", "-m", "pytest"] and env["PYTHONWARNINGS"] == "error::DeprecationWarning"
    assert json.loads((tmp_path / "spec" / "system.json").read_text())["environment"] == extra.to_json()
