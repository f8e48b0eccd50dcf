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
(:mod:`~bugmatrix.cell.cellend`) are subreapers, and so is the runner that
starts a cell while it runs (:func:`reaping`: what a cell that died itself left);
this module is the one place that finds, kills and names what they were left.
Killing and waiting work from one snapshot of /proc and never block: a process
that comes back meanwhile (another variant ended) is never waited for before it
is killed (issue 45: the cell hung in ``wait4`` on one, its deadline unchecked).
It also makes a cell's processes die with whoever started them, from the cell's
first line (:func:`die_with_runner`). Elsewhere (not Linux) there is no /proc and
no subreaper: nothing is found, nothing is killed.
Standard library only: it runs inside every cell's venv, Python 3.10 and up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Collection, Iterator
from pathlib import Path

__all__ = [
    "PARENT_ENV",
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_PDEATHSIG",
    "become_subreaper",
    "descendants_of",
    "die_with",
    "die_with_parent",
    "die_with_runner",
    "is_subreaper",
    "kill_descendants",
    "left_running",
    "reap",
    "reaping",
]

#: The runner's pid, in the environment of a cell's pytest it starts (:func:`die_with_runner`).
PARENT_ENV = "BUGMATRIX_CELL_PARENT"
#: How a process ends whose parent died before it could ask to die with it (sysexits' EX_SOFTWARE).
EX_SOFTWARE = 70
#: prctl(2): the signal a process gets when the thread that started it ends (in practice: its parent dies).
PR_SET_PDEATHSIG = 1
#: prctl(2): orphaned descendants are reparented to this process instead of init (Linux 3.4+).
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

#: Seconds one :func:`kill_descendants` waits in all for what it killed to end (SIGKILLed processes end at once,
#: unless stuck in the kernel).
REAP_S = 10.0
#: How often :func:`reap` looks again while what it waits for is still ending.
POLL_S = 0.002


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


def die_with(parent: int) -> None:
    """SIGKILL this process when its parent dies, and end it now if ``parent`` (the pid that started it) is no longer
    its parent: it died before the signal was asked for, and the kernel sends none for a death already past."""
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(EX_SOFTWARE)


def die_with_runner() -> int:
    """The first thing a cell's pytest does (its plugin's import): the pid of the process that started it.

    The runner (:func:`bugmatrix.run.command.cell_env`) names itself in :data:`PARENT_ENV`: then this process dies
    with it from here on, and ends at once if it has died already, however early (:func:`die_with`). The variable is
    taken out of the environment, so that no process started from here (an xdist worker) takes it for its own parent.
    Without it (pytest run by hand), the parent seen now, for :func:`die_with` once the plugin is configured.
    """
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
    """(pid, command name) of every live process whose parent chain leads to ``pid``, leaving out ``spare`` and theirs.

    A zombie (ended, not yet reaped) is no process left running: it is not listed.
    """
    table = _processes()
    return [(child, table[child][1]) for child in _below(table, pid, spare) if not table[child][2]]


def left_running(pid: int, name: str, when: str = "after the variant ended") -> str:
    """How a killed leftover is named in a variant's ``leaked``."""
    return f"process {pid} ({name}) still running {when}: killed"


def kill_descendants(spare: Collection[int] = (), when: str = "after the variant ended") -> tuple[str, ...]:
    """SIGKILL every descendant of this process but ``spare`` (and theirs), reap those that are our children, and
    name each once (:func:`left_running`).

    Each round works from one snapshot of /proc: it kills every live descendant it shows and waits only for those of
    them that are our children (or zombies already), never for a process that came back to us after the snapshot (a
    still-running variant's orphan, when that variant ends meanwhile: it is not ours to wait for until it is killed).
    Killing a process hands its own children to us in turn (a subreaper), so rounds go on until a snapshot shows none;
    all of it is bounded (:data:`REAP_S`): a process stuck in the kernel is named, not waited for forever.
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
                named.setdefault(pid, left_running(pid, table[pid][1], when))
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
    """While the block runs this process is a subreaper (Linux): what the processes it starts leave running comes back
    to it, even when they die themselves (a cell whose variant aborts the process that ran it); on leaving, those
    are killed, reaped and named in the list it yields. Children it had before the block are spared, and theirs."""
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


def reap(pids: Collection[int], until: float) -> list[int]:
    """Reap each of ``pids`` (children of ours, killed or ended) as it ends, without blocking, until ``time.monotonic()``
    passes ``until``; the pids still unreaped then. One reaped elsewhere meanwhile (``ChildProcessError``) counts as reaped."""
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                ended = os.waitpid(pid, os.WNOHANG)[0]
            except ChildProcessError:
                ended = pid
            if ended:
                left.discard(pid)
        if left and time.monotonic() >= until:
            break
        if left:
            time.sleep(POLL_S)
    return sorted(left)
