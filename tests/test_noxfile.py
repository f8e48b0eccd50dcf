"""The noxfile plans once at load, and a broken matrix or case file costs the cell sessions only.

``nox -l`` is how a user finds out what there is to run; a typo in one case
file must not take ``nox -s lint`` (which would point at it) down with it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Sessions that need no plan: they must be listed whatever state matrix.toml and the cases are in.
#: nox loads the noxfile with the interpreter it runs in (this venv holds the noxfile's dependencies), as under
#: ``nox -s tests``; run by hand, nox would first build ``.nox/_nox_script_mode`` and log it (uv's lines included).
#: The noxfile in a venv holding only nox and uv is tests/test_bare_interpreter.py's.
IN_THIS_VENV = {"NOX_SCRIPT_MODE": "none"}
PLANLESS = {"lint", "plan", "lock", "bisect", "repro", "stability", "report", "site", "issues", "gpu-kit"}


def nox_list(root: Path, env: dict[str, str] | None = None, clear: tuple[str, ...] = ()) -> tuple[set[str], list[str]]:
    """(session names ``nox -l`` lists, selected or not, and the non-empty lines it wrote to stderr); ``clear``: variables unset."""
    nox = this_venvs_nox()
    environment = {k: v for k, v in {**os.environ, **IN_THIS_VENV, **(env or {})}.items() if k not in clear}
    run = subprocess.run([nox, "-l"], cwd=root, env=environment, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    listed = {line[2:].split()[0] for line in run.stdout.splitlines() if line[:2] in ("* ", "- ")}
    return listed, [line for line in run.stderr.splitlines() if line.strip()]


def this_venvs_nox() -> str:
    """The nox of the venv running the tests: with :data:`IN_THIS_VENV` it loads the noxfile in this venv, which holds
    the noxfile's dependencies (another nox on PATH may sit in an interpreter that does not)."""
    nox = shutil.which("nox", path=str(Path(sys.executable).parent))
    if nox is None:
        pytest.skip(f"no nox beside {sys.executable}")
    return nox


def copy_checkout(tmp_path: Path) -> Path:
    """The files ``nox -l`` reads, copied, so a test can break them."""
    root = tmp_path / "checkout"
    for name in ("noxfile.py", "matrix.toml", "pyproject.toml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    for folder in ("bugmatrix", "cases"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_broken_matrix_is_one_line_and_the_planless_sessions_are_still_listed(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text((ROOT / "matrix.toml").read_text(encoding="utf-8").replace('torch = "2.15.0"', 'torch = "2.15.1"', 1), encoding="utf-8")
    sessions, errors = nox_list(ROOT, {"BUGMATRIX_MATRIX": str(path)})
    assert errors == [
        f"bugmatrix: error: {path}: base.torch: '2.15.1' is not in axes.torch.versions; use one of them, or add it to axes.torch.versions"
    ]
    assert PLANLESS <= sessions and not any(s.startswith("cell(") for s in sessions)


def test_a_syntax_error_in_a_case_is_one_line_and_the_planless_sessions_are_still_listed(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    case = root / "cases" / "double_unscale.py"
    case.write_text(case.read_text(encoding="utf-8") + "\ndef broken(:\n", encoding="utf-8")
    sessions, errors = nox_list(root)
    assert len(errors) == 1 and errors[0].startswith(f"bugmatrix: error: {case}:") and "syntax error" in errors[0]
    assert PLANLESS | {"tests"} <= sessions and not any(s.startswith("cell(") for s in sessions)


def test_a_sound_checkout_lists_its_cells_and_one_report_session_per_profile() -> None:
    sessions, errors = nox_list(ROOT)
    assert not [line for line in errors if "error" in line]
    assert any(s.startswith("cell(") for s in sessions)
    assert {"report-smoke", "report-nightly", "report-full"} <= sessions


def test_listing_asks_no_registry_and_writes_nothing(tmp_path: Path) -> None:
    """``nox -l`` plans from what is saved (issue 35): no request to the registry, nothing under build/.

    Without a saved resolution 'latest' is left out (one warning) and the pinned cells are listed; with one, its
    cells are listed too; either way build/ is as it was. The registry is a counting stand-in on 127.0.0.1.
    """
    from tests.test_matrix_registry import Counting

    requests: list[str] = []
    handler = type("Handler", (Counting,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    root = copy_checkout(tmp_path)
    cleared = ("BUGMATRIX_REPORTS", "BUGMATRIX_RESOLUTION", "BUGMATRIX_REGISTRY_CACHE", "BUGMATRIX_MATRIX")
    env = {k: v for k, v in os.environ.items() if k not in cleared}
    env["BUGMATRIX_INDEX_URL"] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        sessions, said = nox_list(root, env, clear=cleared)
        assert not (root / "build").exists(), sorted(str(p) for p in (root / "build").rglob("*"))
        assert any(s.startswith("cell(") for s in sessions) and len(said) == 1 and "'latest' left out of every profile" in said[0], said
        saved = root / "build" / "reports" / "resolution.json"
        saved.parent.mkdir(parents=True)
        resolved = {
            axis: {"requested": "latest", "resolved": "2.99.0" if axis == "torch" else "5.99.0"} for axis in ("torch", "transformers")
        }
        saved.write_text(json.dumps({"axes": {**resolved, "lightning": {"requested": "latest", "resolved": "2.6.6"}}}), encoding="utf-8")
        before = {p: p.stat().st_mtime_ns for p in (root / "build").rglob("*")}
        sessions, said = nox_list(root, env, clear=cleared)
        assert not said and any("torch2.99.0" in s for s in sessions), (said, sorted(sessions))
        assert {p: p.stat().st_mtime_ns for p in (root / "build").rglob("*")} == before, "nothing written under build/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert requests == [], f"nox -l asked the registry: {requests}"


def test_nox_s_report_says_which_exit_it_was(tmp_path: Path) -> None:
    """nox would turn every failing command into exit 1: the report session says which exit of the CLI it was, and exits with it."""
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not on PATH")
    env = {**os.environ, "BUGMATRIX_REPORTS": str(tmp_path / "reports")}
    run = subprocess.run(
        [nox, "-s", "report", "--", "--baseline", str(tmp_path / "missing.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    last = [line for line in run.stderr.splitlines() if line.strip()][-1]
    assert "report: exit 2 (bad input)" in last, run.stderr[-2000:]
