"""The processes a cell started, wherever they went: found through /proc, killed, reaped and named.

A variant may start processes and leave them running: a plain child, a
DataLoader worker, a daemon that double-forks and calls ``setsid`` (out of
every process group the harness kills). Such a process keeps a pipe of its
parent open (xdist's channel to a worker, pytest's output to nox), so the
cell waits for it forever, and it outlives the cell. Linux brings every one
back: a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) becomes the
parent of each orphaned descendant, ``setsid`` or not, so walking /proc for
processes whose parent chain leads to the cell finds all of them.

The fork runner's cell process (:mod:`~bugmatrix.cell.forkrun`), each
variant's child, the in-process runner and xdist's controller and workers
(:mod:`~bugmatrix.cell.cellend`) are subreapers; this module is the one place
that finds, kills and names what they were left. Elsewhere (not Linux) there is
no /proc and no subreaper: nothing is found, nothing is killed.
Standard library only: it runs inside every cell's venv, Python 3.10 and up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Collection
from pathlib import Path

__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_PDEATHSIG",
    "become_subreaper",
    "children_of",
    "descendants_of",
    "die_with_parent",
    "is_subreaper",
    "kill_descendants",
    "left_running",
]

#: prctl(2): the signal a process gets when the thread that started it ends (in practice: its parent dies).
PR_SET_PDEATHSIG = 1
#: prctl(2): orphaned descendants are reparented to this process instead of init (Linux 3.4+).
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

#: A bound, not a retry: each round kills and reaps one generation of what came back to us.
ROUNDS = 64


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper(on: bool = True) -> bool:
    """Linux: orphaned descendants of this process come back to it (``setsid`` ones included); elsewhere nothing (False)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, int(on))


def is_subreaper() -> bool:
    """This process is a child subreaper already (Linux; elsewhere False)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        flag = ctypes.c_int(0)
        ok = ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return ok and bool(flag.value)


def die_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Linux: this process gets ``signum`` when its parent dies (the thread that started it, strictly); elsewhere False."""
    return _prctl(PR_SET_PDEATHSIG, int(signum))


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


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process whose parent is ``pid`` (zombies included: they are to be reaped)."""
    return [(child, name) for child, (parent, name, _) in _processes().items() if parent == pid]


def descendants_of(pid: int, spare: Collection[int] = ()) -> list[tuple[int, str]]:
    """(pid, command name) of every live process whose parent chain leads to ``pid``, leaving out ``spare`` and theirs.

    A zombie (ended, not yet reaped) is no process left running: it is not listed.
    """
    table = _processes()
    below: dict[int, list[int]] = {}
    for child, (parent, _, _) in table.items():
        below.setdefault(parent, []).append(child)
    found, todo = [], [c for c in below.get(pid, []) if c not in spare]
    while todo:
        child = todo.pop()
        if not table[child][2]:
            found.append((child, table[child][1]))
        todo += [c for c in below.get(child, []) if c not in spare]
    return found


def left_running(pid: int, name: str, when: str = "after the variant ended") -> str:
    """How a killed leftover is named in a variant's ``leaked``."""
    return f"process {pid} ({name}) still running {when}: killed"


def kill_descendants(spare: Collection[int] = (), when: str = "after the variant ended") -> tuple[str, ...]:
    """SIGKILL every descendant of this process but ``spare`` (and theirs), reap those that are (or become) our
    children, and name each once (:func:`left_running`).

    Killing a process hands its own children to us in turn (a subreaper), so this repeats until none is left.
    """
    me, named = os.getpid(), {}
    for _ in range(ROUNDS):
        found = descendants_of(me, spare)
        for pid, name in found:
            named.setdefault(pid, left_running(pid, name, when))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        ours = [pid for pid, _ in children_of(me) if pid not in spare]  # killed, or ended and handed to us (zombies)
        for pid in ours:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        if not found and not ours:
            break
    return tuple(named.values())
