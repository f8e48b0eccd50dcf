"""Cost grows by the case, not by the catalogue (issue 33 items 3, 4): slices, computed smoke, the price of a case.

* A property test with an oracle: random catalogues of 2-12 cases over a
  random matrix of 3-5 package axes plan exactly the union of the cases'
  slices (worked out here by hand), and every cell runs exactly the variants
  of the cases whose slice holds it.
* A torch x transformers case with three transformers releases, added to the
  fixture catalogue (:mod:`tests.reference`) planned with the live matrix and
  its committed smoke choice: smoke grows by at most two CPU cells, and no
  other case's cells (ids, pins, variant lists) change in any profile.
* smoke is computed: the committed choice equals the recomputation, a stale
  one is one line of ``check``, and ``Case(cross=...)`` narrows a slice.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet

from bugmatrix.cell.case import CPU_BF16, CUDA_FP16, Case, CaseError, Expect
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Signature
from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell, plan_cells, recompute
from bugmatrix.plan.computed import committed_choices, reference_outcomes
from bugmatrix.plan.loader import load_case
from bugmatrix.plan.matrix import Matrix, load_matrix, parse_matrix
from bugmatrix.releases.tracking import load_resolved_matrix, without_symbolic
from bugmatrix.run.lock import added_size, create_lock
from tests.reference import reference_case_files, reference_catalog
from tests.test_lock import registry_reachable

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("1.0", "2.0", "3.0")


def body(device: str, dtype: object) -> dict[str, bool]:
    return {}


# --- the property: planned cells are the union of the slices ------------------------------------------------------


@st.composite
def catalogues(draw: st.DrawFn) -> tuple[Matrix, Catalog]:
    """A matrix of 3-5 package axes (one profile, random version lists, a random every_cell axis) and 2-12 cases."""
    names = [f"ax{i}" for i in range(draw(st.integers(3, 5)))]
    axes: dict[str, dict] = {"python": {"prefix": "py", "versions": ["3.11"]}}
    held = draw(st.sets(st.sampled_from(names), max_size=1))
    for i, name in enumerate(names):
        count = draw(st.integers(1, 3))
        axes[name] = {"prefix": f"p{i}x", "distributions": {f"dist{i}": f"mod{i}"}, "versions": list(VERSIONS[:count])}
        if name in held:
            axes[name]["every_cell"] = True
    base = {"python": "3.11", **{n: draw(st.sampled_from(axes[n]["versions"])) for n in names}}
    profile = {"python": ["3.11"]}  # a profile lists something (an empty one is refused): here at least the interpreter
    for name in names:
        if draw(st.booleans()):
            profile[name] = sorted(draw(st.sets(st.sampled_from(axes[name]["versions"]), min_size=1)))
    matrix = parse_matrix({"schema": 2, "base": base, "axes": axes, "profiles": {"p": profile}}, Path("fixture.toml"))
    cases = []
    for c in range(draw(st.integers(2, 12))):
        case = Case(id=f"case{c}", title="t", signature=Signature("x"))
        for v in range(draw(st.integers(1, 3))):
            spans = tuple(sorted(draw(st.sets(st.sampled_from(names), max_size=3))))
            devices = draw(st.sampled_from([(CPU_BF16,), (CUDA_FP16, CPU_BF16)]))
            case.variant(devices=devices, axes=spans)(_named(f"v{v}"))
        if case.spans and draw(st.booleans()):
            axis = draw(st.sampled_from(case.spans))
            case.cross = {axis: f">={draw(st.sampled_from(VERSIONS))}"}
        cases.append(case)
    return matrix, Catalog(tuple(cases))


def _named(name: str) -> Callable[[str, object], dict[str, bool]]:
    """A variant function named ``name``, so each registers once."""

    def fn(device: str, dtype: object) -> dict[str, bool]:
        return {}

    fn.__name__ = name
    return fn


def oracle_slice(matrix: Matrix, case: Case, profile: str | None = "p") -> set[str]:
    """A case's cells, by hand: its spanned axes crossed at the profile's versions (else base), held axes at base, its cross applied.

    ``profile=None``: its whole cross (every version of each spanned axis), the points whose cells run it in any profile.
    """
    spans = sorted({a for v in case.variants for a in v.axes})
    held = {a: matrix.base[a] for a in matrix.held_axes}
    listed = matrix.profiles[profile] if profile else {a: matrix.axes[a].versions for a in spans}
    found = set()
    for combo in itertools.product(*(listed.get(a, (matrix.base[a],)) for a in spans)):
        pins = {**held, **dict(zip(spans, combo, strict=True))}
        if all(SpecifierSet(spec).contains(pins[a]) for a, spec in case.cross.items()):
            found.add(matrix.cell_id(pins))
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogues())
def test_planned_cells_are_the_union_of_the_slices_and_run_only_their_cases(drawn: tuple[Matrix, Catalog]) -> None:
    """A cell runs the variants of the cases whose slice (cross) holds it: a point of the profile's slice, or of the case's
    whole cross where a held axis it spans sits at its base (a cell's variants never depend on the profile planning it)."""
    matrix, catalog = drawn
    slices = {case.id: oracle_slice(matrix, case) for case in catalog.cases}
    crosses = {case.id: oracle_slice(matrix, case, None) for case in catalog.cases}
    union = set().union(*slices.values())
    if not union:
        with pytest.raises(BugmatrixError, match="plans no cells"):
            plan_cells(matrix, "p", catalog)
        return
    cells = plan_cells(matrix, "p", catalog)
    assert {c.id for c in cells} == union, "the planned cells are exactly the union of the cases' slices"
    for cell in cells:
        holders = [case for case in catalog.cases if cell.id in crosses[case.id]]
        assert any(cell.id in slices[case.id] for case in holders), f"{cell.id} is planned for one of the cases it runs"
        assert cell.variants == tuple(v.id for case in holders for v in case.variants), f"{cell.id} runs exactly its cases' variants"


# --- a torch x transformers case with three transformers releases -----------------------------------------------

TORCH_TF_CASE = '''"""A fixture case spanning torch x transformers (issue 33): three transformers releases, its own slice."""

from bugmatrix import CPU_BF16, Case, Expect, Signature

case = Case(
    id="tf_probe",
    title="a torch x transformers probe",
    signature=Signature("never"),
    axes=("torch", "transformers"),
    cross={"transformers": ">=4.29,<5.24"},
)


@case.variant(devices=(CPU_BF16,), expect=(Expect("reproduced", transformers="<4.30"), Expect("fixed", transformers=">=4.30")))
def core(device, dtype):
    return {}
'''


def _project(tmp_path: Path, *, new_case: bool) -> tuple[Matrix, Catalog]:
    """The live matrix (with its committed smoke choice), copied, and the fixture catalogue; with the torch x transformers case added.

    The catalogue is :func:`tests.reference.reference_catalog`, never ``cases/``: a user's own new case changes nothing here.
    """
    shutil.copy(ROOT / "matrix.toml", tmp_path / "matrix.toml")
    for path in load_matrix(ROOT / "matrix.toml").computed.values():
        shutil.copy(path, tmp_path)
    matrix = load_resolved_matrix(tmp_path / "matrix.toml")
    if not new_case:
        return matrix, reference_catalog()
    (tmp_path / "tf_probe.py").write_text(TORCH_TF_CASE, encoding="utf-8")
    return matrix, Catalog((*reference_catalog().cases, load_case(tmp_path / "tf_probe.py")))


def test_a_torch_x_transformers_case_costs_its_own_cells_only(tmp_path: Path) -> None:
    """smoke grows by at most 2 CPU cells; in every profile no other case's cell changes id, pins or variants."""
    (before_dir := tmp_path / "before").mkdir()
    (after_dir := tmp_path / "after").mkdir()
    matrix, catalog = _project(before_dir, new_case=False)
    grown_matrix, grown = _project(after_dir, new_case=True)
    new_variants = {v.id for v in grown.variants if v.case_id == "tf_probe"}
    assert new_variants
    for profile in matrix.profiles:
        old = {c.id: (dict(c.pins), c.device, c.variants) for c in plan_cells(matrix, profile, catalog)}
        new = {c.id: (dict(c.pins), c.device, c.variants) for c in plan_cells(grown_matrix, profile, grown)}
        assert {cid: new.get(cid) for cid in old} == old, f"profile {profile}: another case's cell changed"
        added = set(new) - set(old)
        assert all(set(new[cid][2]) <= new_variants for cid in added), f"profile {profile}: a new cell runs another case's variants"
        assert all(set(new[cid][0]) == {"python", "torch", "transformers"} for cid in added), "its own slice: torch x transformers"
    smoke_old = [c for c in plan_cells(matrix, "smoke", catalog) if c.device == "cpu"]
    smoke_new = [c for c in plan_cells(grown_matrix, "smoke", grown) if c.device == "cpu"]
    assert 1 <= len(smoke_new) - len(smoke_old) <= 2, "a case adds at most the two cells that show it both ways"
    releases = {c.pins["transformers"] for c in plan_cells(grown_matrix, "nightly", grown) if set(c.variants) & new_variants}
    assert len(releases) == 3, f"Case(cross=...) narrows its slice to three transformers releases: {sorted(releases)}"


LOCK_BUDGET_LINES = 40_000  # issue 33 item 5: what a new two-axis case may add to locks/


@pytest.mark.e2e
def test_a_torch_x_transformers_case_adds_locks_within_the_budget(tmp_path: Path) -> None:
    """Its new full-profile cells, resolved for real (uv, metadata only) and stored as pieces beside the committed locks/, add <= 40,000 lines."""
    if not registry_reachable():
        pytest.skip("the registry is unreachable: the new cells' locks cannot be resolved")
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    matrix, catalog = _project(tmp_path / "before", new_case=False)
    grown_matrix, grown = _project(tmp_path / "after", new_case=True)
    known = {c.id for c in plan_cells(matrix, "full", catalog)}
    added = [c for c in plan_cells(grown_matrix, "full", grown) if c.id not in known and c.device == "cpu"]
    assert len(added) >= 3 * 3, f"three transformers releases across the torch releases: {[c.id for c in added]}"

    def resolve(cell: Cell) -> tuple[str, str]:
        out = tmp_path / "resolved" / f"{cell.id}.txt"
        create_lock(grown_matrix.requirements_for(cell.pins), cell.python, out)
        return cell.id, out.read_text(encoding="utf-8")

    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = dict(pool.map(resolve, added))
    lines, size = added_size(ROOT / "locks", texts)
    whole = sum(text.count("\n") for text in texts.values())
    print(f"lock budget: {len(added)} new cells add {lines} lines / {size} bytes to locks/ ({whole} lines as whole files)")
    assert lines <= LOCK_BUDGET_LINES, f"{len(added)} new cells add {lines} lines ({size} bytes) to locks/; whole files: {whole}"
    assert lines < whole / 3, f"shared pieces are stored once: {lines} lines stored against {whole} as whole files"


# --- computed smoke, Case(cross=...), the price ---------------------------------------------------------------------


def test_the_committed_smoke_choice_is_the_recomputation() -> None:
    """matrix.smoke.json's choice for the fixture catalogue's cases equals `plan --compute smoke` from the committed reference.

    A user's new case is `nox -s check`'s to hold to its choice (its `computed` policy, which tests/test_catalogue.py runs).
    """
    declared = load_matrix(ROOT / "matrix.toml")
    matrix = without_symbolic(declared)
    catalog = reference_catalog()
    reference = reference_outcomes(ROOT / "reports" / "runs")
    for profile, path in matrix.computed.items():
        committed = {case: cells for case, cells in committed_choices(path).items() if case in {c.id for c in catalog.cases}}
        assert committed == {c.case: c.cells for c in recompute(matrix, profile, catalog, reference)}, (
            f"recompute it: python -m bugmatrix plan --compute {profile} --write"
        )
        within = {c.id for c in plan_cells(matrix, matrix.file.within[profile], catalog)}
        assert {c.id for c in plan_cells(matrix, profile, catalog)} <= within


def test_a_stale_smoke_choice_is_one_line_of_check(tmp_path: Path) -> None:
    root = tmp_path / "clone"
    reference_case_files(root / "cases")
    for name in ("reports/runs", "reports/bisect"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("matrix.toml", "matrix.smoke.json", "README.md"):
        shutil.copy(ROOT / name, root / name)
    shutil.copy(ROOT / "cases" / "README.md", root / "cases" / "README.md")
    text = (root / "matrix.smoke.json").read_text(encoding="utf-8")
    (root / "matrix.smoke.json").write_text(text.replace('"py311-torch2.15.0-pl2.6.6"\n', '"py311-torch2.5.1-pl2.6.6"\n', 1))
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "--matrix", str(root / "matrix.toml"), "--cases", str(root / "cases"), "check", "--policy", "computed"],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("bugmatrix: check: ")]
    assert line.startswith("bugmatrix: check: cases/double_unscale.py: matrix.smoke.json holds py311-torch2.5.1-pl2.6.6 for it")
    assert line.endswith("run python -m bugmatrix plan --compute smoke --write and commit matrix.smoke.json")


def test_a_new_case_without_a_committed_choice_is_chosen_from_its_expectations(tmp_path: Path) -> None:
    """No entry in matrix.smoke.json: its cells come from its expect= rules at plan time (reproduced <4.30, fixed from it)."""
    matrix, catalog = _project(tmp_path, new_case=True)
    smoke = [c for c in plan_cells(matrix, "smoke", catalog) if "tf_probe::core[cpu]" in c.variants and c.device == "cpu"]
    assert sorted(c.pins["transformers"] for c in smoke) == ["4.29.2", "5.23.0"], "the oldest where it reproduces, the base where fixed"
    assert len({c.pins["torch"] for c in smoke}) == 1, "the two differ along transformers only: a boundary, not two axes at once"


def test_case_cross_narrows_its_slice_and_an_unspanned_axis_is_one_line() -> None:
    matrix = load_matrix(Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml")
    case = Case(id="narrow", title="t", signature=Signature("x"), axes=("torch",), cross={"torch": ">=2.1"})
    case.variant(devices=(CPU_BF16,))(body)
    assert {c.pins["torch"] for c in plan_cells(matrix, "nightly", Catalog((case,)))} == {"2.1.2", "2.3.1"}
    case.cross = {"lightning": ">=2"}
    with pytest.raises(BugmatrixError, match=r"^cases/narrow\.py: cross names axis 'lightning', which none of the case's variants spans"):
        plan_cells(matrix, "nightly", Catalog((case,), Path("cases")))
    with pytest.raises(CaseError, match=r"case 'bad': cross: torch='>>2' is not a version specifier"):
        Case(id="bad", title="t", signature=Signature("x"), cross={"torch": ">>2"})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('computed = "matrix.smoke.json"', "profiles.smoke.computed: without within"),
        ('within = "nightly"\ncomputed = "../smoke.json"', "profiles.smoke.computed: '../smoke.json' is not a .json file name"),
        ('within = "nightly"\ncomputed = "s.json"\ntorch = ["2.5.1"]', "profiles.smoke: is computed and lists versions too"),
    ],
)
def test_a_bad_computed_profile_is_one_line(tmp_path: Path, edit: str, message: str) -> None:
    text = (ROOT / "matrix.toml").read_text(encoding="utf-8")
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace('within = "nightly"\ncomputed = "matrix.smoke.json"', edit, 1), encoding="utf-8")
    with pytest.raises(BugmatrixError, match=message):
        load_matrix(path)


def test_plan_cost_prints_each_profile_and_case(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = Path(__file__).resolve().parent / "fixtures"
    argv = ["--matrix", str(fixture / "reference" / "matrix.toml"), "--cases", str(fixture / "catalogue" / "cases")]
    assert main([*argv, "plan", "--cost", "--profile", "nightly"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("profile nightly: ") and "CPU +" in out[0] and "lock lines" in out[0] and "min = fixed" in out[0]
    assert [line.split()[0] for line in out[1:-1]] == ["demo"]
    assert "min = variants" in out[1] and "in shared cells" in out[1]
    assert out[-1].startswith("estimates: ")


def test_a_case_environment_is_its_own_slice() -> None:
    """A case's environments ride in the case's slice: a sibling only beside the case's own cells."""
    matrix = load_matrix(Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml")
    mine = Case(id="mine", title="t", signature=Signature("x"), axes=("torch",), environments={"pinned": Env(requires=["setuptools<81"])})
    mine.variant(devices=(CUDA_FP16, CPU_BF16))(body)
    mine.variant(devices=(CUDA_FP16, CPU_BF16), environment="pinned", workaround_for="body", expect=(Expect("fixed"),))(_named("pinned"))
    other = Case(id="other", title="t", signature=Signature("x"), axes=("torch", "lightning"))
    other.variant(devices=(CPU_BF16,))(_named("core"))
    cells = plan_cells(matrix, "nightly", Catalog((mine, other)))
    assert all(c.sibling_of.count("-pl") == 0 for c in cells if c.extra), "no sibling beside the other case's cells"


def test_plan_compute_writes_the_choice_and_refuses_a_listed_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plan --compute smoke --write`` rewrites the committed file byte for byte; ``--compute nightly`` is one line (exit 2)."""
    shutil.copy(ROOT / "matrix.toml", tmp_path / "matrix.toml")
    args = ["--matrix", str(tmp_path / "matrix.toml"), "--cases", str(reference_case_files(tmp_path / "cases")), "plan"]
    assert main([*args, "--compute", "smoke", "--write"]) == 0
    out = capsys.readouterr().out
    assert "autocast_cache: py311-torch" in out and f"wrote {tmp_path / 'matrix.smoke.json'}" in out
    written = json.loads((tmp_path / "matrix.smoke.json").read_text(encoding="utf-8"))
    committed = json.loads((ROOT / "matrix.smoke.json").read_text(encoding="utf-8"))
    committed["cases"] = {case: entry for case, entry in committed["cases"].items() if case in written["cases"]}
    assert written == committed, "the committed file, as written for the fixture catalogue's cases"
    assert main([*args, "--compute", "nightly"]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("resolved: ")]
    assert line.startswith("bugmatrix: error: --compute nightly: profiles.nightly of ") and "is not computed (computed: smoke)" in line
