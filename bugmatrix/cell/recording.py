"""The controlling process's side of a cell run: the run file, its lock, the cell deadline, xdist's dead workers.

One writer (pytest, or xdist's controller) holds the run file's ``flock`` for the whole cell and rewrites it atomically
after every result: whatever ends the run, what was recorded stays and ``complete: false`` says the rest is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import os
import re
import selectors
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from bugmatrix.cell.cellspec import CellOptions
from bugmatrix.cell.descendants import kill_descendants
from bugmatrix.cell.forkrun import pidfd
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Outcome, Verdict, excerpt, tail
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.files import write_json_atomic

__all__ = [
    "PROPERTY",
    "CellDeadline",
    "Portable",
    "RunState",
    "WorkerWatch",
    "crash_record",
    "deadline_message",
    "expire",
    "import_roots",
    "uncovered_results",
]


#: The head of a log :func:`~bugmatrix.cell.outcomes.tail` cut: what follows may start in the middle of a path.
_CUT = re.compile(r"\[[\d,]+ characters cut\] … ")


def import_roots(path: Iterable[str] | None = None) -> tuple[str, ...]:
    """The directories of ``sys.path`` (or ``path``) that hold installed distributions (a ``*.dist-info`` inside)."""
    roots = []
    for entry in sys.path if path is None else path:
        with contextlib.suppress(OSError):  # a zip file, a missing directory
            if entry and any(name.endswith(".dist-info") for name in os.listdir(entry)):
                roots.append(entry)
    return tuple(roots)


@dataclasses.dataclass(frozen=True)
class Portable:
    """Removes one machine's path prefixes from recorded text: the checkout's, and each import root's."""

    #: Every prefix to remove, with its trailing separator, the longest first.
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, checkout: str, roots: Iterable[str] = ()) -> Portable:
        """``checkout`` -> relative, each of ``roots`` -> from the package on (each as written and resolved)."""
        found = {
            form.rstrip(os.sep) + os.sep
            for directory in (checkout, *roots)
            for form in (directory, os.path.realpath(directory))
            if form.rstrip(os.sep)
        }
        return cls(tuple(sorted(found, key=len, reverse=True)))

    def text(self, text: str) -> str:
        """``text`` with each prefix removed wherever it starts a path, and the piece of one a cut log begins with."""
        for prefix in self.prefixes:
            if prefix in text:
                text = text.replace(prefix, "")
        cut = _CUT.match(text)
        if cut:
            rest = text[cut.end() :]
            piece = next((p[k:] for p in self.prefixes for k in range(1, len(p) - 1) if rest.startswith(p[k:])), "")
            text = text[: cut.end()] + rest[len(piece) :]
        return text


def deadline_message(seconds: float) -> str:
    """What an unfinished variant's ``timeout`` record says."""
    return (
        f"the cell deadline ({seconds:g}s, [harness] cell_deadline_s) passed before this variant finished: "
        "everything the cell still ran was killed"
    )


class RunFileLock:
    """An exclusive ``flock`` on ``.<run file>.lock``, held for the whole cell; the kernel drops it when its holder dies."""

    def __init__(self, run_file: Path) -> None:
        self.run_file = run_file
        self.path = run_file.with_name(f".{run_file.name}.lock")
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; when another process holds it, say so on stderr and wait until it ends."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        said = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                    sys.stderr.write(
                        f"bugmatrix: another pytest (pid {holder}) is writing {self.run_file}; waiting for it to end (lock {self.path})\n"
                    )
                    sys.stderr.flush()
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:  # not a file its last holder removed as we waited on it
                    break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        """Remove the lock file and let go (a waiting process then takes a fresh one)."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self.fd)
        self.fd = None


class CellDeadline(threading.Thread):
    """A daemon thread that calls ``on_expiry`` once ``seconds`` have passed, unless cancelled (never in a process that forks)."""

    def __init__(self, seconds: float, on_expiry: Callable[[], None]) -> None:
        super().__init__(name="bugmatrix-cell-deadline", daemon=True)
        self.seconds, self._on_expiry = seconds, on_expiry
        self._cancelled = threading.Event()
        self._decided = threading.Lock()  # held while it fires: cancelled or fired, never both

    def cancel(self) -> None:
        """The session ends on its own; if the deadline fired first, wait for it (it ends the process: no half-written end)."""
        with self._decided:
            self._cancelled.set()

    def run(self) -> None:
        if self._cancelled.wait(self.seconds):
            return
        with self._decided:
            if not self._cancelled.is_set():
                self._on_expiry()


class WorkerWatch:
    """xdist's controller (a subreaper) and its plugin: when a worker ends, kill and reap what it left and keep their names."""

    def __init__(self) -> None:
        self.workers: set[int] = set()
        self._leaked: dict[int, tuple[str, ...]] = {}
        self._ended: dict[int, threading.Event] = {}
        self._selector = selectors.DefaultSelector()
        self._thread: threading.Thread | None = None

    def add(self, pid: int) -> None:
        """Watch a worker; the thread starts with the first."""
        fd = pidfd(pid)
        if fd is None:
            return  # no pidfd (not Linux 5.3+): xdist alone, as before
        self.workers.add(pid)
        self._ended[pid] = threading.Event()
        self._selector.register(fd, selectors.EVENT_READ, pid)
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="bugmatrix-worker-watch", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while True:
            for key, _ in self._selector.select(timeout=1.0):
                pid = key.data
                self._selector.unregister(key.fd)
                os.close(key.fd)
                # Every worker is spared (a live one's descendants are its own; a dead one is xdist's zombie to reap).
                self._leaked[pid] = kill_descendants(spare=set(self.workers), when="after its worker died")
                self._ended[pid].set()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.add(worker_pid(node))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # Before a dead worker is replaced, what it left is killed (a finished one is still alive here).
        if error is not None:
            self.leaked_by(worker_pid(node))

    def leaked_by(self, pid: int, wait_s: float = 30.0) -> tuple[str, ...]:
        """What the worker ``pid`` left when it died (waits until the watch has dealt with its end)."""
        ended = self._ended.get(pid)
        if ended is None:
            return ()
        ended.wait(wait_s)
        return self._leaked.get(pid, ())


def worker_pid(node: Any) -> int:
    """An xdist worker's pid (execnet caches it when xdist sets the worker up), -1 when unknown."""
    try:
        return int(node.gateway._rinfo().pid)
    except AttributeError:
        return -1


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
    """Per-session recording state and the controller's hooks; ``observe`` gives the environment at the first write, ``exclusive`` holds the lock."""

    def __init__(
        self, config: pytest.Config, options: CellOptions, observe: Callable[[], dict[str, Any]], *, exclusive: bool = True
    ) -> None:
        self.config, self.options = config, options
        output = os.environ.get("BUGMATRIX_REPORTS") or Path(config.rootpath, "build", "reports")
        run_file = Path(config.invocation_params.dir, options.run_file) if options.run_file else None
        self.path = run_file or Path(output, "runs", f"{options.cell}.json")
        self.lock = RunFileLock(self.path)  # taken before a resume reads the file
        if exclusive:
            self.lock.acquire()
        self.writing = threading.Lock()  # the cell deadline's thread writes the last version, and nothing after it
        #: What a worker xdist reports crashed left running (the WorkerWatch): named on its crash record.
        self.leaked_by: Callable[[pytest.TestReport], tuple[str, ...]] = lambda report: ()
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
        #: The checkout is where pytest started, not its rootdir (which walks up to any enclosing pyproject.toml).
        self.portable = Portable.of(str(config.invocation_params.dir), import_roots())
        if config.getoption("--bugmatrix-resume") and self.path.exists():
            earlier = load_run_file(self.path)  # a BugmatrixError: a usage error (plugin.pytest_configure)
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

    def close_unlocked(self) -> None:
        """The last write, by whoever holds :attr:`writing`: finished now, nothing running."""
        self.running.clear()
        self.write_unlocked(finished=now())

    def write_unlocked(self, finished: str) -> None:
        if self.environment is None:
            observed = self.observe()
            where = {"executable": self.portable.text(str(observed["executable"]))} if observed.get("executable") else {}
            self.environment = {**observed, **where}
        merged = {**self.previous, **self.results}
        run = RunRecord(
            cell=self.options.cell,
            pins=dict(self.options.pins),
            axes=list(self.options.pins),
            tracked={axis: {"requested": r, "resolved": self.options.pins.get(axis, "")} for axis, r in self.options.requested.items()},
            environment=self.environment,
            started=self.started,
            finished=finished,
            results=[merged[k] for k in sorted(merged)],
            selected=sorted(self.selected | set(self.previous)),
            deselected_by=self.deselected_by,
            complete=bool(finished) and self.collected and self.selected <= set(merged),
            running=sorted(self.running),
            input_key=self.options.input_key,
            origin=self.options.origin,
        )
        write_json_atomic(self.path, run.to_json())

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["bugmatrix_resumed"] = sorted(self.previous)  # xdist's workers collect: skip what a resume has

    def _select(self, nodeids: list[str]) -> None:
        self.selected |= {str(v) for v in map(VariantId.from_node, nodeids) if v}
        self.collected = True

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._select([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._select(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # "call" carries the record; a failed setup/teardown or a dead xdist worker's report carries none -> crashed.
        if not (report.when == "call" or report.failed):
            return
        record = next((VariantRecord.from_dict(value) for name, value in report.user_properties if name == PROPERTY), None)
        found = VariantId.from_node(report.nodeid)
        if record is None and found is not None and report.failed:  # an xdist worker died running it, or the harness broke
            text = str(report.longrepr) if report.longrepr else "no report"
            record = crash_record(str(found), text.splitlines()[-1] if text.strip() else text, text, report.duration)
            record = dataclasses.replace(record, leaked=self.leaked_by(report))
        if record is not None and record.id not in self.results:
            self.add(record)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Listing variants (--collect-only) runs nothing and records nothing.
        if not session.config.option.collectonly and (self.results or self.previous or self.selected):
            with self.writing:  # a variant still named running was interrupted with the session, not crashed
                self.close_unlocked()
        self.lock.release()


def expire(state: RunState, seconds: float, record_for: Callable[[str, str], VariantRecord]) -> None:
    """The cell deadline passed: kill what runs, record the unfinished as ``timeout``, write the run file complete, exit."""
    state.writing.acquire()  # to the end: no other thread records anything after this
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
    capture = state.config.pluginmanager.getplugin("capturemanager")
    with contextlib.suppress(Exception):  # past pytest's capture, best effort: the line matters more than the capture's state
        capture.suspend_global_capture(in_=False)
    sys.stdout.flush()
    sys.stderr.write(f"bugmatrix: the cell deadline ({seconds:g}s) passed {said}{names}\n")
    sys.stderr.flush()
    os._exit(1)  # pytest's "tests failed"


#: Said on a variant that was running in the cell process when that process died (found by --bugmatrix-resume).
DIED_INLINE = (
    "the cell process died while running this variant in-process (--bugmatrix-forks 0); --bugmatrix-resume recorded it as "
    "crashed and went on past it. Its exit code or signal was not seen (the fork runner, the default, records it)"
)
