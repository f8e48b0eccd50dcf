"""Test-suite settings: fixtures are data (planted cases, matrix files), never collected as tests."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

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
# (bugmatrix/releases/existence.py), copied into a cache of this test process: a plan of the live or the
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
