"""A benchmark row, the table they print as, and the timed command runner and background sampler the rows share."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

__all__ = ["CommandFailed", "Measurement", "Sampler", "format_table", "skipped", "timed", "timed_nox"]

OPS = {"<": operator.lt, "<=": operator.le, ">=": operator.ge}
MET = {True: "yes", False: "NO", None: "-"}


class CommandFailed(Exception):
    """A measured command exited non-zero; the message is its last words."""


@dataclass(frozen=True)
class Measurement:
    """One row: a value against its baseline, and the bound its ratio (``speedup``: baseline / value) must meet; a row
    without a value says in ``note`` why."""

    name: str
    value: float | None
    baseline: float | None
    unit: str
    op: str = ""  # "<", "<=", ">=", or "" for no target
    bound: float = 0.0
    speedup: bool = False
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.value or not self.baseline:
            return None
        return self.baseline / self.value if self.speedup else self.value / self.baseline

    @property
    def target(self) -> str:
        return f"{self.op} {self.bound:g}x" if self.op else ""

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None or not self.op else OPS[self.op](self.ratio, self.bound)


def skipped(name: str, why: str) -> Measurement:
    """A row that was not measured, saying why."""
    return Measurement(name, None, None, "", note=why)


def format_table(rows: Sequence[Measurement]) -> str:
    """An aligned table: measurement | value | baseline | ratio | target | met? | note."""

    def amount(x: float | None, unit: str) -> str:
        return "-" if x is None else f"{x:.2f}{unit}"

    cells = [
        (r.name, amount(r.value, f" {r.unit}"), amount(r.baseline, f" {r.unit}"), amount(r.ratio, "x"), r.target or "-", MET[r.met], r.note)
        for r in rows
    ]
    head = ("measurement", "value", "baseline", "ratio", "target", "met?", "note")
    widths = [max(len(row[i]) for row in [head, *cells]) for i in range(len(head) - 1)]
    lines = []
    for row in [head, *cells]:
        left = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True))]
        lines.append("  ".join([*left, row[4].ljust(widths[4]), row[5].ljust(widths[5]), row[6]]).rstrip())
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def timed(command: Sequence[str], env: Mapping[str, str] | None = None, ok: tuple[int, ...] = (0,), cwd: Path | None = None) -> float:
    """Wall seconds of ``command`` (with exactly ``env`` when given); CommandFailed with its last words otherwise."""
    start = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, env=dict(env or os.environ), cwd=cwd, check=False)
    if done.returncode not in ok:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        msg = f"{' '.join([Path(command[0]).name, *command[1:3]])} exited {done.returncode}: {tail}"
        raise CommandFailed(msg)
    return time.perf_counter() - start


def timed_nox(root: Path, env: Mapping[str, str], *args: str, ok: tuple[int, ...] = (0, 1)) -> float:
    """Wall seconds of ``nox -f <root>/noxfile.py ARGS`` run in ``root`` (exit 1 by default too: an outcome differs)."""
    return timed([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), *args], env, ok=ok, cwd=root)


class Sampler:
    """Calls :meth:`sample` in a daemon thread every ``every`` seconds while entered, and once more on leaving."""

    def __init__(self, every: float, name: str) -> None:
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def sample(self) -> None:
        """Take one sample now."""
        raise NotImplementedError

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
