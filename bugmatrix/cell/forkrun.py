"""Run functions in forked children of the cell process, a few at once: one process per variant.

Each child starts with the stack imported (copy-on-write), and whatever it does (``os._exit``, a hang, leaked state)
ends with its process. The parent must not have initialized CUDA or started threads before forking.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import selectors
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bugmatrix.cell.descendants import REAP_S, become_subreaper, die_with, is_subreaper, kill_descendants, reap

__all__ = ["Child", "ChildEnd", "DeadlinePassed", "ForkPool", "describe_status", "pidfd"]


class DeadlinePassed(Exception):
    """The cell deadline passed while the pool waited for its children."""


POLL_S = 0.01  # how often the parent looks at its children where no pidfd exists (not Linux)


def describe_status(status: int) -> str:
    """``waitpid`` status -> "exited with code 1" / "was killed by signal 9 (SIGKILL)"."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {number} ({name})"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"ended with wait status {status}"


@dataclass(frozen=True)
class ChildEnd:
    """How one child ended: its result (None unless it wrote one and exited cleanly) and what it printed."""

    key: Hashable
    result: Any
    status: str  # describe_status's words, or "" when it reported a result
    timed_out: bool  # killed by the parent at its deadline
    stdout: str
    stderr: str
    seconds: float  # from fork to reaped
    leaked: tuple[str, ...] = ()  # processes it left running (setsid included), found after it ended and killed


@dataclass
class Child:
    """A running child (parent side)."""

    key: Hashable
    pid: int
    deadline: float
    started: float
    files: Path  # <dir>/<n>: .json (result), .out, .err
    pidfd: int | None = None
    timed_out: bool = False


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _redirect_output(files: Path) -> None:
    """In the child: fds 1 and 2, sys.stdout/err and faulthandler to its own files (not pytest's shared capture)."""
    for fd, suffix in ((1, ".out"), (2, ".err")):
        target = os.open(f"{files}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    faulthandler.enable(file=sys.stderr)


def _child_main(fn: Callable[[], Any], files: Path, parent: int) -> None:
    """The child's whole life: run ``fn``, write its JSON result, ``os._exit`` (no atexit, no pytest teardown)."""
    pid = os.getpid()
    code = 0
    try:
        os.setpgid(0, 0)  # its own group: the parent kills it with everything it started
        die_with(parent)  # its own process group would outlive a kill of the cell's
        become_subreaper()  # what it leaves reaches the cell process only after it ended
        _redirect_output(files)
        result = fn()
        if os.getpid() != pid:  # fn forked and this is its child returning here: not ours to report
            os._exit(0)
        tmp = Path(f"{files}.json.tmp")
        tmp.write_text(json.dumps(result), encoding="utf-8")
        tmp.replace(f"{files}.json")
    except BaseException:  # noqa: BLE001 - the harness's own failure in the child: its exit code and stderr say it
        import traceback

        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 70  # EX_SOFTWARE
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it ends), None where there is none (not Linux 5.3+)."""
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined]  # Linux 5.3+, Python 3.9+
    except (AttributeError, OSError):
        return None


class ForkPool:
    """Up to ``size`` forked children at once: :meth:`start` one, :meth:`next_end` waits for the first to end; leaving kills the rest."""

    def __init__(self, size: int, until: float | None = None) -> None:
        self.size = max(1, size)
        self.until = until  # time.monotonic() of the cell deadline: next_end raises DeadlinePassed from then on
        self.running: dict[Hashable, Child] = {}
        self._dir = Path(tempfile.mkdtemp(prefix="bugmatrix-fork-"))
        self._selector = selectors.DefaultSelector()
        self._count = 0
        self._was_subreaper = is_subreaper()  # the cell process is one for its whole life; a pool inside leaves it so
        self.subreaper = self._was_subreaper or become_subreaper()

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def free(self) -> bool:
        """Room for one more child."""
        return len(self.running) < self.size

    def start(self, key: Hashable, fn: Callable[[], Any], *, deadline_s: float) -> Child:
        """Fork a child that runs ``fn`` (its return value must be JSON-able); killed with its group after ``deadline_s``."""
        self._count += 1
        files = self._dir / str(self._count)
        for stream in (sys.stdout, sys.stderr):  # nothing buffered twice
            with contextlib.suppress(Exception):
                stream.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns (coverage cannot see it)
            _child_main(fn, files, parent)
        with contextlib.suppress(OSError):  # both sides set the group, whichever runs first (the usual race)
            os.setpgid(pid, pid)
        now = time.monotonic()
        child = Child(key, pid, now + deadline_s, now, files, pidfd(pid))
        if child.pidfd is not None:
            self._selector.register(child.pidfd, selectors.EVENT_READ, child)
        self.running[key] = child
        return child

    def call(self, fn: Callable[[], Any], *, deadline_s: float) -> ChildEnd:
        """Run one function in a child and wait for it (no other child may be running)."""
        self.start(("call", self._count), fn, deadline_s=deadline_s)
        return self.next_end()

    def next_end(self) -> ChildEnd:
        """Wait until a child ends (or is killed at its deadline), reap it and say how; past ``until``, :class:`DeadlinePassed`."""
        if not self.running:
            msg = "no child is running"
            raise RuntimeError(msg)
        while True:
            if self.until is not None and time.monotonic() >= self.until:
                raise DeadlinePassed
            for child in list(self.running.values()):
                if time.monotonic() >= child.deadline and not child.timed_out:
                    self._kill(child)
                    child.timed_out = True
                done = self._poll(child)
                if done is not None:
                    return done
            deadlines = [c.deadline for c in self.running.values() if not c.timed_out]
            if self.until is not None:
                deadlines.append(self.until)
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else POLL_S
            if any(c.pidfd is None for c in self.running.values()):
                timeout = min(timeout, POLL_S)
            self._selector.select(timeout)

    def _poll(self, child: Child) -> ChildEnd | None:
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        if pid == 0:
            return None
        del self.running[child.key]
        leaked = self._reap_orphans()  # first: what it left is still running now, and is named
        self._kill(child)  # grandchildren it left behind in its group (all of them, where there is no subreaper)
        if child.pidfd is not None:
            self._selector.unregister(child.pidfd)
            os.close(child.pidfd)
        result_file = Path(f"{child.files}.json")
        result = None
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and result_file.exists():
            with contextlib.suppress(ValueError, OSError):
                result = json.loads(result_file.read_text(encoding="utf-8"))
        end = ChildEnd(
            key=child.key,
            result=result,
            status="" if result is not None else describe_status(status),
            timed_out=child.timed_out,
            stdout=_read(Path(f"{child.files}.out")),
            stderr=_read(Path(f"{child.files}.err")),
            seconds=time.monotonic() - child.started,
            leaked=leaked,
        )
        for suffix in (".json", ".out", ".err", ".json.tmp"):
            with contextlib.suppress(OSError):
                os.unlink(f"{child.files}{suffix}")
        return end

    def _reap_orphans(self) -> tuple[str, ...]:
        """Kill and reap every descendant outside the running variants: what the one that just ended left (``setsid`` too)."""
        if not self.subreaper:
            return ()
        return kill_descendants(spare={c.pid for c in self.running.values()})

    @staticmethod
    def _kill(child: Child) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill and reap every child still running (never waiting long); remove the pool's files."""
        for child in self.running.values():
            self._kill(child)
            if child.pidfd is not None:
                self._selector.unregister(child.pidfd)
                os.close(child.pidfd)
        reap([c.pid for c in self.running.values()], time.monotonic() + REAP_S)
        self.running.clear()
        self._reap_orphans()
        if self.subreaper and not self._was_subreaper:  # the process goes on (a test, the probe's pool)
            become_subreaper(on=False)
        self._selector.close()
        shutil.rmtree(self._dir, ignore_errors=True)
