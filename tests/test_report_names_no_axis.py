"""No axis is named in the report's code (issue 24 item 3, report side): axes, their order, short names and the interpreter come from the document.

Checked on the source: no string in the report modules, the new-release
notes or the page templates names an axis of the matrix, docstrings and
comments aside (they may use torch as an example) and command lines
(``python -m bugmatrix ...``) aside.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.sourcescan import docstrings, rel

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted((ROOT / "bugmatrix" / "report").glob("*.py"))  # new_releases.py (the release notes) included
TEMPLATES = sorted((ROOT / "bugmatrix" / "report" / "templates").glob("*.j2"))
#: The axes of the real matrix, and those any matrix of this project has had: an axis must not creep back in by name.
AXES = sorted(
    set(tomllib.loads((ROOT / "matrix.toml").read_text(encoding="utf-8"))["axes"]) | {"python", "torch", "lightning", "transformers"}
)
NAMED = re.compile(r"\b(" + "|".join(map(re.escape, AXES)) + r")\b")
COMMAND = re.compile(r"python -m bugmatrix")


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_no_string_in_the_report_code_names_an_axis(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = docstrings(tree)
    named = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
        and NAMED.search(COMMAND.sub("", node.value))
    ]  # fmt: skip
    assert not named, f"{rel(path)} names an axis; take it from the document (Compat.axis_names, .interpreter, .short): {named}"


@pytest.mark.parametrize("path", TEMPLATES, ids=rel)
def test_no_template_names_an_axis(path: Path) -> None:
    text = re.sub(r"\{#.*?#\}", "", path.read_text(encoding="utf-8"), flags=re.S)  # Jinja comments may explain with an example
    named = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if NAMED.search(line)]
    assert not named, f"{rel(path)} names an axis; the view model gets the document's axes: {named}"


def test_the_check_can_fail() -> None:
    """The pattern finds an axis where one is named (a test that cannot fail is a defect)."""
    assert NAMED.search('observed = env["torch"]') and not NAMED.search(COMMAND.sub("", "run: python -m bugmatrix plan"))
