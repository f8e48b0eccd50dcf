"""From matrix and declared axes to cells: projections, base pins, rules, profiles, GPU twins, install requirements.

Planning rules are pinned down on a tiny fixture matrix (cells listed by hand);
the real matrix.toml is checked for the properties the suite promises
(profiles nest cell-wise, smoke shows every case reproduced and fixed).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from bugmatrix.cell.case import Case, Variant
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, find_cell, plan_all, plan_cells
from bugmatrix.plan.matrix import PROFILES, load_matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.versions import base_version

ROOT = Path(__file__).resolve().parent.parent
TINY = load_matrix(Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml")
REAL = load_resolved_matrix(ROOT / "matrix.toml")
REAL_CATALOG = load_catalog(ROOT / "cases")
TORCH, TORCH_PL, TORCH_TF, PL_TF = ("torch",), ("lightning", "torch"), ("torch", "transformers"), ("lightning", "transformers")


class declared:  # noqa: N801 - reads as the declarations it stands for
    """The two questions the planner asks the catalog, answered for projections given by hand."""

    def __init__(self, *projections: tuple[str, ...]) -> None:
        self._projections = list(projections)

    def projections(self) -> list[tuple[str, ...]]:
        return self._projections

    def runs_in(self, axes: tuple[str, ...]) -> list[str]:
        return [f"demo::{'_'.join(p)}[cpu]" for p in self._projections if set(p) <= set(axes)]


def ids(cells: list[Cell], device: str | None = None) -> set[str]:
    return {c.id for c in cells if device is None or c.device == device}


def test_cells_are_the_union_of_projections() -> None:
    """torch-only and torch x lightning variants give these cells, not torch x lightning x transformers."""
    cells = plan_cells(TINY, "nightly", declared(TORCH, TORCH_PL))
    assert ids(cells) == {
        "py311-torch2.0.1-pl2.0.3",
        "py311-torch2.1.2-pl2.0.3",
        "py311-torch2.1.2-pl2.2.5",
        "py311-torch2.3.1-pl2.0.3",
        "py311-torch2.3.1-pl2.2.5",
        "py311-torch2.0.1-tf4.30.2",  # the include
        "py311-torch2.3.1-pl2.2.5-cuda",  # the [gpu] twin
    }
    assert not any("transformers" in c.pins and "lightning" in c.pins for c in cells), "no axis crossed that no variant spans"


def test_unspanned_axes_sit_at_the_base_pins() -> None:
    """A lightning x transformers projection runs at the base torch and python, whatever the profile lists for torch."""
    cells = plan_cells(TINY, "smoke", declared(PL_TF))
    base = {"python": "3.11", "torch": "2.3.1", "lightning": "2.2.5", "transformers": "4.46.3"}
    assert [(c.id, dict(c.pins), c.device) for c in cells] == [
        ("py311-torch2.3.1-pl2.2.5-tf4.46.3", base, "cpu"),
        ("py311-torch2.3.1-pl2.2.5-tf4.46.3-cuda", base, "cuda"),
    ]


def test_cells_contained_in_a_larger_cell_are_dropped() -> None:
    """A torch-only cell is run by the torch x lightning cell with the same torch, so it is not planned twice."""
    alone = ids(plan_cells(TINY, "nightly", declared(TORCH)))
    assert {"py311-torch2.1.2", "py311-torch2.3.1"} <= alone
    assert "py311-torch2.0.1" not in alone, "the include pins torch 2.0.1 (with transformers) and covers it"
    together = ids(plan_cells(TINY, "nightly", declared(TORCH, TORCH_PL)))
    assert not {"py311-torch2.0.1", "py311-torch2.1.2", "py311-torch2.3.1"} & together


def test_excludes_apply_in_their_profiles_only() -> None:
    """The everywhere-rule drops torch<2.1 with lightning>=2.2; the full-only rule leaves nightly alone."""
    nightly = plan_cells(TINY, "nightly", declared(TORCH_PL))
    full = plan_cells(TINY, "full", declared(TORCH_PL))
    for cells in (nightly, full):
        assert not any(c.pins["torch"] == "2.0.1" and c.pins.get("lightning") == "2.2.5" for c in cells)
    assert any(c.pins["torch"] == "2.1.2" for c in nightly)
    assert not any(c.pins["torch"] == "2.1.2" for c in full)


def test_includes_are_added_to_their_profiles() -> None:
    """An include adds its combination (at the base python) only to the profiles it names."""
    include = "py311-torch2.0.1-tf4.30.2"
    assert include in ids(plan_cells(TINY, "nightly", declared(TORCH)))
    assert include not in ids(plan_cells(TINY, "full", declared(TORCH)))
    assert include not in ids(plan_cells(TINY, "smoke", declared(TORCH)))


def test_python_sweep_runs_the_base_stack_on_other_interpreters() -> None:
    """full lists python 3.10: one extra cell, the base stack on it; profiles without python get none."""
    full = plan_cells(TINY, "full", declared(TORCH))
    sweep = [c for c in full if c.python != "3.11"]
    assert [c.id for c in sweep if c.device == "cpu"] == ["py310-torch2.3.1-pl2.2.5-tf4.46.3"]
    assert {c.python for c in plan_cells(TINY, "nightly", declared(TORCH))} == {"3.11"}


def test_base_when_swaps_base_held_pins_where_the_base_cannot_exist(tmp_path: Path) -> None:
    """A Python whose base torch ships no wheel gets the stand-in; spanned axes and other interpreters keep theirs."""
    text = (Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml").read_text(encoding="utf-8")
    rule = '[[base_when]]\nwhen = { python = "<3.11" }\npins = { transformers = "4.30.2" }\nwhy = "no cp310 wheel"\n\n'
    (tmp_path / "matrix.toml").write_text(text.replace("[profiles.smoke]", rule + "[profiles.smoke]"), encoding="utf-8")
    matrix = load_matrix(tmp_path / "matrix.toml")
    full = plan_cells(matrix, "full", declared(TORCH))
    assert [c.id for c in full if c.python == "3.10" and c.device == "cpu"] == ["py310-torch2.3.1-pl2.2.5-tf4.30.2"]
    before = {c.id for c in plan_cells(TINY, "full", declared(TORCH)) if c.python != "3.10"}
    assert {c.id for c in full if c.python != "3.10"} == before


def test_every_real_python_cell_pins_releases_that_ship_for_it() -> None:
    """The known gaps (torch 2.15.0: no cp310; transformers 5.x: Python >= 3.11) are never planned for 3.10."""
    py310 = [c for c in plan_all(REAL, REAL_CATALOG) if c.python == "3.10"]
    assert py310, "the full profile sweeps Python 3.10"
    for cell in py310:
        assert base_version(cell.pins["torch"]) < base_version("2.15.0"), cell.id
        assert base_version(cell.pins.get("transformers", "4")) < base_version("5"), cell.id


def test_gpu_twins_are_the_cells_gpu_selects(tmp_path: Path) -> None:
    """A CPU cell matching every [gpu] list gets a -cuda twin with the same pins; without [gpu] there are none."""
    cells = plan_cells(TINY, "nightly", declared(TORCH_PL))
    twins = [c for c in cells if c.device == "cuda"]
    assert [c.id for c in twins] == ["py311-torch2.3.1-pl2.2.5-cuda"]
    cpu = find_cell(cells, "py311-torch2.3.1-pl2.2.5")
    assert twins[0].pins == cpu.pins and cpu.device == "cpu"
    text = (Path(__file__).resolve().parent / "fixtures" / "matrix" / "tiny.toml").read_text()
    no_gpu = tmp_path / "no-gpu.toml"
    no_gpu.write_text(text[: text.index("[gpu]")])
    assert not ids(plan_cells(load_matrix(no_gpu), "nightly", declared(TORCH_PL)), "cuda")


def test_plan_all_tags_cells_with_their_profiles() -> None:
    """Each cell carries the profiles that plan it (nox tags come from these)."""
    cells = {c.id: c for c in plan_all(TINY, declared(TORCH, TORCH_PL))}
    assert cells["py311-torch2.3.1-pl2.2.5"].profiles == ("smoke", "nightly", "full")
    assert cells["py311-torch2.1.2-pl2.2.5"].profiles == ("smoke", "nightly")  # full excludes torch 2.1.2
    assert cells["py311-torch2.0.1-tf4.30.2"].profiles == ("nightly",)


def test_cell_order_is_numeric_and_stable() -> None:
    """CPU cells first, then versions compared as versions (2.10 after 2.9), so listings do not shuffle."""
    cells = plan_cells(REAL, "nightly", REAL_CATALOG)
    keys = [(c.device, *(base_version(c.pins.get(a, "0")) for a in ("python", "torch", "lightning", "transformers"))) for c in cells]
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
    assert REAL.cell_id(pins, device) == expected


def test_unknown_profile_and_cell_are_one_line_errors() -> None:
    """Typos on the command line name the value and suggest what exists."""
    with pytest.raises(BugmatrixError, match=r"unknown profile 'weekly'; use one of smoke, nightly, full"):
        plan_cells(TINY, "weekly", declared(TORCH))
    cells = plan_all(TINY, declared(TORCH, TORCH_PL))
    with pytest.raises(BugmatrixError, match=r"unknown cell 'py311-torch2\.3\.1-pl2'; did you mean py311-torch2\.3\.1-pl2\.0\.3"):
        find_cell(cells, "py311-torch2.3.1-pl2")
    with pytest.raises(BugmatrixError, match="list them with: nox -s plan"):
        find_cell(cells, "nothing-like-it")
    assert find_cell(cells, "py311-torch2.1.2-pl2.0.3").pins["torch"] == "2.1.2"


def test_old_lightning_is_installed_as_pytorch_lightning_with_old_setuptools() -> None:
    """lightning<2.1 -> the pytorch-lightning distribution and setuptools<81; torch<2.3 -> numpy<2 (real matrix)."""
    pins = {"python": "3.11", "torch": "2.0.1", "lightning": "2.0.3"}
    assert REAL.requirements_for(pins) == ["torch==2.0.1", "pytorch-lightning==2.0.3", "setuptools<81", "numpy<2", *REAL.harness]
    assert REAL.import_modules(pins) == ["torch", "pytorch_lightning"]


def test_constraints_stop_at_their_boundaries() -> None:
    """lightning 2.1 is the `lightning` distribution but still needs setuptools<81; the newest stack needs nothing extra."""
    mid = REAL.requirements_for({"python": "3.11", "torch": "2.3.1", "lightning": "2.1.4"})
    assert mid == ["torch==2.3.1", "lightning==2.1.4", "setuptools<81", *REAL.harness]
    new = {"python": "3.11", "torch": "2.15.0", "lightning": "2.6.6", "transformers": "5.23.0"}
    assert REAL.requirements_for(new) == ["torch==2.15.0", "lightning==2.6.6", "transformers==5.23.0", *REAL.harness]
    assert REAL.import_modules(new) == ["torch", "lightning.pytorch", "transformers"]


def test_a_requirement_needed_twice_is_listed_once() -> None:
    """torch<2.3 and transformers<4.36 both need numpy<2: one line for the installer."""
    reqs = REAL.requirements_for({"python": "3.11", "torch": "2.0.1", "transformers": "4.30.2"})
    assert reqs.count("numpy<2") == 1 and "transformers==4.30.2" in reqs


def test_real_profiles_nest_cell_wise() -> None:
    """smoke ⊂ nightly ⊂ full holds for the planned cells themselves (CPU and GPU), not only for the axis lists."""
    planned = {p: plan_cells(REAL, p, REAL_CATALOG) for p in PROFILES}
    for device in ("cpu", "cuda"):
        smoke, nightly, full = (ids(planned[p], device) for p in PROFILES)
        assert smoke and smoke <= nightly <= full, (device, smoke - nightly, nightly - full)


def test_real_plan_is_far_below_the_cross_product() -> None:
    """The full profile is a union of projections, a fraction of torch x lightning x transformers x python."""
    full = REAL.profiles["full"]
    cross = len(full["python"]) * len(full["torch"]) * len(full["lightning"]) * len(full["transformers"])
    cpu = ids(plan_cells(REAL, "full", REAL_CATALOG), "cpu")
    assert len(cpu) < cross / 10
    gpu = [c for c in plan_cells(REAL, "full", REAL_CATALOG) if c.device == "cuda"]
    assert gpu and all(c.pins["torch"] in REAL.gpu_select["torch"] for c in gpu)


def _runnable(variant: Variant, cell: Cell) -> bool:
    """What the cell session runs: variants whose axes the cell pins, on its device, with min versions met."""
    need = variant.requires
    if not set(variant.axes) <= set(cell.axes) or variant.device != cell.device:
        return False
    for axis, minimum in (("torch", need.min_torch), ("lightning", need.min_lightning)):
        if minimum and base_version(cell.pins[axis]) < base_version(minimum):
            return False
    return True


def _smoke_expectations(case_modules: dict[str, ModuleType]) -> dict[str, dict[str, dict[str, set[str]]]]:
    """case -> variant id -> expected outcome -> the smoke CPU cells where the variant runs and is expected so."""
    cells = [c for c in plan_cells(REAL, "smoke", REAL_CATALOG) if c.device == "cpu"]
    table: dict[str, dict[str, dict[str, set[str]]]] = {}
    for stem, module in case_modules.items():
        case = next(v for v in vars(module).values() if isinstance(v, Case))
        table[stem] = {v.id: {"reproduced": set(), "fixed": set()} for v in case.variants}
        for cell in cells:
            for variant in (v for v in case.variants if _runnable(v, cell)):
                expected = variant.expectation(cell.pins)
                if expected is not None and expected.outcome.value in ("reproduced", "fixed"):
                    table[stem][variant.id][expected.outcome.value].add(cell.id)
    assert table, "no case modules found"
    return table


def test_smoke_shows_every_case_reproduced_and_fixed(case_modules: dict[str, ModuleType]) -> None:
    """For each case, smoke's CPU cells include one where a variant is expected `reproduced` and one where one is expected `fixed`."""
    for stem, variants in _smoke_expectations(case_modules).items():
        for outcome in ("reproduced", "fixed"):
            assert any(seen[outcome] for seen in variants.values()), f"{stem}: no smoke cell where a variant is expected {outcome}"


def test_smoke_crosses_every_declared_version_boundary(case_modules: dict[str, ModuleType]) -> None:
    """Where a case declares a boundary (one variant: reproduced in some versions, fixed in others), smoke shows both sides of it.

    Stronger than the test above, which a workaround that is always fixed satisfies alone.
    """
    table = _smoke_expectations(case_modules)
    for stem, module in case_modules.items():
        case = next(v for v in vars(module).values() if isinstance(v, Case))
        boundary = [v.id for v in case.variants if v.device == "cpu" and {e.outcome.value for e in v.expect} >= {"reproduced", "fixed"}]
        if boundary:
            seen = table[stem]
            assert any(seen[v]["reproduced"] and seen[v]["fixed"] for v in boundary), (
                f"{stem}: smoke shows none of {boundary} on both sides of its boundary"
            )


HEADER = 'from bugmatrix import CPU_BF16, Case, Signature\ncase = Case(id="planted", title="t", seed="t", signature=Signature("x"))\n'


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
    assert ("lightning", "torch") in load_catalog(cases).projections()


def test_an_unknown_axis_in_a_case_is_a_one_line_error(tmp_path: Path) -> None:
    """A typo in a case's axes ("lighting") names the file and the axis instead of crashing `nox -l`."""
    cases = _plant(tmp_path, "@case.variant(devices=(CPU_BF16,), axes=('torch', 'lighting'))\ndef v(d, t):\n    return {}\n")
    with pytest.raises(BugmatrixError, match=r"planted\.py.*'lighting'"):
        plan_cells(REAL, "smoke", load_catalog(cases, REAL))
