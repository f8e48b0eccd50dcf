"""No axis is named in the harness (issue 24 item 3): axes, their distributions and modules, and their roles live in matrix.toml.

Checked on the source of every harness module (``bugmatrix/**`` and the
noxfile) but those listed in :data:`EXEMPT` with the reason: no string literal
that *is* a package axis, one of its distributions or modules (``"torch"``,
``"lightning.pytorch"``, ``"torch.cuda"``), and no import of such a module.
Prose may mention them (docstrings, comments, the words of a message, the
cases' own files): display strings are not the harness deciding anything.

The interpreter axis is checked by behaviour instead of by text (its name is
also the executable's, ``bin/python``): ``tests/test_plan.py`` renames it and
plans the same cells. The roles (which axes every cell installs, which one is
the device runtime) are ``every_cell`` and ``device_runtime`` in matrix.toml.

The report's modules and ``bugmatrix/cell/plugin.py`` belong to other work in
progress; they are checked here too, and a failure names the module and what
to use instead.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from tests.sourcescan import docstrings, rel

ROOT = Path(__file__).resolve().parent.parent
#: module -> why it may name an axis.
EXEMPT = {
    "bugmatrix/cell/checks.py": "the cases' own toolbox (imported by case modules only): it drives Lightning for framework variants",
    "bugmatrix/run/diskbudget.py": "names the wheels that fill uv's cache (torch, triton, nvidia-*): a disk heuristic about files",
    "bugmatrix/tools/benchmark/reports.py": "synthetic compat documents the benchmark times the report on",
}
HARNESS = sorted(p for p in [*(ROOT / "bugmatrix").rglob("*.py"), ROOT / "noxfile.py"] if str(p.relative_to(ROOT)) not in EXEMPT)


def _names() -> set[str]:
    """Package axes of the live matrix and of every matrix this project has had, with their distributions and modules."""
    axes = tomllib.loads((ROOT / "matrix.toml").read_text(encoding="utf-8"))["axes"]
    found = {"torch", "lightning", "transformers", "pytorch-lightning", "lightning.pytorch", "pytorch_lightning"}
    for name, table in axes.items():
        if table.get("distributions"):
            found |= {name, *table["distributions"], *table["distributions"].values()}
    return found


NAMES = _names()
ROOTS = {name.partition(".")[0] for name in NAMES}


def named_axes(source: str) -> list[tuple[int, str]]:
    """(line, what) for each literal that is an axis name, distribution or module, and each import of such a module."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            value = node.value.strip()
            head, _, rest = value.partition(".")
            if value in NAMES or (head in ROOTS and rest and all(part.isidentifier() for part in rest.split("."))):
                found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name.partition(".")[0] in ROOTS]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").partition(".")[0] in ROOTS:
            found.append((node.lineno, f"from {node.module} import ..."))
    return found


@pytest.mark.parametrize("path", HARNESS, ids=rel)
def test_no_harness_module_names_an_axis(path: Path) -> None:
    named = named_axes(path.read_text(encoding="utf-8"))
    hint = (
        "take axes from the matrix (Matrix.held_axes, .device_runtime, .interpreter; cell side: bugmatrix.cell.axes.device_runtime(), "
        "import_axis()) or the document (Compat.axis_names)"
    )
    assert not named, f"{rel(path)} names an axis at {named}; {hint}"


def test_the_check_can_fail() -> None:
    """Each kind of naming is found (a test that cannot fail is a defect); prose and docstrings are not."""
    assert named_axes('held = ("python", "torch")\n') == [(1, "'torch'")]
    assert named_axes("import torch\nfrom lightning.pytorch import Trainer\n") == [
        (1, "import torch"),
        (2, "from lightning.pytorch import ..."),
    ]
    assert named_axes('api = "torch.amp.GradScaler"\n') == [(1, "'torch.amp.GradScaler'")]
    assert named_axes('"""torch is an example."""\nmsg = f"needs {axis} (absent in torch {v})"\n') == []


def test_the_exemptions_still_need_it() -> None:
    """An exemption whose module no longer names an axis is stale: remove it from EXEMPT."""
    stale = [module for module in EXEMPT if not named_axes((ROOT / module).read_text(encoding="utf-8"))]
    assert not stale, f"no longer name an axis, drop them from EXEMPT: {stale}"
