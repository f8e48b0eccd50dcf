"""Locks with real uv processes and real (small) packages from the registry.

The promise under test: a venv rebuilt from a lock through the one builder
(``ensure_environment``), with the venv gone and an empty uv cache, holds
exactly what it held before. Needs the registry
(pypi.org), like the e2e tests, but takes seconds, so it runs in the normal session.
"""

from __future__ import annotations

import functools
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cell.case import CPU_BF16, Case
from bugmatrix.cell.outcomes import Signature
from bugmatrix.errors import BugmatrixError
from bugmatrix.run.envbuild import InstallFailed, ensure_environment, uv_command
from bugmatrix.run.lock import create_lock, lock_for, lock_path, lock_status, read_header

REQUIREMENTS = ["packaging==24.1", "six", "tomli"]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@functools.cache
def registry_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture
def uv_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty uv cache for this test (and the processes it starts); skips when pypi.org is unreachable."""
    if not registry_reachable():
        pytest.skip("pypi.org is unreachable: locks resolve against the real registry")
    cache = tmp_path / "uv-cache-1"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    return cache


def make_venv(path: Path) -> Path:
    subprocess.run([*uv_command(), "venv", "-q", "-p", sys.executable, str(path)], check=True)
    return path


def build(venv: Path, lock: Path, requirements: list[str] = REQUIREMENTS) -> bool:
    return ensure_environment(venv, sys.executable, requirements, ["packaging"] if "packaging" in lock.read_text() else [], lock=lock)


def freeze(venv: Path) -> list[str]:
    listed = subprocess.run(
        [*uv_command(), "pip", "freeze", "--python", str(venv / "bin" / "python")], capture_output=True, text=True, check=True
    )  # fmt: skip
    return listed.stdout.splitlines()


def test_a_venv_rebuilt_from_the_lock_with_an_empty_cache_is_identical(
    tmp_path: Path, uv_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = create_lock(REQUIREMENTS, PYTHON, lock_path(tmp_path, "py-small"))
    assert lock == tmp_path / "locks" / "py-small.txt"
    text = lock.read_text()
    assert "packaging==24.1 \\\n    --hash=sha256:" in text and "\nsix==" in text and "\ntomli==" in text

    venv = tmp_path / "venv"
    assert build(venv, lock)
    first = freeze(venv)
    assert {line.split("==")[0] for line in first} == {"packaging", "six", "tomli"} and "packaging==24.1" in first
    assert not build(venv, lock), "an unchanged lock reuses the venv"

    shutil.rmtree(venv)
    shutil.rmtree(uv_env)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache-2"))
    assert build(venv, lock)
    assert freeze(venv) == first
    assert any((tmp_path / "uv-cache-2").iterdir()), "the rebuild did download into the new, empty cache"


def test_a_lock_stored_as_pieces_installs_with_hashes_exactly_as_the_whole_one(tmp_path: Path, uv_env: Path) -> None:
    """The committed form: the cell a short list of pins, the hash blocks in locks/pieces; uv gets the complete text back."""
    whole = create_lock(REQUIREMENTS, PYTHON, tmp_path / "whole" / "py-small.txt")
    stored = create_lock(REQUIREMENTS, PYTHON, lock_path(tmp_path, "py-small"), pieces=True)
    assert "--hash=" not in stored.read_text() and " #piece " in stored.read_text()
    assert len(list((tmp_path / "locks" / "pieces").glob("*.txt"))) == 3, "one piece per distribution"
    installed, reason = lock_for(tmp_path, "py-small", REQUIREMENTS, PYTHON)
    assert reason is None and installed is not None and installed != stored
    assert installed.read_text() == whole.read_text(), "assembled: uv's own output, byte for byte"
    venv = tmp_path / "venv"
    assert build(venv, installed)
    assert "packaging==24.1" in freeze(venv)
    assert lock_for(tmp_path, "py-small", REQUIREMENTS, PYTHON) == (installed, None), "assembled once, the same file after"
    assert not build(venv, installed), "an unchanged lock reuses the venv"


def test_the_stamp_includes_the_lock_so_a_recreated_lock_rebuilds(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(["six"], PYTHON, tmp_path / "six.txt")
    venv = tmp_path / "venv"
    assert build(venv, lock, ["six"])
    lock.write_text(lock.read_text().replace("# platform:", "# re-created\n# platform:"))
    assert build(venv, lock, ["six"]), "same requirements, another lock text: rebuilt, not reused"


def test_a_cell_uses_its_lock_only_while_it_is_current(tmp_path: Path, uv_env: Path) -> None:
    requirements = ["six"]
    assert lock_for(tmp_path, "py311-six", requirements, PYTHON) == (
        None,
        "py311-six.txt: no lock for this cell; create it with: nox -s lock",
    )
    lock = create_lock(requirements, PYTHON, lock_path(tmp_path, "py311-six"))
    assert lock_for(tmp_path, "py311-six", requirements, PYTHON) == (lock, None)
    assert lock_for(tmp_path, "py311-six-cuda", requirements, PYTHON) == (lock, None), "a CUDA twin installs its CPU cell's lock"
    path, reason = lock_for(tmp_path, "py311-six", ["six", "tomli"], PYTHON)
    assert path is None and reason is not None and "stale" in reason and "+tomli" in reason


def test_sync_removes_what_the_lock_does_not_list(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(["six"], PYTHON, tmp_path / "six.txt")
    venv = make_venv(tmp_path / "venv")
    subprocess.run([*uv_command(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "tomli"], check=True)
    assert build(venv, lock, ["six"])  # the old venv is not current: rebuilt from the lock alone
    assert [line.split("==")[0] for line in freeze(venv)] == ["six"]


def test_exclude_newer_resolves_as_the_registry_stood_then(tmp_path: Path, uv_env: Path) -> None:
    # packaging 24.1 was uploaded 2024-06-09; 24.2 came in November 2024.
    lock = create_lock(["packaging"], PYTHON, tmp_path / "old.txt", exclude_newer="2024-07-01T00:00:00Z")
    assert "\npackaging==24.1 \\" in lock.read_text()
    assert read_header(lock)["exclude-newer"] == "2024-07-01T00:00:00Z"
    # An exempt distribution is resolved as of today: the harness's own tools need not be of the cell's era.
    today = create_lock(["packaging", "six"], PYTHON, tmp_path / "exempt.txt", exclude_newer="2024-07-01T00:00:00Z", exempt=["packaging"])
    assert "\npackaging==24.1 \\" not in today.read_text() and "\nsix==1.16.0 \\" in today.read_text()
    assert read_header(today)["exempt"] == "packaging"


def test_a_changed_pin_makes_the_lock_stale_with_a_clear_message(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(REQUIREMENTS, PYTHON, tmp_path / "cell.txt")
    assert lock_status(lock, list(reversed(REQUIREMENTS)), python=PYTHON) is None
    header = read_header(lock)
    assert header["requirement"] == REQUIREMENTS and header["python"] == PYTHON
    reason = lock_status(lock, ["packaging==24.2", "six", "tomli"])
    assert reason is not None and "stale" in reason and "-packaging==24.1, +packaging==24.2" in reason and "re-create" in reason
    assert lock_status(lock, REQUIREMENTS, python="3.99") is not None
    assert "no lock for this cell" in str(lock_status(tmp_path / "missing.txt", REQUIREMENTS))


def test_unresolvable_requirements_are_one_line(tmp_path: Path, uv_env: Path) -> None:
    with pytest.raises(BugmatrixError) as info:
        create_lock(["packaging==0.0.0.1"], PYTHON, tmp_path / "bad.txt")
    assert "cannot lock bad.txt" in str(info.value) and "packaging" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "bad.txt").exists()


def test_a_tampered_hash_is_refused(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(["six"], PYTHON, tmp_path / "six.txt")
    lines = lock.read_text().splitlines()
    # Replace every hash of six with one that no file has: the install must refuse, not trust the name.
    lock.write_text(
        "\n".join(
            line.split("sha256:")[0] + "sha256:" + "0" * 64 + (" \\" if line.endswith("\\") else "") if "sha256:" in line else line
            for line in lines
        )
        + "\n"
    )
    venv = tmp_path / "venv"
    with pytest.raises(InstallFailed, match=r"(?s)installing six\.txt: .*Hash mismatch for `six=="):
        build(venv, lock, ["six"])
    assert not venv.exists() and not (tmp_path / "venv.new").exists(), "nothing half-built is left"


def test_pinned_distributions_are_the_exact_pins() -> None:
    from bugmatrix.run.lock import pinned_distributions

    requirements = ["torch==2.0.1", "pytorch-lightning==2.0.3", "setuptools<81", "pytest>=8", "Numpy==1.24.3"]
    assert pinned_distributions(requirements) == {"torch": "2.0.1", "pytorch-lightning": "2.0.3", "Numpy": "1.24.3"}


def test_stability_and_bisect_build_a_planned_cell_from_its_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both go through the runner, which builds a planned cell from its lock: built without it, the venv would be rebuilt unlocked (and back)."""
    import bugmatrix.run.runner
    import bugmatrix.tools.bisect
    import bugmatrix.tools.stability
    from bugmatrix.plan.cells import Cell
    from bugmatrix.releases.tracking import load_resolved_matrix
    from bugmatrix.run.lock import requirements_digest

    matrix = load_resolved_matrix(Path(__file__).resolve().parent.parent / "matrix.toml")
    pins = {"python": "3.11", "torch": "2.5.1"}
    cell = Cell(matrix.cell_id(pins), pins)
    lock = lock_path(tmp_path, cell.id)
    lock.parent.mkdir()
    lock.write_text(f"# requirements-sha256: {requirements_digest(matrix.requirements_for(pins))}\n# python: 3.11\nsix==1.17.0\n")
    seen: list[Path | None] = []

    def record(*args: object, lock: Path | None = None, **settings: object) -> bool:
        seen.append(lock)
        raise InstallFailed("recorded")

    monkeypatch.setattr(bugmatrix.run.runner, "ensure_environment", record)
    with pytest.raises(BugmatrixError, match="cannot be built"):
        bugmatrix.tools.stability.run_repeatedly(tmp_path, matrix, cell, 2, [])
    case = Case(id="x", title="t", signature=Signature("x"), axes=("torch",))
    case.variant(devices=(CPU_BF16,))(y)
    probe, _ = bugmatrix.tools.bisect.run_variant_in(tmp_path, matrix, pins, case.variants[0])
    assert probe.outcome == "install-failed" and seen == [lock, lock]


def y(device: str, dtype: object) -> dict[str, bool]:
    return {}
