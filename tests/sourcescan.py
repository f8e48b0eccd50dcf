"""Shared by the tests that read the harness's own source for names it must not contain (no axis named in code)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rel(path: Path) -> str:
    """The path as the repository names it (the test ids and failure messages)."""
    return str(path.relative_to(ROOT))


def docstrings(tree: ast.AST) -> set[int]:
    """``id()`` of every docstring constant in ``tree``: prose may name an axis, code may not."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found
