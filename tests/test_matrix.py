"""matrix.toml: the live file loads, and every broken input is one line naming the file, the key and the value.

The broken inputs are the reference matrix (``tests/fixtures/reference/``, a
frozen copy of this project's matrix) with one edit each, never the live
``matrix.toml``, which a user may grow (an edit whose anchor vanished fails loudly).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.releases.tracking import load_plan
from tests.reference import REFERENCE_MATRIX

ROOT = Path(__file__).resolve().parent.parent
REAL = REFERENCE_MATRIX.read_text(encoding="utf-8")
SCHEMA_LINE = REAL.splitlines().index("schema = 2") + 1
FIRST_EXCLUDE = 'when = { torch = "<2.1", lightning = ">=2.6" }'


def edited(tmp_path: Path, old: str, new: str) -> Path:
    """The reference matrix with its first ``old`` replaced by ``new``."""
    assert old in REAL, f"anchor {old!r} vanished from the reference matrix: update this test"
    path = tmp_path / "matrix.toml"
    path.write_text(REAL.replace(old, new, 1), encoding="utf-8")
    return path


HARNESS_REQUIRES = 'requires = ["pytest>=8", "pytest-xdist>=3.5", "packaging>=23"]\n'

# (id, old, new, key the message names, offending value it names)
BROKEN = [
    ("toml-syntax", "schema = 2", "schema = = 2", "not valid TOML", f"line {SCHEMA_LINE}"),
    ("wrong-schema", "schema = 2", "schema = 3", "schema", "3 is not a known matrix schema"),
    ("schema-true", "schema = 2", "schema = true", "schema", "True is not a known matrix schema"),
    ("schema-missing", "schema = 2\n", "\n", "schema", "missing; set schema = 2"),
    ("unknown-top-level-key", "schema = 2", 'schema = 2\nprofile = "smoke"', "profile", "unknown key"),
    ("unknown-key-in-profile", "[profiles.smoke]\n", '[profiles.smoke]\ntorchh = ["2.5.1"]\n', "profiles.smoke.torchh", "unknown key"),
    ("axis-without-distributions", "[axes.python]\n", '[axes.numpy]\nprefix = "np"\nversions = ["2.1.3"]\n\n[axes.python]\n',
     "axes.numpy.distributions and axes.python.distributions", "only the interpreter axis has none"),
    ("no-interpreter", '[axes.python]\nprefix = "py"\n', '[axes.python]\nprefix = "py"\ndistributions = { cpython = "sys" }\n', "axes",
     "no interpreter axis"),
    ("every-cell-not-a-flag", "every_cell = true\ndevice_runtime", 'every_cell = "yes"\ndevice_runtime', "axes.torch.every_cell", "'yes' is not true or false"),
    ("two-device-runtimes", 'prefix = "pl"', 'prefix = "pl"\ndevice_runtime = true', "axes.lightning.device_runtime",
     "axes.torch is the device runtime already"),
    ("axis-prefix-taken", 'prefix = "tf"', 'prefix = "pl"', "axes.transformers.prefix", "'pl' is used by another axis"),
    ("unknown-key-in-axis", 'prefix = "tf"', 'prefix = "tf"\nmodule = "transformers"', "axes.transformers.module", "unknown key"),
    ("malformed-version", 'versions = ["2.0.1",', 'versions = ["2.x",', "axes.torch.versions[0]", "'2.x'"),
    ("version-with-prefix", 'versions = ["2.0.1",', 'versions = ["v2.0.1",', "axes.torch.versions[0]", "'v2.0.1' is not written canonically"),
    ("version-with-space", 'versions = ["2.0.1",', 'versions = ["2.0.1 ",', "axes.torch.versions[0]", 'write "2.0.1"'),
    ("version-leading-zero", 'versions = ["2.0.1",', 'versions = ["02.0.1",', "axes.torch.versions[0]", "'02.0.1'"),
    ("version-not-a-string", 'python = "3.11"', "python = 3.11", "base.python", "3.11"),
    ("empty-axis", 'versions = ["4.28.1", "4.29.2", "4.30.2", "4.36.2", "4.46.3", "4.57.6", "5.23.0"]',
     "versions = []", "axes.transformers.versions", "[] is not a non-empty list of versions"),
    ("duplicate-version", 'versions = ["2.0.3", "2.0.6",', 'versions = ["2.0.3", "2.0.3",', "axes.lightning.versions", "duplicate version(s) 2.0.3"),
    ("profile-value-not-in-axis", 'within = "nightly"\ntorch = ["2.5.1"', 'within = "nightly"\ntorch = ["2.5.2"', "profiles.smoke.torch",
     "'2.5.2' is not in axes.torch"),
    ("smoke-not-in-nightly", 'within = "full"\ntorch = ["2.0.1", "2.5.1",', 'within = "full"\ntorch = ["2.0.1",',
     "profiles.smoke.torch", "'2.5.1' is not in profiles.nightly; smoke is declared within nightly"),
    ("within-unknown-profile", "[profiles.full]\n", "[profiles.everything]\n", "profiles.nightly.within", "'full' is not another profile"),
    ("within-loop", "[profiles.full]\n", '[profiles.full]\nwithin = "smoke"\n', "profiles.smoke.within",
     "the relation loops (smoke within nightly within full within smoke)"),
    ("profile-name-unusable", "[profiles.smoke]", '[profiles."smoke test"]', "profiles.smoke test", "is not a usable profile name"),
    ("profile-name-gpu", "[profiles.smoke]", "[profiles.gpu-smoke]", "profiles.gpu-smoke", "not starting with gpu-"),
    ("no-profiles", "[profiles.smoke]", "[nothing]", "nothing", "unknown key"),
    ("base-pin-missing", 'transformers = "5.23.0"\n', "", "base.transformers", "missing"),
    ("base-pin-not-in-axis", 'torch = "2.15.0"', 'torch = "2.15.1"', "base.torch", "'2.15.1' is not in axes.torch"),
    ("bad-exclude-specifier", FIRST_EXCLUDE, 'when = { torch = "<<2.1", lightning = ">=2.6" }', "exclude[0].when.torch", "'<<2.1'"),
    ("exclude-without-condition", FIRST_EXCLUDE, "profiles = [\"full\"]", "exclude[0].when", "missing; name at least one axis"),
    ("unknown-profile-in-exclude", FIRST_EXCLUDE, f'{FIRST_EXCLUDE}\nprofiles = ["weekly"]', "exclude[0].profiles", "'weekly'"),
    ("bad-requirement", 'requires = ["setuptools<81"]', 'requires = ["setuptools<<81"]', "constraints[1].requires", "'setuptools<<81'"),
    ("direct-url-requirement", 'requires = ["setuptools<81"]', 'requires = ["setuptools @ https://example.invalid/s.whl"]',
     "constraints[1].requires[0]", "is a direct URL or path"),
    ("allow-direct-without-why", 'requires = ["setuptools<81"]\nwhy = "lightning/pytorch-lightning < 2.4 import pkg_resources, which setuptools 81 removed (seen: ModuleNotFoundError)"',
     'requires = ["setuptools @ file:///tmp/s.whl"]\nallow_direct = true', "constraints[1].allow_direct", "true without a why"),
    ("bad-harness-requirement", '"pytest-xdist>=3.5"', '"pytest-xdist>=>3.5"', "harness.requires", "'pytest-xdist>=>3.5'"),
    ("impossible-include", "[[constraints]]", '[[include]]\ntorch = "2.15.0"\nlightning = "1.9.5"\n\n[[constraints]]',
     "include[0].lightning", "'1.9.5' is not in axes.lightning"),
    ("include-pins-nothing", "[[constraints]]", '[[include]]\nprofiles = ["full"]\n\n[[constraints]]', "include[0]", "pins nothing"),
    ("include-unknown-profile", "[[constraints]]", '[[include]]\ntorch = "2.5.1"\nprofiles = ["fast"]\n\n[[constraints]]',
     "include[0].profiles", "'fast'"),
    ("base-when-without-why", 'why = "torch 2.15.0 has no cp310 wheel; transformers 5.x requires Python >= 3.11"', "",
     "base_when[0].why", "missing"),
    ("base-when-unlisted-pin", 'pins = { torch = "2.14.1",', 'pins = { torch = "2.14.9",', "base_when[0].pins.torch",
     "'2.14.9' is not in axes.torch"),
    ("cell-deadline-not-seconds", HARNESS_REQUIRES, f'{HARNESS_REQUIRES}cell_deadline_s = "30m"\n', "harness.cell_deadline_s", "'30m' is not a number of seconds"),
    ("cell-deadline-negative", HARNESS_REQUIRES, f"{HARNESS_REQUIRES}cell_deadline_s = -1\n", "harness.cell_deadline_s", "-1 is not a number of seconds"),
    ("empty-profile", "[profiles.full]\n", '[profiles.weekly]\n\n[profiles.full]\n', "profiles.weekly", "lists no versions"),
    ("within-only-profile", "[profiles.full]\n", '[profiles.weekly]\nwithin = "full"\n\n[profiles.full]\n', "profiles.weekly", "lists no versions"),
    ("gpu-runner-not-a-list", 'runner = ["self-hosted", "gpu"]', 'runner = "gpu"', "gpu.runner", "'gpu' is not a non-empty list"),
    ("prefix-not-alphanumeric", 'prefix = "tf"', 'prefix = "t-f"', "axes.transformers.prefix", "'t-f' is not a short alphanumeric prefix"),
    ("module-empty", 'distributions = { transformers = "transformers" }', 'distributions = { transformers = "" }',
     "axes.transformers.distributions.transformers", "'' is not a module name"),
    ("profile-list-empty", 'lightning = ["2.0.3", "2.6.6"]', "lightning = []", "profiles.smoke.lightning", "[] is not a non-empty list of versions"),
    ("exclude-why-not-text", FIRST_EXCLUDE, f"{FIRST_EXCLUDE}\nwhy = 3", "exclude[0].why", "3 is not a sentence"),
    ("specifier-not-a-string", FIRST_EXCLUDE, 'when = { torch = 3, lightning = ">=2.6" }', "exclude[0].when.torch", "3 is not a version specifier"),
    ("allow-direct-not-a-flag", 'requires = ["setuptools<81"]', 'requires = ["setuptools<81"]\nallow_direct = "yes"', "constraints[1].allow_direct",
     "'yes' is not true or false"),
]  # fmt: skip
BY_ID = {b[0]: b[1:] for b in BROKEN}


@pytest.mark.parametrize(("old", "new", "key", "value"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_matrix_is_one_line_naming_file_key_and_value(tmp_path: Path, old: str, new: str, key: str, value: str) -> None:
    """Every defect is a BugmatrixError: one line, ``file: key: problem; fix``."""
    path = edited(tmp_path, old, new)
    with pytest.raises(BugmatrixError) as info:
        load_matrix(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    assert key in message and value in message, message
    assert "; " in message, f"no fix suggested: {message}"


def test_missing_matrix_file(tmp_path: Path) -> None:
    """A wrong path says which file and how to point at the right one."""
    path = tmp_path / "nope.toml"
    with pytest.raises(BugmatrixError) as info:
        load_matrix(path)
    assert str(info.value).startswith(f"{path}: cannot read the matrix") and "--matrix" in str(info.value)


def test_the_live_matrix_loads_and_plans_every_profile() -> None:
    """The checked-in matrix and cases are valid together: every profile plans, every ``within`` holds cell by cell."""
    planned = load_plan(load_matrix(ROOT / "matrix.toml"), ROOT / "cases", registry=False, fallback=True)
    for profile in planned.matrix.profiles:
        assert planned.profile_cells(profile), profile


def test_the_reference_matrix_keeps_its_roles() -> None:
    """The reference: torch is installed in every cell and is the device runtime; profiles nest by ``within``."""
    matrix = load_matrix(REFERENCE_MATRIX)
    assert matrix.interpreter == "python" and matrix.held_axes == ("python", "torch") and matrix.device_runtime == "torch"
    assert list(matrix.profiles) == ["smoke", "nightly", "full"] and matrix.file.within == {"smoke": "nightly", "nightly": "full"}
    assert matrix.file.constraints and matrix.file.exclude
    assert any(r.startswith("pytest-xdist") for r in matrix.file.harness.requires), "cells run their cases with xdist"


@pytest.mark.parametrize(("old", "new", "key", "value"), [BY_ID["toml-syntax"], BY_ID["base-pin-not-in-axis"]], ids=["toml", "validation"])
def test_cli_prints_one_line_and_exits_2(tmp_path: Path, old: str, new: str, key: str, value: str) -> None:
    """``python -m bugmatrix --matrix BROKEN plan``: exit 2, nothing on stdout, one line on stderr."""
    path = edited(tmp_path, old, new)
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "--matrix", str(path), "plan"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == USAGE_EXIT_CODE == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bugmatrix: error: ") and key in lines[0] and value in lines[0], run.stderr


@pytest.mark.parametrize(("old", "new", "key", "value"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_cli_catches_every_matrix_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, key: str, value: str
) -> None:
    """The CLI is the one place errors meet people: each defect is exit 2 and one line, never a traceback."""
    assert main(["--matrix", str(edited(tmp_path, old, new)), "plan"]) == USAGE_EXIT_CODE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and key in err


def test_an_axis_named_like_a_key_is_told_by_where_it_is(tmp_path: Path) -> None:
    """An axis named ``prefix`` is a version in [base] and a specifier in ``when``, never "not an alphanumeric prefix"."""
    path = tmp_path / "matrix.toml"
    for old, new, told in [
        ('prefix = "2.6.6"', "prefix = 3", "base.prefix: 3 is not a version string; write it quoted"),
        ('prefix = ">=2.6"', "prefix = 2", 'exclude[0].when.prefix: 2 is not a version specifier; write e.g. "<2.1"'),
    ]:
        path.write_text(REAL.replace("lightning", "prefix").replace(old, new, 1), encoding="utf-8")
        with pytest.raises(BugmatrixError) as info:
            load_matrix(path)
        assert str(info.value).startswith(f"{path}: {told}"), str(info.value)


# Known defects (see the report that came with these tests): remove the marker once fixed.
def test_unknown_distribution_is_rejected_at_load(tmp_path: Path) -> None:
    """A misspelt distribution must fail when the matrix is read, not as a KeyError inside a cell session."""
    path = edited(tmp_path, 'distribution = { lightning = "pytorch-lightning" }', 'distribution = { lightning = "pytorch-lightnin" }')
    with pytest.raises(BugmatrixError, match=r"constraints\[0\]\.distribution\.lightning.*'pytorch-lightnin'"):
        load_matrix(path)


def test_requires_must_be_a_list(tmp_path: Path) -> None:
    """``requires = "numpy<2"`` (a string, not a list) is named as written, not character by character."""
    path = edited(tmp_path, 'requires = ["setuptools<81"]', 'requires = "setuptools<81"')
    with pytest.raises(BugmatrixError, match=r"constraints\[1\]\.requires.*'setuptools<81'"):
        load_matrix(path)


def test_gpu_selection_must_be_on_the_axis(tmp_path: Path) -> None:
    """A [gpu] version that no cell can have is a typo, not an empty GPU plan."""
    path = edited(tmp_path, 'torch = ["2.10.0", "2.15.0"]', 'torch = ["2.10.0", "2.15.1"]')
    with pytest.raises(BugmatrixError, match=r"gpu\.torch.*'2\.15\.1'"):
        load_matrix(path)
