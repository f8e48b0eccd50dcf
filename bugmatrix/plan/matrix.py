"""``matrix.toml``: read it, check it, and hand back the typed model (one import for every caller).

The model (axes, roles, profiles, rules: :mod:`bugmatrix.plan.matrix_model`) and the
file's rules (:mod:`bugmatrix.plan.matrix_check`) are modules of their own; this one
joins them, so the checker imports the model and nothing imports back.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.matrix_check import check_matrix
from bugmatrix.plan.matrix_model import (
    DEFAULT_REUSE_MAX_AGE_DAYS,
    SCHEMA,
    SYMBOLIC,
    Axis,
    BaseWhen,
    Constraint,
    Matrix,
    Rule,
)

__all__ = [
    "DEFAULT_REUSE_MAX_AGE_DAYS",
    "SCHEMA",
    "SYMBOLIC",
    "Axis",
    "BaseWhen",
    "Constraint",
    "Matrix",
    "Rule",
    "load_matrix",
    "parse_matrix",
]


def load_matrix(path: Path) -> Matrix:
    """Read and validate a matrix file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{path}: cannot read the matrix ({exc.strerror}); run from the repository root or pass --matrix"
        raise BugmatrixError(msg) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: not valid TOML ({exc}); fix the syntax at that line"
        raise BugmatrixError(msg) from exc
    return parse_matrix(data, path)


def parse_matrix(data: dict[str, Any], path: Path) -> Matrix:
    """Validate parsed TOML (the rules of the file format: :mod:`bugmatrix.plan.matrix_check`)."""
    return check_matrix(data, path)
