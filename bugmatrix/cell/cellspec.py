"""The one file a cell's pytest is handed (``--bugmatrix-spec FILE``): which cell, where it records, and what with.

Written by :mod:`bugmatrix.run.command` (as options it would put about 5 KB on each logged command line); relative
paths in it are from where pytest starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, get_args, get_origin, get_type_hints

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json

__all__ = ["SCHEMA", "CellOptions", "read_options"]

SCHEMA = "bugmatrix.cellspec/1"


@dataclass(frozen=True)
class CellOptions:
    """What the plugin needs to know about its cell; the defaults are a plain ``python -m pytest cases/`` (system).

    ``variants``: exactly what runs (None: what ``axes`` and ``environment``, the case ``Env`` it was built with, admit).
    """

    # Each field's ``said``: what a spec file's value must be, as its one-line refusal says it.
    cell: str = field(default="system", metadata={"said": "a cell id"})
    run_file: str | None = field(default=None, metadata={"said": "a path"})
    junit: str | None = field(default=None, metadata={"said": "a path"})
    pins: dict[str, str] = field(default_factory=dict, metadata={"said": "an object of axis -> version"})
    requested: dict[str, str] = field(default_factory=dict, metadata={"said": "an object of axis -> latest"})
    axes: tuple[str, ...] | None = field(default=None, metadata={"said": "a list of axis names"})
    environment: dict[str, Any] | None = field(default=None, metadata={"said": "an environment object"})
    variants: tuple[str, ...] | None = field(default=None, metadata={"said": "a list of variant ids"})
    axis_spec: dict[str, Any] | None = field(default=None, metadata={"said": "an axis spec object"})
    input_key: dict[str, Any] | None = field(default=None, metadata={"said": "an input key object"})
    origin: dict[str, Any] | None = field(default=None, metadata={"said": "an object"})
    cell_deadline_s: float | None = field(default=None, metadata={"said": "a number of seconds"})

    def to_json(self) -> dict[str, Any]:
        """The file's content: the schema, then every field that is set."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"schema": SCHEMA, **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if v not in (None, {}, ())}}


def _json_type(hint: Any) -> tuple[type, ...]:
    """The JSON types a field's value may have: a tuple is a list in JSON, a float may be an integer (null is never written)."""
    kind = get_origin(hint) or hint
    if kind is UnionType:
        return _json_type(next(t for t in get_args(hint) if t is not NoneType))
    return {tuple: (list,), float: (int, float)}.get(kind, (kind,))


_HINTS = get_type_hints(CellOptions)
#: field -> (its JSON types, how a refusal says it): what a hand-edited or truncated file is checked against.
_TYPES = {f.name: (_json_type(_HINTS[f.name]), f.metadata["said"]) for f in fields(CellOptions)}
#: The tables of text (axis -> version): each key and value a non-empty string.
_TABLES = frozenset(name for name, hint in _HINTS.items() if hint == dict[str, str])


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
    values = {k: v for k, v in data.items() if k != "schema"}
    for key, value in values.items():
        wanted, said = _TYPES.get(key, (type(None), ""))
        if key not in _TYPES or not isinstance(value, wanted) or isinstance(value, bool) or (key in _TABLES and not _strings(value)):
            problem = "unknown key" if key not in _TYPES else f"{value!r} is not {said}"
            msg = f"--bugmatrix-spec {path}: {key}: {problem}; {fix}"
            raise BugmatrixError(msg)
    return CellOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})  # lists: the tuple fields


def _strings(table: dict[str, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in table.items())
