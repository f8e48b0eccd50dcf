"""Test-suite settings: fixtures are data (planted cases, matrix files), never collected as tests."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from tests.barenox import make_bare_nox

# Property tests here are judged by their oracle, never by a clock: on a 2-core machine shared with cell builds a
# generated example can take 0.5 s where it took 20 ms (speed is the benchmark's business, not the tests').
settings.register_profile("bugmatrix", deadline=None)
settings.load_profile("bugmatrix")

collect_ignore_glob = ["fixtures/*"]

CASES = Path(__file__).resolve().parent.parent / "cases"


@pytest.fixture(scope="session")
def case_modules() -> dict[str, ModuleType]:
    """The real case modules by file stem, imported once (they import torch: skips without it)."""
    pytest.importorskip("torch")
    modules = {}
    for path in sorted(CASES.glob("[!_]*.py")):
        spec = importlib.util.spec_from_file_location(f"_bugmatrix_case_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[path.stem] = module
    return modules


# The registry's release lists of this project's axes, as the plan-time version check caches them
# (bugmatrix/releases/registry.py), copied into a cache of this test process: a plan of the live or the
# reference matrix asks no registry (a stand-in one on 127.0.0.1 may list only what its test needs), and a
# version no list holds (a user's new axis) is asked of the real registry and cached here, never in the checkout.
_REGISTRY_CACHE = Path(tempfile.mkdtemp(prefix="bugmatrix-registry-"))
for _known in (Path(__file__).resolve().parent / "fixtures" / "registry").glob("*.json"):
    shutil.copy(_known, _REGISTRY_CACHE / _known.name)
atexit.register(shutil.rmtree, _REGISTRY_CACHE, ignore_errors=True)
os.environ.setdefault("BUGMATRIX_REGISTRY_CACHE", str(_REGISTRY_CACHE))

# "latest" in matrix.toml resolves from this fixed answer, never from the live registry, so the
# planned cells (and every nox -l a test starts) are the same on every day; tests that resolve
# point BUGMATRIX_RESOLUTION / BUGMATRIX_INDEX_URL elsewhere themselves.
os.environ.setdefault("BUGMATRIX_RESOLUTION", str(Path(__file__).resolve().parent / "fixtures" / "resolution.json"))


@pytest.fixture(scope="session")
def bare_nox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only nox and uv (the README's install), to run nox from as a fresh runner does (tests/barenox.py)."""
    venv = make_bare_nox(tmp_path_factory.mktemp("bare") / "venv")
    has = subprocess.run([str(venv / "bin" / "python"), "-c", "import jinja2"], capture_output=True, check=False)
    assert has.returncode != 0, "the bare venv must not have jinja2: it stands for a runner with only nox and uv"
    return venv


def _checkout_state() -> tuple[str, str] | None:
    """What ``git`` says of the checkout: (status, the diff against HEAD), or None outside a git checkout."""
    root = CASES.parent
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    run = [["git", "status", "--porcelain=v1", "-uall"], ["git", "diff", "--no-ext-diff", "HEAD"]]
    done = [subprocess.run(c, cwd=root, capture_output=True, text=True, check=False, timeout=60) for c in run]
    return (done[0].stdout, done[1].stdout) if all(d.returncode == 0 for d in done) else None


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist): once per test run
        session.config.stash[_CHECKOUT] = _checkout_state()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test that writes into the checkout fails the run: the tests must leave ``git status`` as they found it.

    (One did: ``plan --resolve`` wrote tonight's answer over the tests' fixed one in tests/fixtures/.)
    """
    before = session.config.stash.get(_CHECKOUT, None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    after = _checkout_state()
    if after is not None and after != before:
        changed = sorted(set(after[0].splitlines()) - set(before[0].splitlines())) or ["(a file changed again: git diff)"]
        print(f"\nbugmatrix tests: the run changed the checkout: {', '.join(changed)}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CHECKOUT = pytest.StashKey[tuple[str, str] | None]()
