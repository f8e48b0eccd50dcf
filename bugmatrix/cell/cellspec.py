"""The one file a cell's pytest is handed: which cell, where it records, and what it records with its results.

Why a file: the input key (about 25 file hashes), the axis spec, the pins, the
case environment and the run's origin used to be options of the pytest
command, and nox logs that command: about 5 KB a cell. The runner
(:mod:`bugmatrix.run.command`) writes them here, under the cell's build
output, and passes one short option, ``--bugmatrix-spec FILE``. The run file
still records the whole input key. Relative paths (the file's own, and
``run_file`` / ``junit`` in it) are relative to the directory pytest starts
in: the repository root, where every caller of the runner starts it.

Read with the standard library only: a cell runs any Python the matrix lists, 3.10 and up.
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
    """What the plugin needs to know about the cell it runs; the defaults are a plain ``python -m pytest cases/`` (the system cell).

    ``pins``: the requested pins in display order; ``requested``: axis -> ``latest``/``latest-pre`` for the
    pins a profile's ``latest`` chose; ``axes``: only variants whose axes are all among these run (None: all);
    ``environment``: the case environment the cell was built with (``bugmatrix.cell.caseenv.Env``, as JSON: only
    variants declaring that environment run); ``variants``: the planned variant ids, exactly what runs (None: what
    ``axes`` and ``environment`` admit);
    ``axis_spec``: axis -> providers and the device runtime (None: read ``matrix.toml``); ``input_key`` and
    ``origin``: recorded in the run file as given; ``cell_deadline_s``: ``[harness] cell_deadline_s``, the whole
    cell's deadline (None: none).
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
