"""The controlling process's side of a cell run: what was selected, what is running, what was recorded.

One writer, pytest itself or the xdist controller, rewrites the run file atomically after every result, so whatever
ends the run, what was recorded stays and ``complete: false`` says the rest is missing. A variant run in that process
is named in ``running`` first: if the process dies there, ``--bugmatrix-resume`` records it ``crashed`` and goes on.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from bugmatrix.cell.cellend import DEADLINE_EXIT, RunFileLock, deadline_message
from bugmatrix.cell.cellspec import CellOptions
from bugmatrix.cell.descendants import kill_descendants
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Outcome, Verdict, excerpt, tail
from bugmatrix.cell.portable import Portable
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic

__all__ = [
    "PROPERTY",
    "Recorder",
    "RunState",
    "crash_record",
    "expire",
    "now",
    "record_from_report",
    "uncovered_results",
]

PROPERTY = "bugmatrix"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")  # datetime.UTC is 3.11+; cells run 3.10


def crash_record(variant_id: str, message: str, log: str = "", duration: float = 0.0, outcome: Outcome = Outcome.CRASHED) -> VariantRecord:
    """A ``crashed`` (or, at the cell deadline, ``timeout``) record for a variant known only by its id."""
    found = VariantId.parse(variant_id)
    return VariantRecord(
        id=variant_id,
        case=found.case,
        variant=found.name,
        device=found.device,
        kind=None,
        workaround_for=None,
        outcome=outcome,
        expected=None,
        verdict=Verdict.NEW_FAILURE_MODE,
        signature_matched=False,
        message=excerpt(message),
        duration_s=round(duration, 3),
        log=tail(log),
    )


def uncovered_results(records: Iterable[VariantRecord]) -> dict[str, list[str]]:
    """Per device (``CUDA``), one line per result no expectation covers (``new``): they pass, but not silently."""
    found: dict[str, list[str]] = {}
    for record in sorted(records, key=lambda r: r.id):
        if record.verdict is Verdict.NEW:
            message = f" ({record.message})" if record.outcome is not Outcome.FIXED and record.message else ""
            found.setdefault(record.device.upper(), []).append(f"{record.id} {record.outcome.value}{message}")
    return found


class RunState:
    """Per-session recording state; ``observe`` gives the environment at the first write, ``exclusive`` holds the lock."""

    def __init__(
        self, config: pytest.Config, options: CellOptions, observe: Callable[[], dict[str, Any]], *, exclusive: bool = True
    ) -> None:
        self.cell = options.cell
        output = os.environ.get("BUGMATRIX_REPORTS") or Path(config.rootpath, "build", "reports")
        run_file = Path(config.invocation_params.dir, options.run_file) if options.run_file else None
        self.path = run_file or Path(output, "runs", f"{self.cell}.json")
        self.lock = RunFileLock(self.path)  # taken before a resume reads the file
        if exclusive:
            self.lock.acquire(lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
        self.writing = threading.Lock()  # the cell deadline's thread writes the last version, and nothing after it
        #: What a worker xdist reports crashed left running (the WorkerWatch): named on its crash record.
        self.leaked_by: Callable[[pytest.TestReport], tuple[str, ...]] = lambda report: ()
        self.pins = dict(options.pins)
        self.tracked = {axis: {"requested": r, "resolved": self.pins.get(axis, "")} for axis, r in options.requested.items()}
        keyword, marks = config.getoption("keyword", ""), config.getoption("markexpr", "")
        self.deselected_by = " ".join(p for p in (f"-k {keyword}" if keyword else "", f"-m {marks}" if marks else "") if p)
        self.started = now()
        self.results: dict[str, VariantRecord] = {}
        self.previous: dict[str, VariantRecord] = {}
        self.recovered: set[str] = set()  # ids found running in a dead process: recorded crashed by this resume
        self.selected: set[str] = set()
        self.collected = False  # what runs is known (collected here, or reported by an xdist worker)
        self.running: set[str] = set()
        self.environment: dict[str, Any] | None = None
        self.observe = observe
        self.input_key, self.origin = options.input_key, options.origin
        #: The checkout is where pytest started, not its rootdir (which walks up to any enclosing pyproject.toml).
        self.portable = Portable.here(str(config.invocation_params.dir))
        if config.getoption("--bugmatrix-resume") and self.path.exists():
            try:
                earlier = load_run_file(self.path)
            except BugmatrixError as exc:
                raise pytest.UsageError(str(exc)) from None
            self.previous = {r.id: r for r in earlier.results}
            for variant_id in earlier.running:
                if variant_id not in self.previous:
                    self.previous[variant_id] = crash_record(variant_id, DIED_INLINE)
                    self.recovered.add(variant_id)

    def start(self, variant_id: str) -> None:
        """The variant is about to run in this process: say so in the run file first."""
        with self.writing:
            self.running.add(variant_id)
            self.write_unlocked(finished="")

    def add(self, *records: VariantRecord) -> None:
        """Record results and rewrite the run file once; nothing after the cell deadline's last write."""
        with self.writing:
            for record in records:
                record = dataclasses.replace(record, message=self.portable.text(record.message), log=self.portable.text(record.log))
                self.results[record.id] = record
                self.running.discard(record.id)
            if records:
                self.write_unlocked(finished="")

    def write(self, finished: str) -> None:
        """Rewrite the run file (``finished``: when the session ended, "" while it runs)."""
        with self.writing:
            self.write_unlocked(finished)

    def close_unlocked(self) -> None:
        """The last write, by whoever holds :attr:`writing` (the cell deadline): finished now, nothing running."""
        self.running.clear()
        self.write_unlocked(finished=now())

    def write_unlocked(self, finished: str) -> None:
        if self.environment is None:
            observed = self.observe()
            where = {"executable": self.portable.text(str(observed["executable"]))} if observed.get("executable") else {}
            self.environment = {**observed, **where}
        merged = {**self.previous, **self.results}
        run = RunRecord(
            cell=self.cell,
            pins=self.pins,
            axes=list(self.pins),
            tracked=self.tracked,
            environment=self.environment,
            started=self.started,
            finished=finished,
            results=[merged[k] for k in sorted(merged)],
            selected=sorted(self.selected | set(self.previous)),
            deselected_by=self.deselected_by,
            complete=bool(finished) and self.collected and self.selected <= set(merged),
            running=sorted(self.running),
            input_key=self.input_key,
            origin=self.origin,
        )
        write_json_atomic(self.path, run.to_json())


def expire(state: RunState, seconds: float, record_for: Callable[[str, str], VariantRecord], say: Callable[[str], None]) -> None:
    """The cell deadline passed: kill what runs, record the unfinished as ``timeout``, write the run file complete, exit.

    Holds the run state's lock to the end: no other thread records anything after this.
    """
    state.writing.acquire()
    missing = sorted(state.selected - set(state.results) - set(state.previous))
    killed = kill_descendants(when="when the cell deadline passed")
    message = deadline_message(seconds)
    if not state.collected:  # xdist's workers had not said what they collected: nothing to name, and not complete
        said = "before its variants were collected: the run file is not complete"
    else:
        said = f"{len(missing)} unfinished variant(s) recorded as timeout in {state.path}"
    for variant_id in missing:
        state.results[variant_id] = record_for(variant_id, message)
    state.close_unlocked()
    names = f"; killed {len(killed)} process(es): " + "; ".join(killed) if killed else ""
    say(f"bugmatrix: the cell deadline ({seconds:g}s) passed {said}{names}")
    os._exit(DEADLINE_EXIT)


#: Said on a variant that was running in the cell process when that process died (found by --bugmatrix-resume).
DIED_INLINE = (
    "the cell process died while running this variant in-process (--bugmatrix-forks 0); --bugmatrix-resume recorded it as "
    "crashed and went on past it. Its exit code or signal was not seen (the fork runner, the default, records it)"
)


def record_from_report(report: pytest.TestReport) -> VariantRecord | None:
    """The variant record carried by a report, or a ``crashed`` one for a dead xdist worker."""
    for name, value in report.user_properties:
        if name == PROPERTY:
            return VariantRecord.from_dict(value)
    found = VariantId.from_node(report.nodeid)
    if found is None or not report.failed:
        return None
    # No record but a failure: an xdist worker died running it, or the harness itself broke.
    text = str(report.longrepr) if report.longrepr else "no report"
    return crash_record(str(found), text.splitlines()[-1] if text.strip() else text, text, report.duration)


class Recorder:
    """Controller-side hooks bound to one config (so they can reach the state)."""

    def __init__(self, config: pytest.Config, state_key: pytest.StashKey[RunState]) -> None:
        self.config = config
        self.key = state_key

    def _select(self, nodeids: list[str]) -> None:
        state = self.config.stash.get(self.key, None)
        if state is not None:
            state.selected |= {str(v) for v in map(VariantId.from_node, nodeids) if v}
            state.collected = True

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._select([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._select(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.config.stash.get(self.key, None)
        # "call" carries the record; a failed setup/teardown or a dead xdist worker's report carries none -> crashed.
        if state is None or not (report.when == "call" or report.failed):
            return
        record = record_from_report(report)
        if record is not None and not report.user_properties and record.outcome is Outcome.CRASHED:
            record = dataclasses.replace(record, leaked=(*record.leaked, *state.leaked_by(report)))
        if record is not None and record.id not in state.results:
            state.add(record)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.config.stash.get(self.key, None)
        if state is None:
            return
        # Listing variants (--collect-only) runs nothing and records nothing.
        if not self.config.option.collectonly and (state.results or state.previous or state.selected):
            state.running.clear()  # a variant still named here was interrupted with the session, not crashed
            state.write(finished=now())
        state.lock.release()
