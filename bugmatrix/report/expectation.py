"""What a report expected to find, and under which profile: a result that is not there is *missing*, never silent.

The expectation is the plan; else the baseline's (variant, cell) set when of the same profile, plus each run file's
own selection; else only those selections. The profile: the plan's, ``--profile``, the baseline's, or ``ad-hoc-<digest>``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import msgspec

from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.compat import Axis, ExpectationSource, ExpectationSummary, Tracking
from bugmatrix.documents.plan import PlanDocument, PlannedCell
from bugmatrix.documents.run import TrackedPin
from bugmatrix.errors import BugmatrixError
from bugmatrix.report.model import Compat

__all__ = ["SELECTIONS", "SYSTEM_CELL", "Expectation", "choose_profile", "expect", "from_plan", "is_system"]

#: Without a plan or a baseline: what each run file says it selected (all that can be expected).
SELECTIONS = ExpectationSummary(ExpectationSource.RUNS, "each run file's own selection")
#: The cell that runs the cases in the current interpreter (``nox -s system``): never planned, never expected.
SYSTEM_CELL = "system"


def is_system(cell_id: str) -> bool:
    """A cell run in an interpreter as it is (``system``, ``system-cuda-h200``): never planned, kept beside the planned cells."""
    return cell_id == SYSTEM_CELL or cell_id.startswith(f"{SYSTEM_CELL}-")


@dataclass(frozen=True)
class Expectation:
    """The expected cells (display order; a plan's cells, or the baseline's as such) and how to say where they came from."""

    summary: ExpectationSummary  # as the document says it: its text ("the plan … (70 cells)") is on every view
    cells: tuple[PlannedCell, ...] = ()
    axes: tuple[Axis, ...] = ()  # the plan's axis list, when the plan has one
    tracking: Tracking | None = None  # the plan's resolution of latest

    @cached_property
    def by_id(self) -> dict[str, PlannedCell]:
        return {c.id: c for c in self.cells}

    def variants_for(self, cell_id: str, run: RunRecord | None) -> tuple[str, ...]:
        """The variants ``cell_id`` should have recorded: the plan's; else its run file's own selection; else the baseline's."""
        if self.summary.source is not ExpectationSource.PLAN and run is not None and run.selected:
            return tuple(run.selected)
        expected = self.by_id.get(cell_id)
        return expected.variants if expected else ()


def _plan_tracking(plan: PlanDocument) -> Tracking | None:
    if not plan.resolution.axes:
        return None
    axes: dict[str, TrackedPin] = {}
    for axis, pick in plan.resolution.picks:
        axes.setdefault(axis, pick)  # an axis asking latest and latest-pre: its first, as the run files' tracking keeps
    return Tracking(axes, plan.resolution.resolved_at, plan.resolution.stale)


def from_plan(plan: PlanDocument, where: str = "", baseline: Compat | None = None) -> Expectation:
    """Every planned (variant, cell); baseline cells and results the plan no longer has are counted as dropped on purpose."""
    cells = plan.cells
    dropped: tuple[str, ...] = ()
    dropped_results = 0
    if baseline is not None:
        planned = {c.id: set(c.variants) for c in cells}
        dropped = tuple(c.id for c in baseline.cells if c.id not in planned and not is_system(c.id))
        dropped_results = sum(
            1 for vid, per_cell in baseline.results.items() for cid in per_cell if not is_system(cid) and vid not in planned.get(cid, ())
        )
    text = f"the plan{' ' + where if where else ''} ({len(cells)} cells)"
    return Expectation(ExpectationSummary(ExpectationSource.PLAN, text, dropped, dropped_results), cells, plan.axes, _plan_tracking(plan))


def _from_baseline(baseline: Compat, where: str, runs: Sequence[RunRecord]) -> Expectation:
    """The baseline's (variant, cell) set; a run file that records its selection judges its own cell."""
    by_cell: dict[str, list[str]] = {}
    for vid, per_cell in baseline.results.items():
        for cid in per_cell:
            by_cell.setdefault(cid, []).append(vid)
    cells = tuple(PlannedCell(c.id, dict(c.pins), tuple(by_cell.get(c.id, ()))) for c in baseline.cells if not is_system(c.id))
    selected = [run for run in runs if run.selected and not run.deselected_by and run.cell in by_cell]
    dropped_results = sum(len(set(by_cell[run.cell]).difference(run.selected)) for run in selected)
    text = f"the baseline {where} ({len(cells)} cells) and each run file's own selection"
    return Expectation(ExpectationSummary(ExpectationSource.BASELINE, text, dropped_results=dropped_results), cells)


def expect(
    runs: Sequence[RunRecord],
    profile: str,
    *,
    plan: PlanDocument | None = None,
    plan_path: str = "",
    baseline: Compat | None = None,
    baseline_path: str = "",
) -> Expectation:
    """The expectation this report holds ``runs`` against."""
    if plan is not None:
        return from_plan(plan, plan_path, baseline)
    if baseline is not None and baseline.profile == profile:
        return _from_baseline(baseline, baseline_path, runs)
    if baseline is not None:
        why = f"the baseline {baseline_path} is a {baseline.profile!r} report, this is {profile!r}: its cells are not expected here"
    else:
        why = "no plan and no baseline"
    return Expectation(msgspec.structs.replace(SELECTIONS, text=f"{SELECTIONS.text} ({why})"))


def choose_profile(
    requested: str | None, runs: Sequence[RunRecord], *, plan: PlanDocument | None = None, baseline: Compat | None = None
) -> tuple[str, str]:
    """(profile, where it came from): the plan's, ``--profile``, the baseline's, or an ad-hoc label of its own."""
    if plan is not None:
        planned = plan.profile
        if requested and planned and requested != planned:
            msg = f"--profile {requested} contradicts the plan's profile {planned!r}; leave --profile out (the plan says it)"
            raise BugmatrixError(msg)
        if planned:
            return planned, "the plan"
    if requested:
        return requested, "--profile"
    ran = sorted(r.cell for r in runs if not is_system(r.cell))
    if baseline is not None and baseline.profile and set(ran) <= set(baseline.cell_by_id):
        return baseline.profile, "the baseline (every cell that ran is one of its cells)"
    digest = hashlib.sha256("\n".join(ran).encode()).hexdigest()[:8]
    return f"ad-hoc-{digest}", f"an ad-hoc set of {len(ran)} cell(s): no plan, no --profile, and not all of them are the baseline's"
