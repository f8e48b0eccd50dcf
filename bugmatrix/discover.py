"""Read the cases' declarations without importing them.

The planner runs in nox's own interpreter, which has no torch; importing a
case module there is impossible. Each case declares its variants' axes as
literals in ``@case.variant(axes=(...))``, so they are read with ``ast`` —
the case file stays the single source of truth.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.errors import BugmatrixError

__all__ = ["DeclaredVariant", "discover_variants", "projections"]

DEFAULT_AXES = ("torch",)
PACKAGE_AXES = ("torch", "lightning", "transformers")


@dataclass(frozen=True)
class DeclaredVariant:
    """What the planner needs of one variant: where it is and which axes it spans."""

    case: str
    name: str
    axes: tuple[str, ...]
    devices: tuple[str, ...]


def discover_variants(cases_dir: Path) -> list[DeclaredVariant]:
    """Every ``@case.variant`` in ``cases_dir/*.py`` (files starting with ``_`` are helpers)."""
    found: list[DeclaredVariant] = []
    for path in sorted(cases_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            msg = f"{path}:{exc.lineno}: syntax error in case module ({exc.msg}); fix it before planning"
            raise BugmatrixError(msg) from exc
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "variant":
                        found.append(_declared(path, node.name, deco))
    return found


def _declared(path: Path, name: str, call: ast.Call) -> DeclaredVariant:
    keywords = {k.arg: k.value for k in call.keywords}
    try:
        axes = tuple(ast.literal_eval(keywords["axes"])) if "axes" in keywords else DEFAULT_AXES
    except ValueError:
        msg = f"{path}: variant {name!r}: axes must be a literal tuple of axis names so the planner can read it"
        raise BugmatrixError(msg) from None
    unknown = (
        [a for a in axes if a not in PACKAGE_AXES]
        if isinstance(keywords.get("axes"), (ast.Tuple, ast.List)) or "axes" not in keywords
        else ["axes"]
    )
    if unknown:
        msg = (
            f"{path}: variant {name!r}: axes={ast.unparse(keywords['axes'])} names {unknown[0]!r}; use a tuple of {', '.join(PACKAGE_AXES)}"
        )
        raise BugmatrixError(msg)
    devices = tuple(
        "cuda" if "CUDA" in ast.unparse(element) or "cuda" in ast.unparse(element) else "cpu"
        for element in getattr(keywords.get("devices"), "elts", [])
    )
    return DeclaredVariant(case=path.stem, name=name, axes=axes, devices=devices)


def projections(variants: list[DeclaredVariant]) -> list[tuple[str, ...]]:
    """The distinct axis sets the cases span, in a stable order."""
    seen: dict[tuple[str, ...], None] = {}
    for variant in variants:
        seen.setdefault(tuple(sorted(variant.axes)), None)
    return list(seen)
