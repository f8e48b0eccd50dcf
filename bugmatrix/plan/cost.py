"""What a profile and each case cost, before anything is locked or run (``nox -s plan -- --cost``). A case's line counts
every cell it runs in, whole, and names the shared part: adding a case moves no other case's line."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.run import load_run_dir
from bugmatrix.plan.cells import Cell
from bugmatrix.plan.slices import Slice

__all__ = ["CaseCost", "Costs", "Price", "price", "render_cost"]


@dataclass(frozen=True)
class Price:
    """Cells, environments (and how many are unlocked), lock lines, seconds of fixed cost and of variants, and what was guessed."""

    cpu: int = 0
    cuda: int = 0
    environments: int = 0
    unlocked: int = 0
    lock_lines: float = 0
    fixed: float = 0
    variants: float = 0
    runs: int = 0
    guessed_runs: int = 0
    guessed_cells: int = 0

    def __add__(self, other: Price) -> Price:
        return Price(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def minutes(self) -> float:
        return (self.fixed + self.variants) / 60

    def cells(self) -> str:
        return f"{self.cpu} CPU + {self.cuda} CUDA cells, {self.environments} environments ({self.unlocked} unlocked), ~{self.lock_lines:.0f} lock lines"

    def note(self) -> str:
        """What of the time is an estimate: the variants' (none has run yet, or how many runs), the cells' fixed cost."""
        said = []
        if self.runs and self.guessed_runs == self.runs:
            said.append("an estimate: none of its variants has run yet")
        elif self.guessed_runs:
            said.append(f"{self.guessed_runs} of {self.runs} variant runs estimated (not run yet)")
        if self.guessed_cells:
            said.append(f"{self.guessed_cells} cell(s) not run yet, their fixed cost estimated")
        return "".join(f"; {text}" for text in said)


class Costs:
    """What is committed that prices a cell: its lock and its reference run, each variant's own time (else averages)."""

    def __init__(self, locks: Path, runs: Path) -> None:
        self.lock_lines = {p.stem: sum(1 for _ in p.open(encoding="utf-8")) for p in sorted(locks.glob("*.txt"))} if locks.is_dir() else {}
        reference: list[RunRecord] = load_run_dir(runs) if runs.is_dir() else []
        self.durations = {(run.cell, r.id): r.duration_s for run in reference for r in run.results}
        self.fixed = {
            run.cell: max(0.0, wall - sum(r.duration_s for r in run.results)) for run in reference if (wall := run.wall_s) is not None
        }
        anywhere: dict[str, list[float]] = {}
        for (_, variant), seconds in self.durations.items():
            anywhere.setdefault(variant, []).append(seconds)
        self.by_variant = {variant: statistics.fmean(seconds) for variant, seconds in anywhere.items()}
        self.mean_variant = statistics.fmean(self.durations.values()) if self.durations else 1.0
        self.mean_fixed = statistics.fmean(self.fixed.values()) if self.fixed else 10.0
        self.mean_lock = statistics.fmean(self.lock_lines.values()) if self.lock_lines else 1500.0

    def cell(self, cell_id: str, device: str) -> Price:
        """The cell without its variants: its count, environment, lock lines and fixed cost."""
        fixed = self.fixed.get(cell_id)
        time = Price(fixed=self.mean_fixed if fixed is None else fixed, guessed_cells=fixed is None)
        if device == "cuda":  # a twin installs its CPU cell's lock: no environment of its own to lock
            return time + Price(cuda=1)
        lines = self.lock_lines.get(cell_id)
        return time + Price(cpu=1, environments=1, unlocked=lines is None, lock_lines=self.mean_lock if lines is None else lines)

    def variant(self, cell_id: str, variant: str) -> Price:
        """One variant's time in one cell: measured there, else its mean elsewhere, else the reference's mean per variant."""
        seconds = self.durations.get((cell_id, variant), self.by_variant.get(variant))
        if seconds is None:
            return Price(variants=self.mean_variant, runs=1, guessed_runs=1)
        return Price(variants=seconds, runs=1)


@dataclass(frozen=True)
class CaseCost:
    """One case in one profile: every cell it runs in (whole) plus its own variants, and how much of that other cases share."""

    cells: int
    shared: int  # of its cells, how many run another case's variants too
    price: Price
    shared_fixed: float  # seconds of its cells' fixed cost that are in those shared cells


def price(cells: Sequence[Cell], slices: Iterable[Slice], costs: Costs) -> tuple[Price, dict[str, CaseCost]]:
    """The profile's total (each cell's fixed cost once) and each case's own cost (its cells whole, its variants only)."""
    owner = {m.id: s.case for s in slices for m in s.members}
    total = Price()
    cases: dict[str, list] = {case: [0, 0, Price(), 0.0] for case in dict.fromkeys(owner.values())}
    for cell in cells:
        whole = costs.cell(cell.id, cell.device)
        times = {v: costs.variant(cell.id, v) for v in cell.variants}
        total = sum(times.values(), total + whole)
        runs = {owner[v] for v in cell.variants if v in owner}
        for case in runs:
            entry = cases[case]
            entry[0] += 1
            entry[1] += len(runs) > 1
            entry[2] = sum((t for v, t in times.items() if owner.get(v) == case), entry[2] + whole)
            entry[3] += whole.fixed if len(runs) > 1 else 0.0
    return total, {case: CaseCost(*entry) for case, entry in cases.items()}


def render_cost(profiles: Mapping[str, tuple[Price, dict[str, CaseCost]]]) -> list[str]:
    """``nox -s plan -- --cost``: per profile its total, then each case: the cells it runs in and its time, the shared part named."""
    lines = []
    for profile, (total, cases) in profiles.items():
        lines.append(
            f"profile {profile}: {total.cells()}; ~{total.minutes:.1f} min = fixed {total.fixed / 60:.1f} (each cell once) "
            f"+ variants {total.variants / 60:.1f}{total.note()}"
        )
        width = max((len(c) for c in cases), default=0)
        for case, cost in cases.items():
            own = cost.price
            lines.append(
                f"  {case:{width}}  {cost.cells:3} cells ({cost.shared} shared): ~{own.minutes:5.1f} min = variants "
                f"{own.variants / 60:.1f} + fixed {own.fixed / 60:.1f} ({cost.shared_fixed / 60:.1f} in shared cells); {own.cells()}{own.note()}"
            )
    lines.append(
        "estimates: time from each variant's own duration in the committed reference runs (else its mean there, else their mean "
        "per variant) plus each cell's fixed cost (its wall less its variants), charged once per profile; a case's line counts "
        "every cell it runs in, whole; lock lines from committed locks (else their mean)"
    )
    return lines
