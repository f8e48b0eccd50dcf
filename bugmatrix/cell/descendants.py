"""The processes a cell started, wherever they went: found through /proc, killed, reaped and named.

A variant may leave processes (a DataLoader worker, a ``setsid`` daemon) that hold a pipe open and outlive the cell. A
Linux *child subreaper* inherits every orphaned descendant, so walking /proc from it finds them all; elsewhere, none.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Collection, Iterator
from pathlib import Path

__all__ = [
    "PARENT_ENV",
    "REAP_S",
    "become_subreaper",
    "descendants_of",
    "die_with",
    "die_with_runner",
    "is_subreaper",
    "kill_descendants",
    "reap",
    "reaping",
]

#: The runner's pid, in the environment of a cell's pytest it starts (:func:`die_with_runner`).
PARENT_ENV = "BUGMATRIX_CELL_PARENT"
EX_SOFTWARE = 70  # sysexits: how a process ends whose parent died before it could ask to die with it
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 1, 36, 37  # prctl(2)
#: Seconds one :func:`kill_descendants` waits in all for what it killed to end.
REAP_S = 10.0
POLL_S = 0.002


def _prctl(option: int, value: object) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper(on: bool = True) -> bool:
    """Linux: orphaned descendants of this process come back to it (``setsid`` ones included); elsewhere nothing (False)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, int(on))


def is_subreaper() -> bool:
    """This process is a child subreaper already (Linux; elsewhere False)."""
    flag = ctypes.c_int(0)
    return _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) and bool(flag.value)


def die_with(parent: int) -> None:
    """SIGKILL this process when its parent dies, and end it now if ``parent`` died already (no signal for a past death)."""
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(EX_SOFTWARE)


def die_with_runner() -> int:
    """The pid of this cell's runner (:data:`PARENT_ENV`, popped; else the parent now), dying with it where it named itself."""
    given = os.environ.pop(PARENT_ENV, "")
    if not given.isdigit():
        return os.getppid()
    die_with(int(given))
    return int(given)


def _processes() -> dict[int, tuple[int, str, bool]]:
    """pid -> (parent pid, command name, a zombie) of every process /proc shows (none without /proc)."""
    found: dict[int, tuple[int, str, bool]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # ended while we looked
            rest = stat[stat.rindex(")") + 2 :].split()
            if len(rest) > 1:
                found[int(entry.name)] = (int(rest[1]), stat[stat.index("(") + 1 : stat.rindex(")")], rest[0] == "Z")
    return found


def _below(table: dict[int, tuple[int, str, bool]], pid: int, spare: Collection[int]) -> list[int]:
    """Every process of ``table`` whose parent chain leads to ``pid`` (zombies included), leaving out ``spare`` and theirs."""
    below: dict[int, list[int]] = {}
    for child, (parent, _, _) in table.items():
        below.setdefault(parent, []).append(child)
    found, todo = [], [c for c in below.get(pid, []) if c not in spare]
    while todo:
        child = todo.pop()
        found.append(child)
        todo += [c for c in below.get(child, []) if c not in spare]
    return found


def descendants_of(pid: int, spare: Collection[int] = ()) -> list[tuple[int, str]]:
    """(pid, command name) of every live process (no zombie) below ``pid``, leaving out ``spare`` and theirs."""
    table = _processes()
    return [(child, table[child][1]) for child in _below(table, pid, spare) if not table[child][2]]


def kill_descendants(spare: Collection[int] = (), when: str = "after the variant ended") -> tuple[str, ...]:
    """SIGKILL every descendant of this process but ``spare`` (and theirs), reap our children, name each once.

    Each round kills what one /proc snapshot shows and waits only for our children among them (never for one that came
    back after the snapshot), until none is left or :data:`REAP_S` has passed.
    """
    me, named = os.getpid(), {}
    until = time.monotonic() + REAP_S
    while True:
        table = _processes()
        found = _below(table, me, spare)
        if not found:
            break
        for pid in found:
            if not table[pid][2]:
                named.setdefault(pid, f"process {pid} ({table[pid][1]}) still running {when}: killed")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= until:  # past REAP_S: what is left is killed and named, not waited for
            break
        ours = [pid for pid in found if table[pid][0] == me]
        if ours:
            reap(ours, until)
        else:  # killed grandchildren still ending: they come back to us once they have
            time.sleep(POLL_S)
    return tuple(named.values())


@contextlib.contextmanager
def reaping(when: str) -> Iterator[list[str]]:
    """A subreaper for the block: on leaving, what its processes left is killed, reaped and named in the list it yields
    (children from before the block are spared)."""
    me = os.getpid()
    before = {pid for pid, (parent, _, _) in _processes().items() if parent == me}
    was = is_subreaper()
    became = was or become_subreaper()
    killed: list[str] = []
    try:
        yield killed
    finally:
        if became:
            killed += kill_descendants(spare=before, when=when)
        if became and not was:  # the process goes on: orphans of its other work go where they went before
            become_subreaper(on=False)


def reap(pids: Collection[int], until: float) -> None:
    """Reap each of ``pids`` as it ends, without blocking, until ``until`` (monotonic)."""
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    left.discard(pid)
            except ChildProcessError:  # not (or no longer) ours to wait for
                left.discard(pid)
        if not left or time.monotonic() >= until:
            break
        time.sleep(POLL_S)
