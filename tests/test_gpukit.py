"""The GPU kit (issue 43): packed here, unpacked into a venv with torch and pytest and no index, run there, read by the report.

The box is played by a stdlib venv (pip from ensurepip, offline) that sees this
tests venv's site-packages through a .pth file, the way a baked image has torch,
pytest and its own Lightning 2.6.6; its environment names no index (and a proxy
that refuses every connection). The kit carries pytorch-lightning 2.0.6: its
``lightning_trainer[cpu]`` reads *reproduced*, where the box's own 2.6.6 reads
fixed, so the run shows the carried version ran and not the image's. The
packing talks to the registry (metadata and a few small wheels): e2e.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.tools.cachesize import Artifact
from bugmatrix.tools.gpukit import parse_pins
from bugmatrix.tools.gpukit_run import SCHEMA, cell_device, unmet
from tests.test_lock import registry_reachable

ROOT = Path(__file__).resolve().parent.parent
MATRIX = load_matrix(ROOT / "matrix.toml")
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
VARIANT = "t5_loss_no_grad_fn::lightning_trainer[cpu]"


def test_pins_name_any_package_axis_and_refuse_the_rest_in_one_line() -> None:
    assert parse_pins(["lightning=2.0.3,2.0.6", "transformers=4.57.6", "lightning=2.0.3"], MATRIX) == [
        ("lightning", "2.0.3"),
        ("lightning", "2.0.6"),
        ("transformers", "4.57.6"),
    ]
    for value, said in [
        ("lightnin=2.0.3", "not AXIS=VERSION"),
        (f"{MATRIX.interpreter}=3.12", "not AXIS=VERSION"),  # the interpreter is --python
        ("lightning=2.0.x", "'2.0.x' is not a version"),
    ]:
        with pytest.raises(BugmatrixError, match=said):
            parse_pins([value], MATRIX)
    with pytest.raises(BugmatrixError, match="no version asked for"):
        parse_pins([], MATRIX)


def test_the_command_needs_no_jinja2() -> None:
    """The gpu-kit session's venv has packaging and uv only: the CLI imports the chosen tool's module, not every tool's."""
    code = "import sys; sys.modules['jinja2'] = None; from bugmatrix.cli import main; sys.exit(main(['gpu-kit', '--pin', 'nosuch=1']))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert (done.returncode, done.stderr.splitlines()[-1:]) == (2, [done.stderr.strip()]), done.stderr
    assert done.stderr.startswith("bugmatrix: error: --pin nosuch=1: not AXIS=VERSION")


def test_only_a_wheel_without_native_code_is_pure() -> None:
    def pure(filename: str) -> bool:
        return Artifact("x", "1", filename, 1).pure

    assert pure("tqdm-4.70.1-py3-none-any.whl") and pure("six-1.17.0-py2.py3-none-any.whl")
    assert not pure("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not pure("pyyaml-6.0.3-cp312-abi3-manylinux_2_17_x86_64.whl")
    assert not pure("tokenizers-0.13.3.tar.gz")


def test_the_cell_names_the_gpu_or_the_cpu() -> None:
    assert cell_device({"cuda_available": True, "gpu": "NVIDIA H200"}) == "cuda-h200"
    assert cell_device({"cuda_available": True, "gpu": "NVIDIA GeForce RTX 4090"}) == "cuda-geforce-rtx-4090"
    assert cell_device({"cuda_available": False, "gpu": None}) == "cpu"


def test_what_the_box_must_have_is_checked_against_what_it_has(tmp_path: Path) -> None:
    """Requirements of the carried distributions on what is not carried: missing or too old is named; extras and carried ones are not."""
    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
        "Requires-Dist: packaging>=20\n"  # on this Python: fine
        "Requires-Dist: no-such-distribution-here>=1\n"
        "Requires-Dist: aiohttp-not-here; extra == 'http'\n"  # an extra: not followed
        "Requires-Dist: carried-one>=2\n",  # carried by the same run
        encoding="utf-8",
    )
    run = {"axis": "lightning", "version": "2.0.3", "install": ["demo==1.0", "carried-one==2.1"], "requires": ["packaging<1"]}
    have = metadata.version("packaging")
    assert unmet(tmp_path, run) == [
        f"lightning 2.0.3 needs packaging<1, and this Python has {have}",
        "demo 1.0 needs no-such-distribution-here>=1, and this Python has none",
    ]


def _fake_kit(tmp_path: Path, kit: dict[str, object]) -> Path:
    """run.py beside a kit.json, with the checkout's harness (no wheels: these runs stop before installing)."""
    shutil.copy2(ROOT / "bugmatrix" / "tools" / "gpukit_run.py", tmp_path / "run.py")
    (tmp_path / "bugmatrix").symlink_to(ROOT / "bugmatrix")
    (tmp_path / "kit.json").write_text(json.dumps({"schema": SCHEMA, **kit}), encoding="utf-8")
    return tmp_path / "run.py"


@pytest.mark.parametrize(
    ("runs", "runtime", "said"),
    [
        (
            [{"python": "3.99", "label": "pl2.0.3"}],
            "torch",
            f"this is Python {PYTHON} .* packed for 3.99; pack it again with --python {PYTHON}",
        ),
        (
            [{"python": PYTHON, "label": "pl2.0.3"}],
            "no-such-runtime",
            "no-such-runtime is not installed for .*; run run.py with the Python that has it",
        ),
    ],
)
def test_run_py_says_in_one_line_what_the_box_lacks(tmp_path: Path, runs: list[dict[str, str]], runtime: str, said: str) -> None:
    spec = {"axes": {"runtime": [[runtime, runtime]]}, "device_runtime": "runtime"}
    script = _fake_kit(tmp_path, {"runs": runs, "axis_spec": spec})
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("run.py: error: ") and re.search(said, line), line


@pytest.mark.e2e
def test_a_version_that_cannot_install_offline_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not registry_reachable():
        pytest.skip("pypi.org is unreachable: the kit is resolved against the real registry")
    out = tmp_path / "kit"
    assert main(["gpu-kit", "--pin", "transformers=4.30.2", "--pin", "torch=2.15.0", "--python", "3.12", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "transformers 4.30.2 cannot install offline on Python 3.12: no wheel of tokenizers fits Python 3.12" in line
    assert "torch 2.15.0 ships native code" in line
    assert not out.exists() and not list(tmp_path.iterdir()), "nothing is written when a version is refused"


def _box(path: Path) -> Path:
    """A venv with pip (ensurepip, offline) that sees this venv's torch, pytest and Lightning like a baked image."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    )
    (Path(site.stdout.strip()) / "image.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


@pytest.mark.e2e
def test_the_kit_runs_offline_and_the_report_reads_its_run_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not registry_reachable():
        pytest.skip("pypi.org is unreachable: the kit is packed from the real registry")
    box_lightning = metadata.version("lightning")
    assert box_lightning != "2.0.6", "the box's own Lightning must differ from the carried one for this test to tell them apart"

    kit = tmp_path / "kit"
    assert main(["gpu-kit", "--pin", "lightning=2.0.6", "--python", PYTHON, "--out", str(kit)]) == 0
    assert f"py{PYTHON} pl2.0.6:" in capsys.readouterr().out
    wheels = sorted(p.name for p in (kit / "wheels").iterdir())
    assert "pytorch_lightning-2.0.6-py3-none-any.whl" in wheels and all(w.endswith("-none-any.whl") for w in wheels), wheels
    assert not any(w.startswith("torch-") for w in wheels), "the box has torch: the kit carries none"
    size = sum(p.stat().st_size for p in kit.rglob("*") if p.is_file())
    assert size < 60 * 2**20

    python = _box(tmp_path / "box")
    refuse = "http://127.0.0.1:9"  # nothing listens there: any attempt at the network fails
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PIP_NO_INDEX": "1", "PIP_INDEX_URL": refuse, "HTTP_PROXY": refuse, "HTTPS_PROXY": refuse, "https_proxy": refuse}
    out = tmp_path / "results"
    done = subprocess.run(
        [python, kit / "run.py", "--out", out, "--", "-k", "lightning_trainer and cpu"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [run_file] = (out / "runs").glob("system-*-pl2.0.6.json")
    assert f"{run_file.stem}: 1 reproduced" in done.stdout
    environment = json.loads(run_file.read_text(encoding="utf-8"))["environment"]
    assert (environment["lightning"], environment["lightning_package"]) == ("2.0.6", "pytorch-lightning")
    assert (out / "logs" / f"{run_file.stem}.log").is_file() and "stack: " in (out / "environment.txt").read_text(encoding="utf-8")

    assert main(["report", "--reports", str(out), "--date", "2026-11-27"]) == 0
    compat = json.loads((out / "compat.json").read_text(encoding="utf-8"))
    assert compat["results"][VARIANT][run_file.stem]["outcome"] == "reproduced"
