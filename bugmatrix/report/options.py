"""What one ``report`` is asked to do, as one typed value built from the command line once (and what the orchestrator read)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bugmatrix.cell.case import Variant
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.paths import REFERENCE, ROOT

__all__ = ["ReportOptions"]


@dataclass(frozen=True)
class ReportOptions:
    """The report's inputs and outputs; ``extra`` are outputs an upper stage adds (the issue bodies)."""

    reports: Path
    root: Path = ROOT
    cases: Path | None = None
    matrix: Path = ROOT / "matrix.toml"  # with --profile and no --plan: the orchestrator computes the profile's plan from it
    profile: str | None = None
    plan: Path | None = None
    baseline: Path | None = None
    update_baseline: bool = False
    publish: bool = False
    fail_on_regression: bool = False
    step_summary: Path | None = None
    readme: Path | None = None
    history: Path | None = None
    date: str | None = None
    reference: Path = REFERENCE  # the committed reference (--publish, the default baseline)
    extra: tuple[Any, ...] = ()  # bugmatrix.report.outputs.Output entries (typed there: outputs read these options)
    planned: PlanDocument | None = None  # what the orchestrator (or --plan) read: the night's plan, where from, the cases' variants
    plan_source: str = ""
    variants: Mapping[str, Variant] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportOptions:
        """The ``report`` subcommand's namespace, read once (the issue-bodies options belong to their output, not here)."""
        read = {f.name for f in fields(cls)} - {"extra", "reference", "planned", "plan_source", "variants"}  # every option, by its own name
        return cls(**{name: getattr(args, name) for name in read}, reference=REFERENCE)

    @property
    def history_path(self) -> Path:
        """The history appended to: ``--history``, else beside the report."""
        return self.history or self.reports / "history.jsonl"

    @property
    def baseline_path(self) -> Path:
        """The baseline diffed against (and replaced by ``--update-baseline``)."""
        return self.baseline or self.reference / "baseline.json"
