"""A cell finishes, whatever its variants do: one writer per run file, death with its parent, a deadline, xdist's dead workers.

The run file is ``flock``-ed for the whole cell (:class:`RunFileLock`). The cell's processes die with their parent
(:mod:`~bugmatrix.cell.descendants`). At the cell deadline everything is killed and the unfinished are ``timeout``
(:func:`~bugmatrix.cell.recording.expire`): the fork runner checks it in its loop, otherwise a daemon thread does
(:class:`CellDeadline`). A dead xdist worker's orphans hold its channel open: :class:`WorkerWatch` kills them.
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

#: pytest's exit code when the cell deadline ended the run: "tests failed".
DEADLINE_EXIT = 1


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
    """xdist's controller (a subreaper): when a worker ends, kill and reap what it left and keep their names."""

    def __init__(self) -> None:
        self.workers: set[int] = set()
        self._leaked: dict[int, tuple[str, ...]] = {}
        self._ended: dict[int, threading.Event] = {}
        self._selector = selectors.DefaultSelector()
        self._thread: threading.Thread | None = None

    def add(self, pid: int) -> None:
        """Watch a worker; the thread starts with the first."""
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
    """One line on the real stderr, past pytest's capture (the process exits right after)."""

    def say(line: str) -> None:
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            with contextlib.suppress(Exception):  # best effort: the line matters more than the capture's state
                capture.suspend_global_capture(in_=False)
        sys.stdout.flush()
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return say
