"""From matrix and declared axes to cells: slices, held axes, rules, profiles, GPU twins, install requirements.

Planning rules are pinned down on a tiny fixture matrix (cells listed by
hand) and on the reference catalogue and matrix (:mod:`tests.reference`, a
frozen copy of this project's four cases and matrix), never on the live
``cases/`` and ``matrix.toml``: these tests pass for any valid catalogue.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, find_cell, plan_all, plan_cells
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.plan.slices import Member, Slice
from bugmatrix.versions import base_version
from tests.reference import reference_catalog, reference_matrix

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "matrix"
TINY_TEXT = (FIXTURES / "tiny.toml").read_text(encoding="utf-8")
TINY = load_matrix(FIXTURES / "tiny.toml")
REFERENCE = reference_matrix()
HARNESS = REFERENCE.file.harness.requires
TORCH, TORCH_PL, TORCH_TF, PL_TF = ("torch",), ("lightning", "torch"), ("torch", "transformers"), ("lightning", "transformers")


class declared:  # noqa: N801 - reads as the declarations it stands for
    """The question the planner asks the catalog, answered for cases given by hand: one case per axis set, a CPU and a CUDA variant."""

    def __init__(self, *projections: tuple[str, ...]) -> None:
        self._projections = list(projections)

    def slices(self, matrix: Matrix) -> list[Slice]:
        return [
            Slice(name, tuple(sorted(p)), (Member(f"{name}::v[cpu]", "cpu"), Member(f"{name}::v[cuda]", "cuda")))
            for name, p in ((f"demo_{'_'.join(p)}", p) for p in self._projections)
        ]


def ids(cells: list[Cell], device: str | None = None) -> set[str]:
    return {c.id for c in cells if device is None or c.device == device}


def tiny(tmp_path: Path, old: str, new: str) -> Path:
    """tiny.toml with one edit (the anchor must exist: a vanished one fails loudly)."""
    assert old in TINY_TEXT, f"anchor {old!r} vanished from tiny.toml"
    path = tmp_path / "matrix.toml"
    path.write_text(TINY_TEXT.replace(old, new, 1), encoding="utf-8")
    return path


def test_cells_are_the_union_of_the_slices() -> None:
    """A torch-only case and a torch x lightning case give their own cells, not torch x lightning x transformers."""
    cells = plan_cells(TINY, "nightly", declared(TORCH, TORCH_PL))
    assert ids(cells) == {
        "py311-torch2.0.1", "py311-torch2.1.2", "py311-torch2.3.1",  # the torch case's slice
        "py311-torch2.0.1-pl2.0.3", "py311-torch2.1.2-pl2.0.3", "py311-torch2.1.2-pl2.2.5",  # the torch x lightning case's
        "py311-torch2.3.1-pl2.0.3", "py311-torch2.3.1-pl2.2.5",
        "py311-torch2.0.1-tf4.30.2",  # the include
        "py311-torch2.3.1-cuda", "py311-torch2.3.1-pl2.2.5-cuda",  # the [gpu] twins (no lightning pinned: not a lightning cell)
    }  # fmt: skip
    assert not any("transformers" in c.pins and "lightning" in c.pins for c in cells), "no axis crossed that no variant spans"


def test_unspanned_axes_sit_at_the_base_pins() -> None:
    """A lightning x transformers projection runs at the base torch and python, whatever the profile lists for torch."""
    cells = plan_cells(TINY, "smoke", declared(PL_TF))
    base = {"python": "3.11", "torch": "2.3.1", "lightning": "2.2.5", "transformers": "4.46.3"}
    assert [(c.id, dict(c.pins), c.device) for c in cells] == [
        ("py311-torch2.3.1-pl2.2.5-tf4.46.3", base, "cpu"),
        ("py311-torch2.3.1-pl2.2.5-tf4.46.3-cuda", base, "cuda"),
    ]


def test_the_axes_every_cell_installs_are_declared_in_the_matrix(tmp_path: Path) -> None:
    """``every_cell = true`` holds torch in every cell; without it a lightning x transformers cell installs no torch."""
    assert TINY.held_axes == ("python", "torch")
    plain = load_matrix(tiny(tmp_path, "every_cell = true\n", ""))
    assert plain.held_axes == ("python",)
    assert [c.id for c in plan_cells(plain, "smoke", declared(PL_TF)) if c.device == "cpu"] == ["py311-pl2.2.5-tf4.46.3"]


def test_the_interpreter_is_the_axis_without_distributions(tmp_path: Path) -> None:
    """Nothing names the interpreter: renamed, it plans the same cells under the same ids."""
    renamed = tiny(tmp_path, "python", "interpreter")
    text = renamed.read_text(encoding="utf-8").replace('python = ["3.10", "3.11"]', 'interpreter = ["3.10", "3.11"]')
    renamed.write_text(text.replace("[axes.python]", "[axes.interpreter]"), encoding="utf-8")
    matrix = load_matrix(renamed)
    assert matrix.interpreter == "interpreter"
    before = [(c.id, c.python) for c in plan_cells(TINY, "full", declared(TORCH, TORCH_PL))]
    assert [(c.id, c.python) for c in plan_cells(matrix, "full", declared(TORCH, TORCH_PL))] == before


def test_a_cell_runs_only_the_variants_of_the_cases_it_was_planned_for() -> None:
    """A torch x lightning cell installs what the torch-only case needs, but runs only the torch x lightning case (issue 33 item 3).

    The old rule (a cell runs every variant whose axes it installs, and a cell contained in a larger one is dropped)
    made a new case's cells run other cases' variants and change their summaries.
    """
    alone = {c.id: c.variants for c in plan_cells(TINY, "nightly", declared(TORCH))}
    together = {c.id: c.variants for c in plan_cells(TINY, "nightly", declared(TORCH, TORCH_PL))}
    assert {cid: variants for cid, variants in together.items() if cid in alone} == alone, "the torch case's cells did not change"
    assert together["py311-torch2.1.2-pl2.0.3"] == ("demo_lightning_torch::v[cpu]", "demo_lightning_torch::v[cuda]")
    assert together["py311-torch2.0.1-tf4.30.2"] == ("demo_torch::v[cpu]", "demo_torch::v[cuda]"), "an include joins the slices it installs"


def test_excludes_apply_in_their_profiles_only() -> None:
    """The everywhere-rule drops torch<2.1 with lightning>=2.2; the full-only rule leaves nightly alone."""
    nightly = plan_cells(TINY, "nightly", declared(TORCH_PL))
    full = plan_cells(TINY, "full", declared(TORCH_PL))
    for cells in (nightly, full):
        assert not any(c.pins["torch"] == "2.0.1" and c.pins.get("lightning") == "2.2.5" for c in cells)
    assert any(c.pins["torch"] == "2.1.2" for c in nightly)
    assert not any(c.pins["torch"] == "2.1.2" for c in full)


def test_includes_are_added_to_their_profiles() -> None:
    """An include adds its combination (held axes at base) only to the profiles it names."""
    include = "py311-torch2.0.1-tf4.30.2"
    assert include in ids(plan_cells(TINY, "nightly", declared(TORCH)))
    assert include not in ids(plan_cells(TINY, "full", declared(TORCH)))
    assert include not in ids(plan_cells(TINY, "smoke", declared(TORCH)))


def test_an_include_leaves_the_held_axes_at_base(tmp_path: Path) -> None:
    """An include that lists only lightning still pins the interpreter and torch (every_cell) at their base."""
    path = tiny(tmp_path, 'torch = "2.0.1"\ntransformers = "4.30.2"', 'lightning = "2.0.3"')
    assert "py311-torch2.3.1-pl2.0.3" in ids(plan_cells(load_matrix(path), "nightly", declared(TORCH)))


def test_python_sweep_runs_each_projection_at_base_on_other_interpreters() -> None:
    """full lists python 3.10: each case's axes at their base pins on 3.10, a sweep cell per slice; nothing else is installed."""
    full = plan_cells(TINY, "full", declared(TORCH))
    assert [c.id for c in full if c.python != "3.11" and c.device == "cpu"] == ["py310-torch2.3.1"]
    both = plan_cells(TINY, "full", declared(TORCH, PL_TF))
    assert [c.id for c in both if c.python != "3.11" and c.device == "cpu"] == ["py310-torch2.3.1", "py310-torch2.3.1-pl2.2.5-tf4.46.3"]
    assert {c.python for c in plan_cells(TINY, "nightly", declared(TORCH))} == {"3.11"}


def test_base_when_swaps_base_held_pins_where_the_base_cannot_exist(tmp_path: Path) -> None:
    """A Python whose base release ships no wheel gets the stand-in; spanned axes and other interpreters keep theirs."""
    rule = '[[base_when]]\nwhen = { python = "<3.11" }\npins = { transformers = "4.30.2" }\nwhy = "no cp310 wheel"\n\n'
    matrix = load_matrix(tiny(tmp_path, "[profiles.smoke]", rule + "[profiles.smoke]"))
    full = plan_cells(matrix, "full", declared(TORCH, PL_TF))
    assert [c.id for c in full if c.python == "3.10" and c.device == "cpu"] == ["py310-torch2.3.1", "py310-torch2.3.1-pl2.2.5-tf4.30.2"]
    before = {c.id for c in plan_cells(TINY, "full", declared(TORCH, PL_TF)) if c.python != "3.10"}
    assert {c.id for c in full if c.python != "3.10"} == before


def test_every_reference_python_cell_pins_releases_that_ship_for_it() -> None:
    """The reference matrix's known gaps (torch 2.15.0: no cp310; transformers 5.x: Python >= 3.11) are never planned for 3.10."""
    py310 = [c for c in plan_all(REFERENCE, reference_catalog()) if c.python == "3.10"]
    assert py310, "the full profile sweeps Python 3.10"
    for cell in py310:
        assert base_version(cell.pins["torch"]) < base_version("2.15.0"), cell.id
        assert base_version(cell.pins.get("transformers", "4")) < base_version("5"), cell.id


def test_gpu_twins_are_the_cells_gpu_selects(tmp_path: Path) -> None:
    """A CPU cell matching every [gpu] list gets a -cuda twin with the same pins; without [gpu] there are none."""
    cells = plan_cells(TINY, "nightly", declared(TORCH_PL))
    twins = [c for c in cells if c.device == "cuda"]
    assert [c.id for c in twins] == ["py311-torch2.3.1-pl2.2.5-cuda"]
    cpu_only = [Slice("cpu_only", TORCH_PL, (Member("cpu_only::v[cpu]", "cpu"),))]
    assert not ids(plan_cells(TINY, "nightly", type("cpu", (), {"slices": lambda self, m: cpu_only})()), "cuda"), (
        "no twin without a CUDA variant"
    )
    cpu = find_cell(cells, "py311-torch2.3.1-pl2.2.5")
    assert twins[0].pins == cpu.pins and cpu.device == "cpu"
    no_gpu = tmp_path / "no-gpu.toml"
    no_gpu.write_text(TINY_TEXT[: TINY_TEXT.index("[gpu]")])
    assert not ids(plan_cells(load_matrix(no_gpu), "nightly", declared(TORCH_PL)), "cuda")


def test_plan_all_tags_cells_with_their_profiles() -> None:
    """Each cell carries the profiles that plan it (nox tags come from these)."""
    cells = {c.id: c for c in plan_all(TINY, declared(TORCH, TORCH_PL))}
    assert cells["py311-torch2.3.1-pl2.2.5"].profiles == ("smoke", "nightly", "full")
    assert cells["py311-torch2.1.2-pl2.2.5"].profiles == ("smoke", "nightly")  # full excludes torch 2.1.2
    assert cells["py311-torch2.0.1-tf4.30.2"].profiles == ("nightly",)


def test_any_profile_name_plans_and_is_a_tag(tmp_path: Path) -> None:
    """``[profiles.mine]`` is a profile like the others (issue 23: "unknown key; use one of full, nightly, smoke")."""
    matrix = load_matrix(tiny(tmp_path, "[profiles.smoke]", '[profiles.mine]\ntorch = ["2.0.1"]\n\n[profiles.smoke]'))
    assert list(matrix.profiles) == ["mine", "smoke", "nightly", "full"] and matrix.default_profile == "mine"
    assert ids(plan_cells(matrix, "mine", declared(TORCH)), "cpu") == {"py311-torch2.0.1"}
    assert any("mine" in c.profiles for c in plan_all(matrix, declared(TORCH)))


def test_within_is_checked_cell_by_cell(tmp_path: Path) -> None:
    """``within`` holds axis-wise (at load) and cell-wise (when planning): a profile-only exclude breaks it in one line."""
    path = tiny(tmp_path, "[profiles.nightly]\n", '[profiles.nightly]\nwithin = "full"\n')
    matrix = load_matrix(path)
    with pytest.raises(BugmatrixError) as info:
        plan_all(matrix, declared(TORCH_PL))
    message = str(info.value)
    assert message.startswith(f"{path}: profiles.nightly.within: cell py311-") and " more) of nightly is not planned in full; " in message
    assert "remove within from profiles.nightly" in message and "\n" not in message
    with pytest.raises(BugmatrixError, match=r"profiles\.smoke\.torch: '2\.1\.2' is not in profiles\.mine; smoke is declared within mine"):
        load_matrix(tiny(tmp_path, "[profiles.smoke]\n", '[profiles.mine]\ntorch = ["2.3.1"]\n\n[profiles.smoke]\nwithin = "mine"\n'))


def test_a_profile_without_cells_is_refused(tmp_path: Path) -> None:
    """An [[exclude]] that removes every cell of a profile is one line naming the profile, not "0 cells", exit 0."""
    path = tiny(
        tmp_path,
        '[[exclude]]\nwhen = { torch = "==2.1.2" }\nprofiles = ["full"]',
        '[[exclude]]\nwhen = { torch = ">=2" }\nprofiles = ["smoke"]',
    )
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(path), "smoke", declared(TORCH))
    assert str(info.value) == (
        f"{path}: profiles.smoke: plans no cells (every combination it asks for is excluded by an [[exclude]]); "
        "narrow the [[exclude]] rules or list other versions"
    )


def test_cell_order_is_numeric_and_stable() -> None:
    """CPU cells first, then versions compared as versions (2.10 after 2.9), so listings do not shuffle."""
    cells = plan_cells(REFERENCE, "nightly", reference_catalog())
    keys = [(c.device, *(base_version(c.pins.get(a, "0")) for a in REFERENCE.axes)) for c in cells]
    assert keys == sorted(keys)
    torches = [c.pins["torch"] for c in cells if c.device == "cpu" and "transformers" not in c.pins]
    assert torches.index("2.10.0") > torches.index("2.6.0")


@pytest.mark.parametrize(
    ("pins", "device", "expected"),
    [
        ({"python": "3.11", "torch": "2.5.1", "lightning": "2.0.3", "transformers": "4.30.2"}, "cpu", "py311-torch2.5.1-pl2.0.3-tf4.30.2"),
        ({"transformers": "4.30.2", "torch": "2.5.1", "python": "3.10"}, "cpu", "py310-torch2.5.1-tf4.30.2"),
        ({"python": "3.13", "torch": "2.15.0"}, "cuda", "py313-torch2.15.0-cuda"),
    ],
)
def test_cell_id_format(pins: dict[str, str], device: str, expected: str) -> None:
    """Readable ids in a fixed axis order, whatever order the pins come in."""
    assert REFERENCE.cell_id(pins, device) == expected


def test_unknown_profile_and_cell_are_one_line_errors() -> None:
    """Typos on the command line name the value and suggest what exists."""
    with pytest.raises(BugmatrixError, match=r"unknown profile 'weekly'; use one of smoke, nightly, full \(declared in .*tiny\.toml\)"):
        plan_cells(TINY, "weekly", declared(TORCH))
    cells = plan_all(TINY, declared(TORCH, TORCH_PL))
    with pytest.raises(
        BugmatrixError, match=r"unknown cell 'py311-torch2\.3\.1-pl2'; did you mean py311-torch2\.3\.1, py311-torch2\.3\.1-pl2\.0\.3"
    ):
        find_cell(cells, "py311-torch2.3.1-pl2")
    with pytest.raises(BugmatrixError, match=r"list them with: nox -s plan -- --profile full$"):
        find_cell(cells, "nothing-like-it")
    assert find_cell(cells, "py311-torch2.1.2-pl2.0.3").pins["torch"] == "2.1.2"


def test_old_lightning_is_installed_as_pytorch_lightning_with_old_setuptools() -> None:
    """lightning<2.1 -> the pytorch-lightning distribution and setuptools<81; torch<2.3 -> numpy<2 (reference matrix)."""
    pins = {"python": "3.11", "torch": "2.0.1", "lightning": "2.0.3"}
    assert REFERENCE.requirements_for(pins) == ["torch==2.0.1", "pytorch-lightning==2.0.3", "setuptools<81", "numpy<2", *HARNESS]
    assert REFERENCE.import_modules(pins) == ["torch", "pytorch_lightning"]


def test_constraints_stop_at_their_boundaries() -> None:
    """lightning 2.1 is the `lightning` distribution but still needs setuptools<81; the newest stack needs nothing extra."""
    mid = REFERENCE.requirements_for({"python": "3.11", "torch": "2.3.1", "lightning": "2.1.4"})
    assert mid == ["torch==2.3.1", "lightning==2.1.4", "setuptools<81", *HARNESS]
    new = {"python": "3.11", "torch": "2.15.0", "lightning": "2.6.6", "transformers": "5.23.0"}
    assert REFERENCE.requirements_for(new) == ["torch==2.15.0", "lightning==2.6.6", "transformers==5.23.0", *HARNESS]
    assert REFERENCE.import_modules(new) == ["torch", "lightning.pytorch", "transformers"]


def test_a_requirement_needed_twice_is_listed_once() -> None:
    """torch<2.3 and transformers<4.36 both need numpy<2: one line for the installer."""
    reqs = REFERENCE.requirements_for({"python": "3.11", "torch": "2.0.1", "transformers": "4.30.2"})
    assert reqs.count("numpy<2") == 1 and "transformers==4.30.2" in reqs


def test_constraints_are_evaluated_at_the_effective_pins(tmp_path: Path) -> None:
    """A ``when`` may name an axis the cell leaves at its base pin (issue 23 item 2): torch-only cells sit at base transformers."""
    rule = '[[constraints]]\nwhen = { transformers = ">=4.40" }\nrequires = ["numpy<2"]\nwhy = "test"\n\n[harness]'
    matrix = load_matrix(tiny(tmp_path, "[harness]", rule))
    assert matrix.effective({"python": "3.11", "torch": "2.1.2"})["transformers"] == "4.46.3"
    assert "numpy<2" in matrix.requirements_for({"python": "3.11", "torch": "2.1.2"})
    assert "numpy<2" not in matrix.requirements_for({"python": "3.11", "torch": "2.0.1", "transformers": "4.30.2"})


def test_effective_pins_take_the_base_when_stand_ins(tmp_path: Path) -> None:
    """A Python 3.10 cell that does not pin transformers is judged at transformers' stand-in for 3.10, not the 3.11 base."""
    rule = '[[base_when]]\nwhen = { python = "<3.11" }\npins = { transformers = "4.30.2" }\nwhy = "no cp310 wheel"\n\n'
    matrix = load_matrix(tiny(tmp_path, "[profiles.smoke]", rule + "[profiles.smoke]"))
    assert matrix.effective({"python": "3.10", "torch": "2.3.1"})["transformers"] == "4.30.2"
    assert matrix.effective({"python": "3.10", "torch": "2.3.1", "transformers": "4.46.3"})["transformers"] == "4.46.3"


CONSTRAINT = '[[constraints]]\nwhen = {when}\nrequires = [{requires}]\nwhy = "test"\n\n[harness]'


def test_a_constraint_that_contradicts_an_axis_pin_is_refused_at_plan_time(tmp_path: Path) -> None:
    """transformers<4.40 for torch<2.1 against the include's transformers==4.30.2 is fine; ==4.46 is not, and says both entries."""
    fine = tiny(tmp_path, "[harness]", CONSTRAINT.format(when='{ torch = "<2.1" }', requires='"transformers<4.40"'))
    plan_cells(load_matrix(fine), "nightly", declared(TORCH))
    path = tiny(tmp_path, "[harness]", CONSTRAINT.format(when='{ torch = "<2.1" }', requires='"transformers>=4.40"'))
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(path), "nightly", declared(TORCH))
    assert str(info.value) == (
        f"{path}: constraints[1] (when torch<2.1): 'transformers>=4.40' contradicts axes.transformers pin: 'transformers==4.30.2' "
        "in cell py311-torch2.0.1-tf4.30.2; neither wins: narrow the constraint's when, drop the requirement, "
        "or [[exclude]] that combination"
    )


def test_two_constraints_that_contradict_are_refused_at_plan_time(tmp_path: Path) -> None:
    """Issue 22's example: numpy>=2 for torch<2.6 beside numpy<2 for torch<2.3 meet in a torch 2.1.2 cell."""
    first = CONSTRAINT.format(when='{ torch = "<2.3" }', requires='"numpy<2"')
    second = CONSTRAINT.format(when='{ torch = "<2.6" }', requires='"numpy>=2"')
    path = tiny(tmp_path, "[harness]", first.replace("[harness]", second))
    with pytest.raises(BugmatrixError) as info:
        plan_cells(load_matrix(path), "smoke", declared(TORCH))
    message = str(info.value)
    assert "constraints[2] (when torch<2.6): 'numpy>=2' contradicts constraints[1] (when torch<2.3): 'numpy<2'" in message
    assert "in cell py311-torch2.1.2;" in message and "\n" not in message
    agree = tiny(tmp_path, "[harness]", first.replace("[harness]", CONSTRAINT.format(when='{ torch = "<2.6" }', requires='"numpy>=1.20"')))
    plan_cells(load_matrix(agree), "smoke", declared(TORCH))


def test_a_marker_that_does_not_apply_takes_no_part(tmp_path: Path) -> None:
    """``numpy>=2; python_version >= '3.12'`` cannot contradict numpy<2 in a Python 3.11 cell."""
    first = CONSTRAINT.format(when='{ torch = "<2.3" }', requires='"numpy<2"')
    second = CONSTRAINT.format(when='{ torch = "<2.6" }', requires="\"numpy>=2; python_version >= '3.12'\"")
    plan_cells(load_matrix(tiny(tmp_path, "[harness]", first.replace("[harness]", second))), "smoke", declared(TORCH))


def test_reference_plan_is_far_below_the_cross_product() -> None:
    """The full profile is a union of projections, a fraction of torch x lightning x transformers x python."""
    full = REFERENCE.profiles["full"]
    cross = len(full["python"]) * len(full["torch"]) * len(full["lightning"]) * len(full["transformers"])
    cpu = ids(plan_cells(REFERENCE, "full", reference_catalog()), "cpu")
    assert len(cpu) < cross / 10
    gpu = [c for c in plan_cells(REFERENCE, "full", reference_catalog()) if c.device == "cuda"]
    assert gpu and all(c.pins["torch"] in REFERENCE.file.gpu_select["torch"] for c in gpu)


def test_the_reference_plan_is_the_committed_one() -> None:
    """The reference catalogue and matrix plan the union of the cases' slices: smoke 6 CPU + 2 GPU, nightly 23, full 83.

    Before slices (issue 33) it was 4, 19 and 70: the torch x lightning cells at the base torch were dropped as
    "covered" by the T5 case's torch x lightning x transformers cells, which then ran the other cases' variants too.
    """
    catalog = reference_catalog()
    assert [len(ids(plan_cells(REFERENCE, p, catalog), "cpu")) for p in REFERENCE.profiles] == [6, 23, 83]
    assert ids(plan_cells(REFERENCE, "smoke", catalog), "cuda") == {
        "py311-torch2.15.0-pl2.6.6-cuda",
        "py311-torch2.15.0-pl2.6.6-tf4.30.2-cuda",
    }
    assert "py310-torch2.14.1-pl2.6.6-tf4.57.6" in ids(plan_cells(REFERENCE, "full", catalog))


HEADER = 'from bugmatrix import CPU_BF16, Case, Signature\ncase = Case(id="planted", title="t", signature=Signature("x"))\n'


def _plant(tmp_path: Path, source: str, header: str = HEADER) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "planted.py").write_text(header + source)
    return cases


def test_a_syntax_error_in_a_case_is_one_line(tmp_path: Path) -> None:
    """A broken case module stops planning with file:line, not a traceback."""
    cases = _plant(tmp_path, "x = 1\ndef broken(:\n", header="")
    with pytest.raises(BugmatrixError, match=r"planted\.py:2: syntax error in case module"):
        load_catalog(cases)


def test_axes_may_be_any_expression_pytest_accepts(tmp_path: Path) -> None:
    """A module-level AXES constant means the same to the planner as to pytest: cases are read by importing them."""
    cases = _plant(tmp_path, "AXES = ('torch', 'lightning')\n@case.variant(devices=(CPU_BF16,), axes=AXES)\ndef v(d, t):\n    return {}\n")
    (variant,) = load_catalog(cases).variants
    assert variant.axes == ("torch", "lightning")
    assert load_catalog(cases).cases[0].spans == ("lightning", "torch")


def test_an_unknown_axis_in_a_case_is_a_one_line_error(tmp_path: Path) -> None:
    """A typo in a case's axes ("lighting") names the file and the axis instead of crashing `nox -l`."""
    cases = _plant(tmp_path, "@case.variant(devices=(CPU_BF16,), axes=('torch', 'lighting'))\ndef v(d, t):\n    return {}\n")
    with pytest.raises(BugmatrixError, match=r"planted\.py.*'lighting'"):
        plan_cells(REFERENCE, "smoke", load_catalog(cases, REFERENCE))


def test_an_unknown_axis_in_requires_is_a_one_line_error(tmp_path: Path) -> None:
    """``Requires(lighting=">=2.1")`` is checked against the matrix like the axes are."""
    cases = _plant(tmp_path, "@case.variant(devices=(CPU_BF16,), requires=Requires(lighting='>=2.1'))\ndef v(d, t):\n    return {}\n")
    (cases / "planted.py").write_text("from bugmatrix import Requires\n" + (cases / "planted.py").read_text())
    with pytest.raises(BugmatrixError, match=r"planted\.py: variant 'v' requires axis 'lighting', which .* does not declare"):
        load_catalog(cases, REFERENCE)
