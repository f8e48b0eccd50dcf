"""How a cell runs its variants: one class per runner mode, each a :class:`Runner`, in this one registry.

The run side chooses a mode once per cell and puts its pytest arguments on the command line; the plugin reads them back
(:func:`~bugmatrix.cell.plugin.runner_of`). A new mode is a class listed in :data:`RUNNERS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from bugmatrix.errors import BugmatrixError

__all__ = ["RUNNERS", "RUNNER_ENV", "WORKERS_ENV", "Fork", "Inline", "Runner", "Xdist", "chosen_runner", "default_workers"]

RUNNER_ENV, WORKERS_ENV = "BUGMATRIX_RUNNER", "BUGMATRIX_WORKERS"


@dataclass(frozen=True)
class Runner:
    """A runner mode, declared as data: its pytest arguments and description (``{workers}`` filled in), where variants run."""

    name: ClassVar[str]
    forks: ClassVar[bool] = False  # each variant runs in a child forked from the cell process after one import of the stack
    in_workers: ClassVar[bool] = False  # variants run in xdist workers: the process holding this (xdist's controller) runs none
    args: ClassVar[tuple[str, ...]]
    text: ClassVar[str]
    workers: int = 2

    def pytest_args(self) -> list[str]:
        return [arg.format(workers=self.workers) for arg in self.args]

    def describe(self) -> str:
        return self.text.format(workers=self.workers)


class Fork(Runner):
    """The default: one import of the stack, then a forked process per variant, ``workers`` at once (docs/performance.md)."""

    name = "fork"
    forks = True
    args = ("-n", "0", "--bugmatrix-forks", "{workers}")
    text = "each variant runs in its own process, forked from this one after one import (up to {workers} at once)"


class Xdist(Runner):
    """``workers`` pytest-xdist workers, each importing the stack and running variants in its own process."""

    name = "xdist"
    in_workers = True
    args = ("-n", "{workers}", "--bugmatrix-forks", "0")
    text = "variants run in xdist workers, in each worker's own process"


class Inline(Runner):
    """One process, no isolation: the variant being run is named in the run file, for ``--bugmatrix-resume``."""

    name = "inline"
    args = ("-n", "0", "--bugmatrix-forks", "0")
    text = "variants run in this process, one after another (--bugmatrix-forks 0, or an xdist worker)"


RUNNERS: dict[str, type[Runner]] = {mode.name: mode for mode in (Fork, Xdist, Inline)}


def default_workers() -> int:
    """How many variants run at once: ``$BUGMATRIX_WORKERS`` (default 2, this project's 2-core machines)."""
    text = os.environ.get(WORKERS_ENV, "2")
    try:
        return max(0, int(text))
    except ValueError:
        msg = f"{WORKERS_ENV}={text!r} is not a number of processes; set it to e.g. 2 (0: run variants in the cell process)"
        raise BugmatrixError(msg) from None


def chosen_runner(name: str | None = None, workers: int | None = None) -> Runner:
    """The mode ``name`` (default ``$BUGMATRIX_RUNNER``, else fork), running ``workers`` (default :func:`default_workers`) at once."""
    name = os.environ.get(RUNNER_ENV, Fork.name) if name is None else name
    if name not in RUNNERS:
        msg = f"{RUNNER_ENV}={name!r} is not a runner; use one of {', '.join(RUNNERS)}"
        raise BugmatrixError(msg)
    return RUNNERS[name](default_workers() if workers is None else workers)
