"""The run file: one JSON document per cell run, written once, atomically.

Schema ``bugmatrix.run/1`` (the only place it is written down)::

    {
      "schema": "bugmatrix.run/1",
      "cell": "torch2.4.1",                 # cell id, or "system"
      "pins": {"torch": "2.4.1"},           # as requested by the plan
      "install": {"status": "ok" | "failed", "reason": "..."},
      "environment": {"python": ..., "torch": ..., "cuda": ..., "gpu": ...,
                      "lightning": ..., "lightning_package": ..., "transformers": ...,
                      "platform": ...},     # as observed inside the cell
      "started": ISO-8601, "finished": ISO-8601,
      "results": [VariantRecord, ...]
    }

Writes go to a temporary file in the same directory and are moved into place
with ``os.replace``, so an interrupted run leaves the previous file intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.outcomes import Outcome, Verdict

__all__ = ["SCHEMA", "RunRecord", "VariantRecord", "load_run_dir", "load_run_file", "write_json_atomic", "write_text_atomic"]

SCHEMA = "bugmatrix.run/1"


@dataclass(frozen=True)
class VariantRecord:
    """What one variant did in one cell."""

    id: str
    case: str
    variant: str
    device: str
    kind: str
    workaround_for: str | None
    outcome: str
    expected: str | None
    verdict: str
    signature_matched: bool
    message: str
    duration_s: float
    evidence: str = ""
    log: str = ""
    counterpart: str | None = None  # an upstream variant's own-case counterpart (absent in older run files)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VariantRecord:
        """Build from JSON, rejecting unknown outcomes (a corrupt or foreign file)."""
        Outcome(data["outcome"])
        Verdict(data["verdict"])
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


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
    schema: str = SCHEMA

    def to_json(self) -> dict[str, Any]:
        """Plain data, ready for json.dumps."""
        data = asdict(self)
        data["results"] = [asdict(r) for r in self.results]
        return data


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers only ever see the old or the new complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from a web server or a CI artifact reader
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomic JSON (sorted keys, stable diffs)."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def load_run_file(path: Path) -> RunRecord:
    """Read and validate one run file; any defect is a one-line BugmatrixError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read run file ({exc}); re-run its cell"
        raise BugmatrixError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON (line {exc.lineno}: {exc.msg}); the file is truncated or corrupt, re-run its cell"
        raise BugmatrixError(msg) from exc
    if not isinstance(data, dict):
        msg = f"{path}: a run file must be a JSON object; re-run its cell"
        raise BugmatrixError(msg)
    schema = data.get("schema")
    if schema != SCHEMA:
        msg = f"{path}: schema {schema!r} is not {SCHEMA!r}; re-run its cell with this version of bugmatrix"
        raise BugmatrixError(msg)
    try:
        if data["install"].get("status") not in ("ok", "failed"):
            msg = f"install.status {data['install'].get('status')!r} is neither 'ok' nor 'failed'"
            raise ValueError(msg)
        results = [VariantRecord.from_dict(r) for r in data["results"]]
        return RunRecord(
            cell=str(data["cell"]),
            pins=dict(data["pins"]),
            environment=dict(data["environment"]),
            started=str(data["started"]),
            finished=str(data["finished"]),
            install=dict(data["install"]),
            results=results,
        )
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"{path}: malformed run file ({type(exc).__name__}: {exc}); re-run its cell"
        raise BugmatrixError(msg) from exc


def load_run_dir(directory: Path) -> list[RunRecord]:
    """All run files of a directory, sorted by cell id."""
    if not directory.is_dir():
        msg = f"{directory}: no run directory; run a cell first (nox -s system, or nox -t smoke)"
        raise BugmatrixError(msg)
    runs = [load_run_file(p) for p in sorted(directory.glob("*.json"))]
    return sorted(runs, key=lambda r: r.cell)
