"""matrix.toml validation (every broken input is one actionable line) and cell planning."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.discover import discover_variants, projections
from bugmatrix.errors import BugmatrixError
from bugmatrix.matrix import load_matrix
from bugmatrix.plan import cell_id, find_cell, import_modules, plan_all, plan_cells, requirements_for

ROOT = Path(__file__).resolve().parent.parent
REAL = (ROOT / "matrix.toml").read_text()
PROJECTIONS = projections(discover_variants(ROOT / "cases"))


def broken(tmp_path: Path, old: str, new: str) -> Path:
    """The real matrix with one edit (so the fixtures never drift from it)."""
    assert old in REAL, f"fixture anchor {old!r} vanished from matrix.toml"
    path = tmp_path / "matrix.toml"
    path.write_text(REAL.replace(old, new, 1))
    return path


BROKEN = [
    # (what, old, new, key and value the message must name)
    ("toml syntax", "schema = 1", "schema = = 1", ["not valid TOML", "line"]),
    ("wrong schema", "schema = 1", "schema = 7", ["schema", "7"]),
    ("unknown top-level key", "schema = 1", 'schema = 1\nprofile = "smoke"', ["profile", "unknown key"]),
    (
        "unknown key in a profile",
        "[profiles.smoke]\ntorch",
        '[profiles.smoke]\ntorchh = ["2.5.1"]\ntorch',
        ["profiles.smoke.torchh", "unknown key"],
    ),
    ("malformed version", '[profiles.smoke]\ntorch = ["2.5.1"', '[profiles.smoke]\ntorch = ["2.x"', ["profiles.smoke.torch[0]", "'2.x'"]),
    ("version not quoted", 'python = "3.11"', "python = 3.11", ["base.python", "3.11"]),
    (
        "empty axis",
        'transformers = ["4.28.1", "4.29.2", "4.30.2", "4.36.2", "4.46.3", "4.57.6", "5.23.0"]',
        "transformers = []",
        ["axes.transformers", "empty list"],
    ),
    (
        "empty profile list",
        '[profiles.smoke]\ntorch = ["2.5.1", "2.15.0"]',
        "[profiles.smoke]\ntorch = []",
        ["profiles.smoke.torch", "empty list"],
    ),
    (
        "duplicate version",
        '[profiles.smoke]\ntorch = ["2.5.1", "2.15.0"]',
        '[profiles.smoke]\ntorch = ["2.5.1", "2.5.1"]',
        ["profiles.smoke.torch", "duplicate", "2.5.1"],
    ),
    (
        "profile value not on the axis",
        '[profiles.smoke]\ntorch = ["2.5.1"',
        '[profiles.smoke]\ntorch = ["2.5.2"',
        ["profiles.smoke.torch", "'2.5.2'", "axes.torch"],
    ),
    (
        "smoke not within nightly",
        '[profiles.nightly]\ntorch = ["2.0.1", "2.5.1"',
        '[profiles.nightly]\ntorch = ["2.0.1"',
        ["profiles.smoke.torch", "'2.5.1'", "profiles.nightly"],
    ),
    ("base pin off the axis", 'torch = "2.15.0"', 'torch = "9.9.9"', ["base.torch", "'9.9.9'"]),
    (
        "bad specifier in an exclude",
        'when = { torch = "<2.1", lightning = ">=2.6" }',
        'when = { torch = "<<2.1" }',
        ["exclude[0].when.torch", "'<<2.1'"],
    ),
    ("bad requirement", 'requires = ["numpy<2"]', 'requires = ["numpy<<2"]', ["constraints", "'numpy<<2'"]),
    ("impossible include", "[[constraints]]", '[[include]]\ntorch = "2.5.2"\n\n[[constraints]]', ["include[0].torch", "'2.5.2'"]),
    ("include without torch", "[[constraints]]", '[[include]]\nlightning = "2.0.3"\n\n[[constraints]]', ["include[0]", "no torch pin"]),
    (
        "unknown profile in a rule",
        'when = { torch = "<2.1", lightning = ">=2.6" }',
        'when = { torch = "<2.1" }\nprofiles = ["weekly"]',
        ["exclude[0].profiles", "'weekly'"],
    ),
    ("gpu runner not a list", 'runner = ["self-hosted", "gpu"]', 'runner = "gpu"', ["gpu.runner", "'gpu'"]),
]


@pytest.mark.parametrize(("what", "old", "new", "needles"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_matrix_gives_one_actionable_line(tmp_path: Path, what: str, old: str, new: str, needles: list[str]) -> None:
    path = broken(tmp_path, old, new)
    with pytest.raises(BugmatrixError) as info:
        load_matrix(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    for needle in needles:
        assert needle in message, f"{what}: {needle!r} not in {message!r}"


def test_missing_matrix_file(tmp_path: Path) -> None:
    with pytest.raises(BugmatrixError, match="cannot read the matrix"):
        load_matrix(tmp_path / "nope.toml")


def test_cli_exits_2_with_one_line_on_a_broken_matrix(tmp_path: Path) -> None:
    path = broken(tmp_path, 'torch = "2.15.0"', 'torch = "9.9.9"')
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "--matrix", str(path), "plan"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "base.torch" in run.stderr


def test_nox_refuses_a_broken_matrix_with_the_same_line(tmp_path: Path) -> None:
    nox = shutil.which("nox") or str(Path(sys.executable).with_name("nox"))
    if not Path(nox).exists():
        pytest.skip("nox is not installed here")
    path = broken(tmp_path, 'torch = "2.15.0"', 'torch = "9.9.9"')
    run = subprocess.run(
        [nox, "-l"], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "BUGMATRIX_MATRIX": str(path)}, check=False
    )
    assert run.returncode == 2 and "base.torch: '9.9.9' is not in axes.torch" in run.stderr


def test_unknown_profile_and_cell_are_errors() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    with pytest.raises(BugmatrixError, match="unknown profile 'weekly'"):
        plan_cells(matrix, "weekly", PROJECTIONS)
    with pytest.raises(BugmatrixError, match="unknown cell 'py311-torch9'"):
        find_cell(plan_all(matrix, PROJECTIONS), "py311-torch9")


def test_planner_uses_projections_not_the_cross_product() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    cells = [c for c in plan_cells(matrix, "nightly", PROJECTIONS) if c.device == "cpu"]
    profile = matrix.profiles["nightly"]
    cross = len(profile["torch"]) * len(profile["lightning"]) * len(profile["transformers"])
    assert len(cells) < cross / 3
    t5 = [c for c in cells if "transformers" in c.pins]
    assert t5 and all(c.pins["torch"] == matrix.base["torch"] for c in t5), "the T5 case runs at the pinned base torch"
    torch_only = {c.pins["torch"] for c in cells if "transformers" not in c.pins}
    assert torch_only == set(profile["torch"]) - {matrix.base["torch"]} or torch_only <= set(profile["torch"])


def test_covered_cells_are_dropped_and_excludes_apply() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    cells = plan_cells(matrix, "nightly", PROJECTIONS)
    pins = [c.pins for c in cells if c.device == "cpu"]
    for p in pins:
        assert not any(p != q and p.items() <= q.items() for q in pins), f"{p} is covered by a larger cell"
    assert not any(p.get("torch") == "2.0.1" and p.get("lightning") == "2.6.6" for p in pins), "Lightning 2.6 needs torch >= 2.1"


def test_profiles_nest_cell_wise() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    smoke, nightly, full = ({c.id for c in plan_cells(matrix, p, PROJECTIONS)} for p in ("smoke", "nightly", "full"))
    assert smoke <= nightly <= full


def test_gpu_twins_follow_the_gpu_table() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    twins = [c for c in plan_cells(matrix, "nightly", PROJECTIONS) if c.device == "cuda"]
    assert twins and all(c.id.endswith("-cuda") and c.pins["torch"] in matrix.gpu_select["torch"] for c in twins)


def test_python_sweep_in_full() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    pythons = {c.python for c in plan_cells(matrix, "full", PROJECTIONS)}
    assert pythons == set(matrix.profiles["full"]["python"])


def test_cell_id_is_readable() -> None:
    assert cell_id({"python": "3.11", "torch": "2.5.1", "lightning": "2.0.3"}) == "py311-torch2.5.1-pl2.0.3"
    assert cell_id({"python": "3.11", "torch": "2.5.1"}, "cuda") == "py311-torch2.5.1-cuda"


def test_constraints_shape_old_cells() -> None:
    matrix = load_matrix(ROOT / "matrix.toml")
    old = {"python": "3.11", "torch": "2.0.1", "lightning": "2.0.3"}
    reqs = requirements_for(matrix, old)
    assert "pytorch-lightning==2.0.3" in reqs and "setuptools<81" in reqs and "numpy<2" in reqs
    assert import_modules(matrix, old) == ["torch", "pytorch_lightning"]
    new = {"python": "3.11", "torch": "2.15.0", "lightning": "2.6.6"}
    assert "lightning==2.6.6" in requirements_for(matrix, new) and "setuptools<81" not in requirements_for(matrix, new)
    assert import_modules(matrix, new) == ["torch", "lightning.pytorch"]


def test_discover_reads_declared_axes_without_importing() -> None:
    found = {(v.case, v.name): v.axes for v in discover_variants(ROOT / "cases")}
    assert found[("autocast_cache", "core")] == ("torch",)
    assert found[("t5_loss_no_grad_fn", "lightning_trainer")] == ("lightning", "transformers")
    assert found[("double_unscale", "lightning_user_unscale")] == ("torch", "lightning")


def test_declared_axes_match_the_imported_cases() -> None:
    """The ast reading and the real import agree (needs torch)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib

    sys.path.insert(0, str(ROOT / "cases"))
    try:
        for declared in discover_variants(ROOT / "cases"):
            module = importlib.import_module(declared.case)
            registered = {v.axes for v in module.case.variants if v.name == declared.name}
            assert registered == {declared.axes}, declared
    finally:
        sys.path.remove(str(ROOT / "cases"))
