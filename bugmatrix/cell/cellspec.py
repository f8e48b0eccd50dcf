"""The one file a cell's pytest is handed (``--bugmatrix-spec FILE``): which cell, where it records, and what with.

Written by :mod:`bugmatrix.run.command` (as options it would put about 5 KB on each logged command line); relative
paths in it are from where pytest starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bugmatrix.cell.runfile import typed_fields
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json

__all__ = ["SCHEMA", "CellOptions", "read_options"]

SCHEMA = "bugmatrix.cellspec/1"


@dataclass(frozen=True)
class CellOptions:
    """What the plugin needs to know about its cell; the defaults are a plain ``python -m pytest cases/`` (system).

    ``variants``: exactly what runs (None: what ``axes`` and ``environment``, the case ``Env`` it was built with, admit).
    """

    cell: str = "system"
    run_file: str | None = None
    junit: str | None = None
    pins: dict[str, str] = field(default_factory=dict)
    requested: dict[str, str] = field(default_factory=dict)
    axes: tuple[str, ...] | None = None
    environment: dict[str, Any] | None = None
    variants: tuple[str, ...] | None = None
    axis_spec: dict[str, Any] | None = None
    input_key: dict[str, Any] | None = None
    origin: dict[str, Any] | None = None
    cell_deadline_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The file's content: the schema, then every field that is set."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"schema": SCHEMA, **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if v not in (None, {}, ())}}


def read_options(path: Path) -> CellOptions:
    """Read a spec file; anything unreadable or malformed is one line naming the file and the key."""
    fix = "it is written by bugmatrix.run.command for each run; run the cell through nox (or the runner) again"
    try:
        data = read_json(path, "cell spec", fix=fix)
    except BugmatrixError as exc:
        msg = f"--bugmatrix-spec {exc}"
        raise BugmatrixError(msg) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        msg = f"--bugmatrix-spec {path}: schema {schema!r} is not {SCHEMA!r}; {fix}"
        raise BugmatrixError(msg)
    unknown = [key for key in data if key != "schema" and key not in {f.name for f in fields(CellOptions)}]
    try:
        if unknown:
            msg = f"{unknown[0]}: unknown key"
            raise ValueError(msg)
        options = CellOptions(**typed_fields(CellOptions, data, ""))
        for name, table in (("pins", options.pins), ("requested", options.requested)):
            if not all(table) or not all(table.values()):
                msg = f"{name}: {table!r} names an empty axis or version"
                raise ValueError(msg)
    except ValueError as exc:
        msg = f"--bugmatrix-spec {path}: {exc}; {fix}"
        raise BugmatrixError(msg) from None
    return options
