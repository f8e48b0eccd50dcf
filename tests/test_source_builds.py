"""A distribution built from source is said (run file, report line), and a matrix can refuse source builds.

docopt 0.6.2 is on the registry as an sdist only: the smallest real source build there is (pure Python, a second).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from bugmatrix.cell.environment import SOURCE_BUILDS, describe_environment, source_builds
from bugmatrix.documents.compat import Cell
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix import parse_matrix
from bugmatrix.report.model import COMPAT_SCHEMA, Compat
from bugmatrix.run.envbuild import InstallFailed, ensure_environment
from bugmatrix.run.lock import create_lock
from tests.test_lock import PYTHON, registry_reachable

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ["docopt==0.6.2", "six==1.17.0"]


@pytest.fixture
def uv_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty uv cache for this test; skipped when pypi.org is unreachable."""
    if not registry_reachable():
        pytest.skip("pypi.org is unreachable: the lock and the build need the real registry")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return tmp_path / "uv-cache"


def test_a_source_build_is_recorded_in_the_venv_and_seen_again_when_uv_serves_it_from_its_cache(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(REQUIREMENTS, PYTHON, tmp_path / "cell.txt")
    venv = tmp_path / "venv"
    assert ensure_environment(venv, sys.executable, REQUIREMENTS, [], lock=lock)
    assert (venv / SOURCE_BUILDS).read_text() == "docopt==0.6.2\n", "uv said it built docopt, not six (a wheel)"
    assert source_builds(str(venv)) == {"docopt": "0.6.2"}
    # A second venv from the same cache: uv builds nothing and prints nothing; its record in the dist-info still says so.
    again = tmp_path / "again"
    assert ensure_environment(again, sys.executable, REQUIREMENTS, [], lock=lock)
    assert source_builds(str(again)) == {"docopt": "0.6.2"}


def test_refused_source_builds_are_an_install_failure_naming_the_distribution_and_the_missing_wheel(tmp_path: Path, uv_env: Path) -> None:
    lock = create_lock(REQUIREMENTS, PYTHON, tmp_path / "cell.txt")
    venv = tmp_path / "venv"
    with pytest.raises(InstallFailed) as failed:
        ensure_environment(venv, sys.executable, REQUIREMENTS, [], lock=lock, no_build=True)
    message = str(failed.value)
    assert message.startswith("installing cell.txt: docopt==0.6.2 has no wheel for Python") and "\n" not in message
    assert 'source_builds = "refuse"' in message and not venv.exists()
    assert ensure_environment(venv, sys.executable, REQUIREMENTS, [], lock=lock), "allowed, the same lock builds"
    assert not ensure_environment(venv, sys.executable, REQUIREMENTS, [], lock=lock)
    with pytest.raises(InstallFailed, match="has no wheel"):  # the setting is part of the stamp: not reused, refused
        ensure_environment(venv, sys.executable, REQUIREMENTS, [], lock=lock, no_build=True)


def test_the_setting_is_read_from_matrix_toml_and_a_bad_value_is_one_line() -> None:
    data = tomllib.loads((ROOT / "matrix.toml").read_text(encoding="utf-8"))
    assert not parse_matrix(data, ROOT / "matrix.toml").file.harness.no_build, "allowed unless refused"
    data["harness"]["source_builds"] = "refuse"
    assert parse_matrix(data, ROOT / "matrix.toml").file.harness.no_build
    data["harness"]["source_builds"] = "never"
    with pytest.raises(BugmatrixError, match=r"harness\.source_builds: 'never' is not allow or refuse; write source_builds = \"refuse\""):
        parse_matrix(data, ROOT / "matrix.toml")


def test_the_report_and_the_cells_header_line_say_what_was_built_from_source() -> None:
    cells = (
        Cell("py313-np1.26.4", {}, environment={"source_builds": {"numpy": "1.26.4"}}),
        Cell("py311-np1.26.4", {}, environment={"source_builds": {}}),
    )
    assert Compat(schema=COMPAT_SCHEMA, cells=cells, variants=(), results={}).source_builds == [
        "built from source in py313-np1.26.4: numpy 1.26.4 (no wheel for its Python; refuse with [harness] source_builds)"
    ]
    assert describe_environment({"python": "3.13.1", "source_builds": {"numpy": "1.26.4"}}).endswith("; built from source: numpy 1.26.4")


def test_the_cell_deadline_is_read_from_matrix_toml_into_the_cells_spec(tmp_path: Path) -> None:
    """``[harness] cell_deadline_s``: read, absent or 0 is none, and the runner hands it to the cell in its spec file."""
    from bugmatrix.cell.cellspec import read_options
    from bugmatrix.run.command import CellSpec, spec_path, write_spec

    data = tomllib.loads((ROOT / "matrix.toml").read_text(encoding="utf-8"))
    matrix = parse_matrix(data, ROOT / "matrix.toml")
    assert matrix.cell_deadline_s == data["harness"]["cell_deadline_s"] > 0, "the live matrix sets one"
    run_file = tmp_path / "runs" / "system.json"
    assert write_spec(matrix, CellSpec("system", None), run_file, root=tmp_path) == spec_path(run_file)
    assert read_options(spec_path(run_file)).cell_deadline_s == matrix.cell_deadline_s
    data["harness"]["cell_deadline_s"] = 0
    assert parse_matrix(data, ROOT / "matrix.toml").cell_deadline_s is None
    del data["harness"]["cell_deadline_s"]
    assert parse_matrix(data, ROOT / "matrix.toml").cell_deadline_s is None
