"""The run file as the harness reads it: one model, checked on every read (the cell writes it with the standard library).
:class:`RunFile` decodes them into the cell's own records; a foreign file is one line naming the file and the bad value."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord, checked
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import digest_of, read_bytes, read_json

__all__ = [
    "InputKey",
    "Install",
    "Origin",
    "Result",
    "RunFile",
    "TrackedPin",
    "UnreadableRun",
    "load_run_dir",
    "load_run_file",
    "read_run_dir",
]


class Origin(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Who observed results: when, by which commit, in which run (a CI run's URL, or ``local <host>``)."""

    date: str
    commit: str
    run: str

    @property
    def text(self) -> str:
        """``2026-11-22T03:17:40+00:00, commit abc1234, https://github.com/…/runs/1/attempts/1``: what every view says of a reused result."""
        return f"{self.date}, commit {self.commit or '?'}, {self.run or 'run unknown'}"

    @property
    def day(self) -> str:
        return self.date[:10]


class TrackedPin(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A pin a profile asked for symbolically: ``latest`` resolved to ``2.15.0``."""

    requested: str
    resolved: str


class Install(msgspec.Struct, forbid_unknown_fields=True):
    """How the cell's environment build ended, with the resolver's reason when it failed."""

    status: Literal["ok", "failed"]
    reason: str = ""


class InputKey(msgspec.Struct, forbid_unknown_fields=True):
    """What the results depend on (bugmatrix/run/inputkey.py): a digest and the parts it was taken over."""

    digest: str
    parts: dict[str, Any]


#: A variant's kind as written: a Kind's value, or "" in a crash record of an older harness (the cell's reader reads it as
#: None; so does this one), so nights recorded before stay readable.
KindWord = Literal[("", *(k.value for k in Kind))]


class Result(msgspec.Struct, forbid_unknown_fields=True):
    """What one variant did in one cell (``bugmatrix.cell.runfile.VariantRecord``)."""

    id: str
    case: str
    variant: str
    device: str
    outcome: Outcome
    verdict: Verdict
    signature_matched: bool
    message: str
    duration_s: float
    kind: KindWord | None = None
    workaround_for: str | None = None
    expected: Outcome | None = None
    evidence: str = ""
    log: str = ""
    dtype: str = ""
    counterpart: str | None = None
    leaked: list[str] = []
    axes: list[str] | None = None
    pinned: str = ""


class RunFile(msgspec.Struct, forbid_unknown_fields=True):
    """One cell run, rewritten after every result (the format is described in :mod:`bugmatrix.cell.runfile`)."""

    schema: Literal["bugmatrix.run/1", "bugmatrix.run/2", "bugmatrix.run/3"]
    cell: str
    pins: dict[str, str]
    environment: dict[str, Any]
    started: str
    finished: str
    install: Install
    results: list[Result]
    axes: list[str] = []
    tracked: dict[str, TrackedPin] = {}
    selected: list[str] = []
    deselected_by: str = ""
    complete: bool | None = None  # absent in a version 1 file: the reader takes it from ``finished``
    running: list[str] = []
    input_key: InputKey | None = None
    origin: Origin | None = None
    reused_from: Origin | None = None


FIX = "re-run its cell"


def _record(document: RunFile, digest: str) -> RunRecord:
    plain = msgspec.to_builtins(document)  # the plain dicts a RunRecord holds
    plain["results"] = [msgspec.convert({**r, "kind": r["kind"] or None}, VariantRecord) for r in plain["results"]]  # checked above
    # A v1 file cannot say what it was asked to run; "finished" was its only completeness mark.
    plain["complete"] = bool(document.finished) if document.complete is None else document.complete
    return RunRecord(**plain, digest=digest)


def load_run_file(path: Path) -> RunRecord:
    """One run file, decoded by :class:`RunFile`, as the cell's records; any defect is one line naming the file (and the key)."""
    raw = read_bytes(path, "run file", fix=FIX)
    try:
        document = msgspec.json.decode(raw, type=RunFile)
    except msgspec.ValidationError as exc:
        msg = f"{path}: malformed run file ({exc}); {FIX}"
    except msgspec.DecodeError as exc:
        msg = f"{path}: not valid JSON ({exc}); the run file is truncated or corrupt, {FIX}"
    else:
        return checked(path, _record(document, digest_of(raw)))
    raise BugmatrixError(msg)


@dataclass(frozen=True)
class UnreadableRun:
    """A run file the reader refused (that cell's finding, not the night's end): why, and what is still well-formed."""

    cell: str
    why: str
    pins: dict[str, str] = field(default_factory=dict)
    selected: tuple[str, ...] = ()


def _salvage(path: Path, why: str) -> UnreadableRun:
    try:
        data = read_json(path, "run file")
    except BugmatrixError:
        data = None
    pins = data.get("pins") if isinstance(data, dict) else None
    selected = data.get("selected") if isinstance(data, dict) else None
    good_pins = isinstance(pins, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items())
    good_selected = isinstance(selected, list) and all(isinstance(v, str) for v in selected)
    return UnreadableRun(path.stem, why, dict(pins) if good_pins else {}, tuple(selected) if good_selected else ())  # type: ignore[arg-type]


def read_run_dir(directory: Path) -> tuple[list[RunRecord], list[UnreadableRun]]:
    """The run files of a directory that read, sorted by cell id, and those that did not; no directory is an error."""
    if not directory.is_dir():
        msg = f"{directory}: no run directory; run a cell first (nox -s system, or nox -t smoke)"
        raise BugmatrixError(msg)
    runs, unreadable = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            run = load_run_file(path)
        except BugmatrixError as exc:
            unreadable.append(_salvage(path, str(exc)))
            continue
        if run.cell != path.stem:
            msg = f"{path}: records cell {run.cell!r} but is named {path.stem!r}; its results would be filed under the wrong cell — re-run the cell or rename the file"
            unreadable.append(UnreadableRun(path.stem, msg))
            continue
        runs.append(run)
    return sorted(runs, key=lambda r: r.cell), unreadable


def load_run_dir(directory: Path) -> list[RunRecord]:
    """All run files of a directory, sorted by cell id; each file must be named after its cell, and any defect is an error."""
    runs, unreadable = read_run_dir(directory)
    if unreadable:
        raise BugmatrixError(unreadable[0].why)
    return runs
