"""The layout keeps its promises (ARCHITECTURE.md), checked on the source text so a regression is one failing line.

- one runner: the env builder is called by ``bugmatrix/run/runner.py`` only;
- one variant id: built and parsed by ``bugmatrix/cell/ids.py`` only;
- ``bugmatrix/cell/`` runs inside a cell and imports no host module;
- errors meet people in one place: only the CLI turns a BugmatrixError into an exit code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = sorted([*(ROOT / "bugmatrix").rglob("*.py"), ROOT / "noxfile.py"])
HOST_PACKAGES = (
    "bugmatrix.plan",
    "bugmatrix.run",
    "bugmatrix.report",
    "bugmatrix.releases",
    "bugmatrix.tools",
    "bugmatrix.publish",
    "bugmatrix.cli",
    "bugmatrix.orchestrate",
)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def calls(path: Path, name: str) -> list[int]:
    """Lines where ``path`` calls a function named ``name`` (plain or as an attribute)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called == name:
                found.append(node.lineno)
    return found


def test_the_env_builder_has_one_caller_the_runner() -> None:
    callers = {rel(p): lines for p in HARNESS if (lines := calls(p, "ensure_environment"))}
    assert callers.keys() == {"bugmatrix/run/runner.py"}, f"build environments through bugmatrix.run.runner: {callers}"


@pytest.mark.parametrize("path", HARNESS, ids=rel)
def test_variant_ids_are_built_and_parsed_in_one_place(path: Path) -> None:
    if rel(path) == "bugmatrix/cell/ids.py":
        return
    text = path.read_text(encoding="utf-8")
    built = re.findall(r"::\{[^}]*\}\[", text)  # f"{case}::{name}[{tag}]"
    parsed = re.findall(r"""partition\(["']::["']\)|split\(["']::["']\)""", text)
    assert not built and not parsed, f"{rel(path)}: use bugmatrix.cell.ids.VariantId ({built + parsed})"


@pytest.mark.parametrize("path", sorted((ROOT / "bugmatrix" / "cell").glob("*.py")), ids=rel)
def test_cell_code_imports_no_host_module(path: Path) -> None:
    imported = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
        elif isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
    host = [m for m in imported if m.startswith(HOST_PACKAGES)]
    assert not host, f"{rel(path)} runs inside a cell and must not import host code: {host}"


def test_only_the_cli_turns_an_error_into_an_exit_code() -> None:
    exits = {rel(p) for p in HARNESS if "USAGE_EXIT_CODE" in p.read_text(encoding="utf-8")} - {"bugmatrix/errors.py"}
    assert exits == {"bugmatrix/cli.py"}, f"raise BugmatrixError and let bugmatrix.cli report it: {sorted(exits)}"


def test_only_the_cell_sessions_reuse_results() -> None:
    """Reuse belongs to the nightly's cells: stability, bisect and the benchmark's floors compare or time real runs, so they pass no policy."""
    reusing = set()
    for path in HARNESS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "run_cell":
                if any(k.arg == "reuse" for k in node.keywords):
                    reusing.add(rel(path))
    assert reusing == {"noxfile.py", "bugmatrix/run/pool.py"}, (
        f"only the cell and fresh sessions (and their pool) may reuse: {sorted(reusing)}"
    )


def test_the_pages_a_night_publishes_are_defined_once() -> None:
    defined = [rel(p) for p in HARNESS if re.search(r"^PAGES\b.*=", p.read_text(encoding="utf-8"), re.M)]
    assert defined == ["bugmatrix/report/outputs.py"], defined


def test_every_module_imports() -> None:
    """Two branches can each keep their own slice green while one moves a module the other imports (report/markdown.py
    folded into render_md.py under tools/repro.py's import): ruff does not resolve imports, so import every module."""
    import importlib
    import pkgutil

    import bugmatrix

    broken = {}
    for module in pkgutil.walk_packages(bugmatrix.__path__, "bugmatrix."):
        if module.name != "bugmatrix.__main__":  # runs the CLI
            try:
                importlib.import_module(module.name)
            except ImportError as exc:
                broken[module.name] = str(exc)
    assert not broken
