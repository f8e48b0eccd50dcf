"""Stages import one way: a package imports only the packages below it (docs/architecture.md draws the order).

The order is data here and nowhere else: reading it top to bottom is reading the
pipeline bottom to top. A neutral top-level module (errors, files, versions,
paths, provenance, ...) is importable by every stage and imports no stage; the
documents between stages (documents/) sit just above the cell, whose run file
and enums they read. The report reads what plan and
releases say only as documents, handed on by the orchestrator (orchestrate.py,
beside the CLI). Imports inside functions count too: a lazy import is still a
dependency; and no module imports itself back through others (no cycle).
"""

from __future__ import annotations

import ast
import shutil
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bugmatrix"

#: Lowest first. ``cli`` (and the noxfile, outside the package) sit on top of everything. ``documents`` (the typed
#: documents between stages) sits just above ``cell``: it reads the cell's run file and enums, and every stage reads it.
ORDER = ("cell", "documents", "plan", "releases", "run", "report", "tools", "publish", "cli")
#: The entry points and the orchestrator they call: above every stage.
ENTRY = ("cli", "__main__", "orchestrate")
#: Stages below a stage that it still may not import: what it needs of them reaches it as a document.
SKIPPED = {"report": ("plan", "releases")}
#: Importable from every stage; they import no stage themselves.
NEUTRAL_OK = ("__init__",)  # the package's public case API re-exports cell/


def _stage(path: Path, package: Path) -> str:
    return _kind(path.relative_to(package).with_suffix("").parts, package)


def _kind(parts: tuple[str, ...], package: Path) -> str:
    if not (package / parts[0]).is_dir():
        return "cli" if parts[0] in ENTRY else f"neutral:{parts[0]}"
    return parts[0]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name == "bugmatrix" or name.startswith("bugmatrix.")]


def _target(module: str, package: Path) -> str:
    parts = tuple(module.split(".")[1:])
    return _kind(parts, package) if parts else "neutral:__init__"


def violations(package: Path = PACKAGE) -> list[str]:
    """Every import that points up the order (or from a neutral module into a stage), as ``file:line: a -> b``."""
    wrong = []
    for path in sorted(package.rglob("*.py")):
        source = _stage(path, package)
        for line, module in _imports(path):
            target = _target(module, package)
            if target == source or target.startswith("neutral:"):
                continue
            where = f"{path.relative_to(package.parent)}:{line}: {source} -> {target} ({module})"
            if source.startswith("neutral:"):
                if source.removeprefix("neutral:") not in NEUTRAL_OK:
                    wrong.append(where + ": a neutral module imports no stage")
                continue
            if ORDER.index(target) > ORDER.index(source):
                wrong.append(where + ": points up the order " + " < ".join(ORDER))
            elif target in SKIPPED.get(source, ()):
                wrong.append(where + ": read it as a document (bugmatrix.documents), handed on by bugmatrix.orchestrate")
    return wrong


def _module(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycle(package: Path = PACKAGE) -> list[str]:
    """One cycle among the package's modules (``a -> b -> a``), every import counted (lazy and type-only too); [] if none."""
    modules = {_module(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {m for m in named if m in modules and m != name}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return []


def test_stages_import_one_way() -> None:
    assert violations() == []


def test_every_stage_package_is_in_the_order() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages <= set(ORDER), f"place {sorted(packages - set(ORDER))} in ORDER"


def test_no_module_imports_itself_back() -> None:
    assert import_cycle() == [], "move the shared piece into the lower module"


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    copy = tmp_path / "bugmatrix"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "errors.py").open("a", encoding="utf-8") as errors:
        errors.write("\nfrom bugmatrix.files import read_json\n")
    assert set(import_cycle(copy)) == {"bugmatrix.errors", "bugmatrix.files"}


@pytest.mark.parametrize(
    ("planted", "line"),
    [
        ("report/planted.py", "from bugmatrix.publish.site import build_site"),
        ("run/planted.py", "import bugmatrix.report.history"),
        ("plan/planted.py", "    from bugmatrix.releases.registry import Resolution"),  # lazy, inside a function
        ("files_planted.py", "from bugmatrix.cell.outcomes import Outcome"),  # a neutral module into a stage
        ("documents/planted.py", "from bugmatrix.report.model import Compat"),  # a document into a stage above it
        ("report/planted.py", "from bugmatrix.plan.cells import plan_document"),  # below, but handed on as a document
        ("report/planted.py", "    import bugmatrix.releases.tracking"),
    ],
)
def test_the_check_sees_an_import_against_the_order(tmp_path: Path, planted: str, line: str) -> None:
    """The test can fail: an import against the order, planted in a copy of the package, is named."""
    copy = tmp_path / "bugmatrix"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    body = f"def f():\n{line}\n" if line.startswith(" ") else f"{line}\n"
    (copy / planted).write_text(body, encoding="utf-8")
    found = violations(copy)
    assert len(found) == 1 and found[0].startswith(f"bugmatrix/{planted}:"), found


def private_imports(package: Path = PACKAGE) -> list[str]:
    """Every ``from bugmatrix.x import _name`` in the package: a private name used elsewhere is public in all but name."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("bugmatrix"):
                found += [
                    f"{path.relative_to(package.parent)}:{node.lineno}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def test_no_module_imports_another_modules_private_name(tmp_path: Path) -> None:
    assert private_imports() == [], "make the name public (and list it in __all__), or move the code that needs it"
    copy = tmp_path / "bugmatrix"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tools" / "planted.py").write_text("from bugmatrix.tools.benchmark.cells import _planted\n", encoding="utf-8")
    assert private_imports(copy) == ["bugmatrix/tools/planted.py:1: bugmatrix.tools.benchmark.cells._planted"]
