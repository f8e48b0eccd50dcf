"""The run file: one JSON document per cell run (schema ``bugmatrix.run/3``), rewritten atomically after every result.

The harness reads it through :class:`bugmatrix.documents.run.RunFile`; the cell writes and re-reads it
(``--bugmatrix-resume``) with the standard library alone, here. Version 1 and 2 files still load; a defect is one line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, digest_of, read_bytes

__all__ = ["ORIGIN_KEYS", "SCHEMA", "RunRecord", "VariantRecord", "checked", "load_run_file"]

SCHEMA = "bugmatrix.run/3"
OLD_SCHEMAS = ("bugmatrix.run/1", "bugmatrix.run/2")
#: The keys of an origin (``origin``, ``reused_from``): when, by which commit, in which run.
ORIGIN_KEYS = ("date", "commit", "run")


#: A result's fields that hold text; anything else there is a corrupt file.
_TEXT_FIELDS = ("id", "case", "variant", "device", "message", "evidence", "log", "dtype", "pinned")


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
        """Build from JSON; unknown outcomes, verdicts or kinds are errors (a corrupt or foreign file)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        # A corrupt file fails here, in one line, never later as a TypeError in a report (a dict `message` is unhashable).
        for name in _TEXT_FIELDS:
            if not isinstance(values.get(name, ""), str):
                msg = f"result {data.get('id')!r}: {name} must be a string, not {type(values[name]).__name__}"
                raise TypeError(msg)
        if not isinstance(values.get("signature_matched"), bool):
            msg = f"result {data.get('id')!r}: signature_matched must be true or false"
            raise TypeError(msg)
        if isinstance(values.get("duration_s"), bool) or not isinstance(values.get("duration_s"), int | float):
            msg = f"result {data.get('id')!r}: duration_s must be a number"
            raise TypeError(msg)
        for name in ("workaround_for", "counterpart"):
            if values.get(name) is not None and not isinstance(values[name], str):
                msg = f"result {data.get('id')!r}: {name} must be a string or null"
                raise TypeError(msg)
        if not isinstance(data.get("leaked") or [], list) or not all(isinstance(x, str) for x in data.get("leaked") or []):
            msg = f"result {data.get('id')!r}: leaked must be a list of strings"
            raise TypeError(msg)
        values["outcome"] = Outcome(data["outcome"])
        values["verdict"] = Verdict(data["verdict"])
        values["expected"] = Outcome(data["expected"]) if data.get("expected") else None
        values["kind"] = Kind(data["kind"]) if data.get("kind") else None
        values["leaked"] = tuple(data.get("leaked") or ())
        axes = data.get("axes")
        if axes is not None and (not isinstance(axes, list) or not all(isinstance(a, str) for a in axes)):
            msg = f"variant {data.get('id')!r}: axes must be a list of axis names"
            raise ValueError(msg)
        values["axes"] = tuple(axes) if axes is not None else None
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["leaked"] = list(self.leaked)
        data["axes"] = list(self.axes) if self.axes is not None else None
        return data


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
        """Plain data, ready for json.dumps."""
        data = asdict(self)
        data["results"] = [r.to_json() for r in self.results]
        del data["digest"]
        return data


def _read(path: Path) -> tuple[dict[str, Any], str]:
    """The file's document and the digest of its bytes (what the history records, and reuse checks)."""
    raw = read_bytes(path, "run file", fix="re-run its cell")
    data = decode_json(raw, path, "run file", fix="re-run its cell")
    if not isinstance(data, dict):
        msg = f"{path}: a run file must be a JSON object; re-run its cell"
        raise BugmatrixError(msg)
    schema = data.get("schema")
    if schema not in (SCHEMA, *OLD_SCHEMAS):
        msg = f"{path}: schema {schema!r} is not {SCHEMA!r}; re-run its cell with this version of bugmatrix"
        raise BugmatrixError(msg)
    return data, digest_of(raw)


def _origin(value: Any, key: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or any(not isinstance(value.get(k), str) for k in ORIGIN_KEYS):
        msg = f"{key} must be an object with string {', '.join(ORIGIN_KEYS)}"
        raise ValueError(msg)
    return {k: value[k] for k in ORIGIN_KEYS}


def _input_key(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("digest"), str) or not isinstance(value.get("parts"), dict):
        msg = "input_key must be an object with a string digest and an object of parts"
        raise ValueError(msg)
    return {"digest": value["digest"], "parts": dict(value["parts"])}


def load_run_file(path: Path) -> RunRecord:
    """The cell's own reader (the harness uses :func:`bugmatrix.documents.run.load_run_file`); a defect is one line."""
    data, digest = _read(path)
    try:
        if data["install"].get("status") not in ("ok", "failed"):
            msg = f"install.status {data['install'].get('status')!r} is neither 'ok' nor 'failed'"
            raise ValueError(msg)
        results = [VariantRecord.from_dict(r) for r in data["results"]]
        run = RunRecord(
            cell=str(data["cell"]),
            pins={str(k): str(v) for k, v in dict(data["pins"]).items()},
            environment=dict(data["environment"]),
            started=str(data["started"]),
            finished=str(data["finished"]),
            install=dict(data["install"]),
            results=results,
            axes=[str(a) for a in data.get("axes", [])],
            selected=[str(s) for s in data.get("selected", [])],
            deselected_by=str(data.get("deselected_by", "")),
            tracked={str(a): {str(k): str(v) for k, v in dict(t).items()} for a, t in dict(data.get("tracked") or {}).items()},
            # A v1 file cannot say what it was asked to run; "finished" was its only completeness mark.
            complete=bool(data["complete"]) if "complete" in data else bool(data["finished"]),
            running=[str(r) for r in data.get("running") or []],
            input_key=_input_key(data.get("input_key")),
            origin=_origin(data.get("origin"), "origin"),
            reused_from=_origin(data.get("reused_from"), "reused_from"),
            digest=digest,
        )
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
