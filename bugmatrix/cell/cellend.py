"""A cell finishes, whatever its variants do (issue 34): a deadline, a lock on its run file, xdist's dead workers.

* **One writer per run file.** ``.<run file>.lock`` beside it is ``flock``-ed
  for the whole cell (:class:`RunFileLock`): a second pytest writing the same
  run file (a rerun while an orphaned one still runs) says so in one line and
  waits until the first ends; the kernel releases the lock when its holder dies.
* **The cell dies with its parent.** The controlling process and xdist's
  workers ask for SIGKILL when their parent dies (``PR_SET_PDEATHSIG``): killing
  nox leaves no pytest writing on. The runner names itself in the cell's
  environment, so its pytest asks at its first line and ends at once if nox died
  before (:func:`~bugmatrix.cell.descendants.die_with_runner`). (Strictly the signal
  follows the *thread* that started the process: the runner waits for a cell in the thread that started it.)
* **A deadline for the whole cell** (``[harness] cell_deadline_s``, passed in the
  cell's spec, or ``--bugmatrix-cell-deadline``): when it passes, everything the
  cell still runs is killed, every selected variant not yet recorded is
  ``timeout`` (:func:`~bugmatrix.cell.recording.expire`, beside the run state it ends), the run file is written complete and the process
  exits. The fork runner checks it in its own loop (a thread in a process that
  forks would be inherited half-locked); in-process and under xdist's controller
  a daemon thread waits for it (:class:`CellDeadline`).
* **xdist: a dead worker's orphans.** A worker that dies with a child alive
  leaves that child holding the worker's channel open, so xdist never hears of
  the death. The controller is a subreaper; :class:`WorkerWatch` waits on each
  worker's pidfd and, when one ends, kills and reaps what came back to the
  controller, so xdist reports the crash, and the crash record names them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bugmatrix.cell.descendants import kill_descendants

__all__ = ["DEADLINE_EXIT", "CellDeadline", "RunFileLock", "WorkerWatch", "deadline_message", "say_past_capture", "worker_pid"]

#: pytest's exit code when the cell deadline ended the run: "tests failed" (the unfinished variants are timeouts).
DEADLINE_EXIT = 1


def deadline_message(seconds: float) -> str:
    """What an unfinished variant's ``timeout`` record says."""
    return (
        f"the cell deadline ({seconds:g}s, [harness] cell_deadline_s) passed before this variant finished: "
        "everything the cell still ran was killed"
    )


class RunFileLock:
    """An exclusive ``flock`` on ``.<run file>.lock`` beside the run file, held for the whole cell by its controlling process."""

    def __init__(self, run_file: Path) -> None:
        self.run_file = run_file
        self.path = run_file.with_name(f".{run_file.name}.lock")
        self.fd: int | None = None

    def acquire(self, say: Callable[[str], None]) -> None:
        """Take the lock; when another process holds it, ``say`` one line naming it and wait until it ends."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        said = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                    say(f"bugmatrix: another pytest (pid {holder}) is writing {self.run_file}; waiting for it to end (lock {self.path})")
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                ours = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                ours = False
            if ours:  # not a file its last holder removed as we waited on it
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


class CellDeadline:
    """A daemon thread that calls ``on_expiry`` once ``seconds`` have passed, unless cancelled (never in a process that forks)."""

    def __init__(self, seconds: float, on_expiry: Callable[[], None]) -> None:
        self.seconds = seconds
        self._cancelled = threading.Event()
        self._decided = threading.Lock()  # cancelled or fired, never both
        self._fired = False
        self._thread = threading.Thread(target=self._wait, name="bugmatrix-cell-deadline", daemon=True)
        self._on_expiry = on_expiry

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """The session ends on its own; if the deadline fired first, wait for it (it ends the process: no half-written end)."""
        with self._decided:
            self._cancelled.set()
            fired = self._fired
        if fired:
            self._thread.join()

    def _wait(self) -> None:
        if self._cancelled.wait(self.seconds):
            return
        with self._decided:
            if self._cancelled.is_set():
                return
            self._fired = True
        self._on_expiry()


class WorkerWatch:
    """xdist's controller: when a worker process ends, kill and reap what it left (it came back to the controller) and keep their names."""

    def __init__(self) -> None:
        self.workers: set[int] = set()
        self._leaked: dict[int, tuple[str, ...]] = {}
        self._ended: dict[int, threading.Event] = {}
        self._selector = selectors.DefaultSelector()
        self._thread: threading.Thread | None = None

    def add(self, pid: int) -> None:
        """Watch a worker (its pid, from execnet); the thread starts with the first."""
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return  # no pidfd (not Linux 5.3+): xdist alone, as before
        self.workers.add(pid)
        self._ended[pid] = threading.Event()
        self._selector.register(pidfd, selectors.EVENT_READ, pid)
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


def say_past_capture(config: pytest.Config) -> Callable[[str], None]:
    """One line on the real stderr, wherever pytest's capture has it now (the process exits right after)."""

    def say(line: str) -> None:
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            with contextlib.suppress(Exception):  # best effort: the line matters more than the capture's state
                capture.suspend_global_capture(in_=False)
        sys.stdout.flush()
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return say
