"""Test-suite settings: fixtures are data (planted cases, matrix files), never collected as tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


# "latest" in matrix.toml resolves from this fixed answer, never from the live registry, so the
# planned cells (and every nox -l a test starts) are the same on every day; tests that resolve
# point BUGMATRIX_RESOLUTION / BUGMATRIX_INDEX_URL elsewhere themselves.
os.environ.setdefault("BUGMATRIX_RESOLUTION", str(Path(__file__).resolve().parent / "fixtures" / "resolution.json"))
