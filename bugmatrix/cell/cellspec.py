"""The one file a cell's pytest is handed (``--bugmatrix-spec FILE``): which cell, where it records, and what with.

Options would put about 5 KB on each logged command line. The runner (:mod:`bugmatrix.run.command`) writes it; relative
paths in it are from where pytest starts (the repository root). Read with the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json

__all__ = ["SCHEMA", "CellOptions", "read_options"]

SCHEMA = "bugmatrix.cellspec/1"


@dataclass(frozen=True)
class CellOptions:
    """What the plugin needs to know about its cell; the defaults are a plain ``python -m pytest cases/`` (system).

    ``requested``: axis -> ``latest``/``latest-pre``; ``axes``: only variants spanning these run; ``environment``: the
    case ``Env`` (as JSON) the cell was built with; ``variants``: exactly what runs (None: what those admit).
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


#: field -> (the JSON type it must have, how to say it): what a hand-edited or truncated file is checked against.
_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "cell": (str, "a cell id"),
    "run_file": (str, "a path"),
    "junit": (str, "a path"),
    "pins": (dict, "an object of axis -> version"),
    "requested": (dict, "an object of axis -> latest"),
    "axes": (list, "a list of axis names"),
    "environment": (dict, "an environment object"),
    "variants": (list, "a list of variant ids"),
    "axis_spec": (dict, "an axis spec object"),
    "input_key": (dict, "an input key object"),
    "origin": (dict, "an object"),
    "cell_deadline_s": ((int, float), "a number of seconds"),
}


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
        if (
            key not in _TYPES
            or not isinstance(value, wanted)
            or isinstance(value, bool)
            or (wanted is dict and key in ("pins", "requested") and not _strings(value))
        ):
            problem = "unknown key" if key not in _TYPES else f"{value!r} is not {said}"
            msg = f"--bugmatrix-spec {path}: {key}: {problem}; {fix}"
            raise BugmatrixError(msg)
    for key in ("axes", "variants"):
        if key in values:
            values[key] = tuple(values[key])
    return CellOptions(**values)


def _strings(table: dict[str, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in table.items())
