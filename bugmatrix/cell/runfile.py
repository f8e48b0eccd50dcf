"""The run file: one JSON document per cell run (schema ``bugmatrix.run/3``), rewritten atomically after every result.

The harness reads it through :class:`bugmatrix.documents.run.RunFile`; the cell writes and re-reads it
(``--bugmatrix-resume``) with the standard library alone, here. Version 1 and 2 files still load; a defect is one line.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from enum import EnumMeta
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, get_args, get_origin, get_type_hints

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, digest_of, read_bytes

__all__ = ["ORIGIN_KEYS", "SCHEMA", "RunRecord", "VariantRecord", "checked", "load_run_file"]

SCHEMA = "bugmatrix.run/3"
OLD_SCHEMAS = ("bugmatrix.run/1", "bugmatrix.run/2")
#: The keys of an origin (``origin``, ``reused_from``): when, by which commit, in which run.
ORIGIN_KEYS = ("date", "commit", "run")


#: Each dataclass's field types, evaluated once (every result of a cell passes through here; the harness reads with msgspec).
_hints = functools.cache(get_type_hints)


@functools.cache
def _parts(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """A type's origin (itself where it has none) and arguments, worked out once per type."""
    return get_origin(hint) or hint, get_args(hint)


def _fits(hint: Any, value: Any) -> bool:
    """``value`` (parsed JSON) is of type ``hint``: a list for a list or tuple, an enum's value for the enum."""
    if hint is str or hint is bool:  # most fields, first: every result of a cell is checked here
        return isinstance(value, hint)
    kind, args = _parts(hint)
    if kind is UnionType:
        return any(_fits(arg, value) for arg in args)
    if kind is Any:
        return True
    if isinstance(kind, EnumMeta):
        return value in kind._value2member_map_
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind in (list, tuple):
        return isinstance(value, list) and all(_fits(args[0], item) for item in value)
    if kind is dict:
        return isinstance(value, dict) and all(_fits(args[0], k) and _fits(args[1], v) for k, v in value.items())
    return isinstance(value, kind)


def _said(hint: Any) -> str:
    """How a refusal names a type in JSON's terms: ``a list of str``, ``str or null``."""
    kind, args = _parts(hint)
    if kind is UnionType:
        return " or ".join(map(_said, args))
    if isinstance(kind, EnumMeta):
        return "one of " + ", ".join(member.value for member in kind)
    if kind in (list, tuple):
        return f"a list of {_said(args[0])}"
    if kind is dict:
        return f"an object of {_said(args[0])} -> {_said(args[1])}"
    return {str: "str", bool: "true or false", float: "a number", NoneType: "null"}.get(kind, "any")


def typed_fields(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields of dataclass ``cls`` that ``data`` holds, each checked against its annotation (a list made a tuple for a
    tuple, an enum's value its member); unknown keys are left out, a value of another type is a one-line ValueError."""
    hints, values = _hints(cls), {}
    for name in (f.name for f in fields(cls) if f.name in data):
        hint, value = hints[name], data[name]
        if not _fits(hint, value):
            msg = f"{where}{name}: {value!r} is not {_said(hint)}"
            raise ValueError(msg)
        values[name] = _as(hint, value)
    return values


def _as(hint: Any, value: Any) -> Any:
    """``value`` as a field of type ``hint`` holds it: a list as a tuple for a tuple, an enum's value as its member."""
    if hint is str or hint is bool:
        return value
    kind, args = _parts(hint)
    if value is None or kind is UnionType:  # ``X | None``: X is first
        return None if value is None else _as(args[0], value)
    if isinstance(kind, EnumMeta):
        return kind(value)
    return tuple(value) if kind is tuple else value


@dataclass(frozen=True)
class VariantRecord:
    """What one variant did in one cell."""

    id: str
    case: str
    variant: str
    device: str
    kind: Kind | None  # None only for a crash record of a variant the controller never saw
    workaround_for: str | None
    outcome: Outcome
    expected: Outcome | None
    verdict: Verdict
    signature_matched: bool
    message: str
    duration_s: float
    evidence: str = ""
    log: str = ""
    dtype: str = ""
    counterpart: str | None = None
    leaked: tuple[str, ...] = ()  # global state the variant changed and did not restore (restored by the harness)
    axes: tuple[str, ...] | None = None  # the axes the variant spans (None in older files: the cases' declarations)
    #: What its environment requires of an axis's own distribution (``transformers<=4.51.3``): a pin workaround.
    pinned: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VariantRecord:
        """Build from JSON; a field of another type, or an unknown outcome, verdict or kind, is a one-line ValueError."""
        # A corrupt file fails here, in one line, never later as a TypeError in a report (a dict `message` is unhashable).
        found = {**data, "kind": data.get("kind") or None, "expected": data.get("expected") or None}
        return cls(**typed_fields(cls, found, f"result {data.get('id')!r}: "))


@dataclass
class RunRecord:
    """Everything one cell run produced."""

    cell: str
    pins: dict[str, str]
    environment: dict[str, Any]
    started: str
    finished: str
    install: dict[str, str] = field(default_factory=lambda: {"status": "ok", "reason": ""})
    results: list[VariantRecord] = field(default_factory=list)
    axes: list[str] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    deselected_by: str = ""
    complete: bool = False
    tracked: dict[str, dict[str, str]] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    input_key: dict[str, Any] | None = None
    origin: dict[str, str] | None = None
    reused_from: dict[str, str] | None = None
    schema: str = SCHEMA
    #: ``sha256:<hex>`` of the bytes it was read from ("" when made in memory); never written.
    digest: str = field(default="", compare=False, repr=False)

    @property
    def observed(self) -> dict[str, str] | None:
        """Whose results these are: the run this file was reused from, else its own origin."""
        return self.reused_from or self.origin

    @property
    def wall_s(self) -> float | None:
        """Seconds from started to finished, or None when the timestamps cannot say (empty, malformed, naive vs aware)."""
        try:
            return (datetime.fromisoformat(self.finished) - datetime.fromisoformat(self.started)).total_seconds()
        except (TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        """Plain data, ready for json.dumps (which writes a tuple as a list)."""
        data = asdict(self)
        del data["digest"]
        return data


def load_run_file(path: Path) -> RunRecord:
    """The cell's own reader (the harness uses :func:`bugmatrix.documents.run.load_run_file`); a defect is one line."""
    raw = read_bytes(path, "run file", fix="re-run its cell")
    data = decode_json(raw, path, "run file", fix="re-run its cell")
    if not isinstance(data, dict):
        msg = f"{path}: a run file must be a JSON object; re-run its cell"
        raise BugmatrixError(msg)
    if data.get("schema") not in (SCHEMA, *OLD_SCHEMAS):
        msg = f"{path}: schema {data.get('schema')!r} is not {SCHEMA!r}; re-run its cell with this version of bugmatrix"
        raise BugmatrixError(msg)
    try:
        absent = [name for name in ("cell", "pins", "environment", "started", "finished", "install", "results") if name not in data]
        if absent:
            raise KeyError(absent[0])
        values = typed_fields(RunRecord, {**data, "results": [], "digest": digest_of(raw)}, "")
        values.pop("schema", None)
        if values["install"].get("status") not in ("ok", "failed"):
            msg = f"install.status {values['install'].get('status')!r} is neither 'ok' nor 'failed'"
            raise ValueError(msg)
        for key in ("origin", "reused_from"):
            if values.get(key) is not None and sorted(values[key]) != sorted(ORIGIN_KEYS):
                msg = f"{key}: {values[key]!r} is not an object of {', '.join(ORIGIN_KEYS)}"
                raise ValueError(msg)
            values[key] = {k: values[key][k] for k in ORIGIN_KEYS} if values.get(key) else None
        key = values.get("input_key")
        if key is not None and not (isinstance(key.get("digest"), str) and isinstance(key.get("parts"), dict)):
            msg = f"input_key: {key!r} is not an object of a digest (str) and parts (an object)"
            raise ValueError(msg)
        # A v1 file cannot say what it was asked to run; "finished" was its only completeness mark.
        values.setdefault("complete", bool(values["finished"]))
        run = RunRecord(**{**values, "results": [VariantRecord.from_dict(r) for r in data["results"]]})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        msg = f"{path}: malformed run file ({type(exc).__name__}: {exc}); re-run its cell"
        raise BugmatrixError(msg) from exc
    return checked(path, run)


def checked(path: Path, run: RunRecord) -> RunRecord:
    """``run`` when it records each variant once and, when it says complete, every selected one; else a one-line BugmatrixError."""
    results = run.results
    duplicated = [i for i, n in Counter(r.id for r in results).items() if n > 1]
    if duplicated:
        msg = f"{path}: variant {duplicated[0]!r} is recorded {Counter(r.id for r in results)[duplicated[0]]} times; a run file holds one result per variant, re-run its cell"
        raise BugmatrixError(msg)
    recorded = {r.id for r in results}
    missing = [s for s in run.selected if s not in recorded]
    if run.complete and missing:
        msg = f"{path}: says complete but records {len(run.selected) - len(missing)} of its {len(run.selected)} selected variants (first missing: {missing[0]}); the file is truncated or corrupt, re-run its cell"
        raise BugmatrixError(msg)
    return run
