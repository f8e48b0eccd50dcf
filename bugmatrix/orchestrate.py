"""The orchestrator of ``report``: the cases' declarations and, for ``--profile`` without ``--plan``, the night's plan
(computed offline from the night's *saved* resolution) are read here and handed on, so the report never imports the planner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from bugmatrix.cell.case import Variant
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import shown
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import plan_document
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.releases.registry import Releases
from bugmatrix.releases.tracking import load_plan, resolution_path
from bugmatrix.report.command import night_cells, run_report
from bugmatrix.report.options import ReportOptions

__all__ = ["computed_plan", "declared_variants", "report"]


def report(options: ReportOptions) -> int:
    """``python -m bugmatrix report``."""
    if options.readme is not None and not options.publish:  # the README's table alone: nothing planned, no case read
        return run_report(options)
    plan, source = None, ""
    if options.profile and options.plan is None and (ran := night_cells(options)):  # none: the report says so, not the planner
        plan, source = computed_plan(
            options.matrix, options.cases or options.root / "cases", options.profile, resolution_path(options.reports), ran
        )
    return run_report(replace(options, planned=plan, plan_source=source, variants=declared_variants(options)))


def computed_plan(matrix: Path, cases: Path, profile: str, resolution: Path, ran: Iterable[str]) -> tuple[PlanDocument, str]:
    """(the profile's plan that night, where it came from); a plan that cannot be computed offline is one line."""
    try:
        planned = load_plan(load_matrix(matrix), cases, registry=False, offline=True, saved=resolution)
        Releases().check_resolved(planned.resolution, planned.declared, resolution)
        cells = planned.profile_cells(profile)
    except BugmatrixError as exc:
        msg = (
            f"--profile {profile} without --plan: the night's plan cannot be computed ({exc}); pass the night's plan "
            f"(--plan FILE, written by `python -m bugmatrix plan --profile {profile} --out FILE`) or its --reports with resolution.json"
        )
        raise BugmatrixError(msg) from None
    ran = set(ran)
    on_gpu = any(c.device != "cpu" and c.id in ran for c in cells)
    kept = [c for c in cells if c.device == "cpu" or on_gpu]
    document = PlanDocument.from_json(plan_document(planned.matrix, profile, kept, planned.resolution.to_json()))
    source = f"computed from {shown(matrix)}" + (f" and the saved resolution {shown(resolution)}" if planned.resolution.entries else "")
    return document, source


def declared_variants(options: ReportOptions) -> dict[str, Variant]:
    """What the cases declare now, by variant id: the one place the report's cases are read."""
    if options.cases is None or not options.cases.is_dir():
        return {}
    variants = load_catalog(options.cases, load_matrix(options.matrix) if options.matrix.is_file() else None).variants
    return {v.id: v for v in variants}
