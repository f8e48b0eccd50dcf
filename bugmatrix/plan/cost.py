"""What a profile and each case cost, before anything is locked or run (``nox -s plan -- --cost``).

A case author sees the price of a case while it is still a declaration:
its cells (CPU, and the CUDA twins a GPU runner runs), the environments they
need (one lock each: a CUDA twin installs its CPU cell's lock), how many of
those have no committed lock yet, the lock lines they add, and an estimated
time. Estimates come from what is committed, else an average of it:

* lock lines: the cell's committed lock, else the mean of the committed locks;
* time: the cell's wall time in the committed reference (``reports/runs/``),
  else the reference's mean seconds per variant times the variants the cell
  runs. Environment builds are not in it (they are cached between nights).

A cell that several cases share is counted once in the profile's total and
split between the cases by the share of its variants each one has, so the
per-case figures add up to the total.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bugmatrix.cell.runfile import RunRecord, load_run_dir
from bugmatrix.plan.slices import Slice

__all__ = ["CaseCost", "Costs", "Price", "price", "render_cost"]


@dataclass(frozen=True)
class Price:
    """Cells, environments (and how many are unlocked), lock lines and seconds: a profile's, or one case's share of it."""

    cpu: float = 0
    cuda: float = 0
    environments: float = 0
    unlocked: float = 0
    lock_lines: float = 0
    seconds: float = 0

    def __add__(self, other: Price) -> Price:
        return Price(*(a + b for a, b in zip(self._values(), other._values(), strict=True)))

    def scaled(self, share: float) -> Price:
        return Price(*(a * share for a in self._values()))

    def _values(self) -> tuple[float, ...]:
        return (self.cpu, self.cuda, self.environments, self.unlocked, self.lock_lines, self.seconds)

    def line(self) -> str:
        minutes = self.seconds / 60
        return (
            f"{self.cpu:5.1f} CPU + {self.cuda:4.1f} CUDA cells, {self.environments:5.1f} environments "
            f"({self.unlocked:4.1f} unlocked), ~{self.lock_lines:8.0f} lock lines, ~{minutes:6.1f} min"
        )


class Costs:
    """What is committed that estimates a cell's cost: its lock and its reference run (else their averages)."""

    def __init__(self, locks: Path, runs: Path) -> None:
        # TODO(locks): the "locks" helper changes how locks are stored; ask its lock-size function here instead of counting lines.
        self.lock_lines = {p.stem: sum(1 for _ in p.open(encoding="utf-8")) for p in sorted(locks.glob("*.txt"))} if locks.is_dir() else {}
        reference: list[RunRecord] = load_run_dir(runs) if runs.is_dir() else []
        self.seconds = {run.cell: s for run in reference if (s := _wall(run)) is not None}
        per_variant = [self.seconds[run.cell] / len(run.results) for run in reference if run.cell in self.seconds and run.results]
        self.per_variant = statistics.fmean(per_variant) if per_variant else 10.0
        self.mean_lock = statistics.fmean(self.lock_lines.values()) if self.lock_lines else 1500.0

    def cell(self, cell_id: str, device: str, variants: int) -> Price:
        seconds = self.seconds.get(cell_id, self.per_variant * variants)
        if device == "cuda":  # a twin installs its CPU cell's lock: no environment of its own to lock
            return Price(cuda=1, seconds=seconds)
        lines = self.lock_lines.get(cell_id)
        return Price(cpu=1, environments=1, unlocked=0 if lines is not None else 1, lock_lines=lines or self.mean_lock, seconds=seconds)


def _wall(run: RunRecord) -> float | None:
    try:
        return (dt.datetime.fromisoformat(run.finished) - dt.datetime.fromisoformat(run.started)).total_seconds()
    except (TypeError, ValueError):
        return None


class _CellLike(Protocol):
    id: str
    device: str
    variants: tuple[str, ...]


@dataclass(frozen=True)
class CaseCost:
    """One case in one profile: the cells that run it, how many of them other cases run too, and its share of their price."""

    cells: int
    shared: int
    share: Price


def price(cells: Sequence[_CellLike], slices: Iterable[Slice], costs: Costs) -> tuple[Price, dict[str, CaseCost]]:
    """The profile's total, and each case's cost (a shared cell split by the share of its variants each case runs)."""
    owner = {m.id: s.case for s in slices for m in s.members}
    total = Price()
    shares: dict[str, Price] = {case: Price() for case in dict.fromkeys(owner.values())}
    counts = dict.fromkeys(shares, 0)
    shared = dict.fromkeys(shares, 0)
    for cell in cells:
        cost = costs.cell(cell.id, cell.device, len(cell.variants))
        total += cost
        runs = {owner[v] for v in cell.variants if v in owner}
        for case in runs:
            mine = sum(1 for v in cell.variants if owner.get(v) == case)
            shares[case] += cost.scaled(mine / len(cell.variants))
            counts[case] += 1
            shared[case] += len(runs) > 1
    return total, {case: CaseCost(counts[case], shared[case], shares[case]) for case in shares}


def render_cost(profiles: Mapping[str, tuple[Price, dict[str, CaseCost]]]) -> list[str]:
    """``nox -s plan -- --cost``: per profile its total, then each case: its cells and its share of their price."""
    lines = []
    for profile, (total, cases) in profiles.items():
        lines.append(f"profile {profile}: {total.line()}")
        width = max((len(c) for c in cases), default=0)
        lines += [
            f"  {case:{width}}  {cost.cells:3} cells ({cost.shared:3} shared); its share: {cost.share.line()}"
            for case, cost in cases.items()
        ]
    lines.append("estimates: lock lines from committed locks (else their mean), time from the committed reference runs (else per variant)")
    return lines
