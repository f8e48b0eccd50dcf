"""A synthetic full-profile compat document: the report at the scale issue 14 is about.

Cells come from the real planner over the reference catalogue and matrix
(:mod:`tests.reference`: this project's four cases and its matrix as of issue
23, frozen as fixtures, so a user's new case or axis changes nothing here; the
``full`` profile's 83 CPU cells (the union of the cases' slices) over 16 torch, 10 Lightning and 7 transformers
releases and Python 3.10-3.13), and so do the variants (kind,
``workaround_for``, ``counterpart``); only the outcomes are made up, by the small rules in :data:`RULES`, which play the
upstream history (the autocast cache bug fixed in torch 2.11, the T5 closure
bug between transformers 4.30 and Lightning 2.0.7, ...) plus a few planted
oddities (a ``different`` release, a hang, upstream variants that disagree
with their counterpart). Every variant runs in every cell that plans it, as a
real cell does; CUDA variants skip (CPU runners). A generator, not committed
output: tests build it, and ``python -m tests.fullscale out.html`` writes the
page to look at.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
from packaging.version import Version

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.documents import compat as document
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.plan.cells import plan_cells, plan_document
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.model import Compat
from tests.reference import reference_catalog, reference_matrix

__all__ = ["EXPECTED", "RULES", "UNINSTALLABLE", "compat_from_json", "full_compat", "full_runs"]


def compat_from_json(data: object) -> Compat:
    """A night from plain data (``json.load``), checked by the document model (raises msgspec.ValidationError)."""
    return Compat.from_document(msgspec.convert(data, document.Compat))


Pins = dict[str, str]
Rule = Callable[[Pins], str]


def _v(pins: Pins, axis: str) -> Version:
    return Version(pins.get(axis, "0"))


def _when(condition: Callable[[Pins], bool], then: str = "reproduced", otherwise: str = "fixed") -> Rule:
    return lambda pins: then if condition(pins) else otherwise


def _grad_scaler_cpu(rule: Rule) -> Rule:
    """torch.amp.GradScaler("cpu") arrived in 2.3: the case skips before, saying why."""
    return lambda pins: "skipped" if _v(pins, "torch") < Version("2.3") else rule(pins)


def _always(outcome: str) -> Rule:
    return lambda pins: outcome


_AUTOCAST = _when(lambda p: _v(p, "torch") < Version("2.11"))
_AUTOCAST_PL = _when(lambda p: _v(p, "torch") < Version("2.11") and _v(p, "lightning") < Version("2.5"))
_FRESH = _when(lambda p: _v(p, "torch") < Version("2.3"))
_ENCODER = _when(lambda p: _v(p, "torch") < Version("2.6"))
_T5_PL = _when(lambda p: _v(p, "transformers") >= Version("4.30") and _v(p, "lightning") < Version("2.0.7"))

#: (case, variant name) -> the CPU outcome in a cell with these pins.
RULES: dict[tuple[str, str], Rule] = {
    ("autocast_cache", "core"): _AUTOCAST,
    ("autocast_cache", "fresh_autocast"): _FRESH,
    ("autocast_cache", "no_autocast_in_no_grad"): _always("fixed"),
    ("autocast_cache", "cache_disabled"): _always("fixed"),
    ("autocast_cache", "lightning_manual_optimization"): _AUTOCAST_PL,
    ("autocast_cache", "upstream_pr165068_test"): _AUTOCAST,
    ("autocast_cache", "upstream_issue112583"): _AUTOCAST,
    ("autocast_cache", "upstream_lightning_pr20921_test"): _AUTOCAST_PL,
    ("autocast_cache", "upstream_issue65766_workaround"): _FRESH,
    ("double_unscale", "unscale_twice"): _grad_scaler_cpu(_always("reproduced")),
    ("double_unscale", "unscale_once"): _grad_scaler_cpu(_always("fixed")),
    ("double_unscale", "fp16_parameters"): _grad_scaler_cpu(_always("reproduced")),
    ("double_unscale", "fp32_master_weights"): _grad_scaler_cpu(_always("fixed")),
    ("double_unscale", "upstream_unscale_docstring_example"): _grad_scaler_cpu(_always("fixed")),
    ("double_unscale", "upstream_unscale_docstring_warning"): _grad_scaler_cpu(_always("reproduced")),
    # A planted new failure mode in one torch release: the strip must show it and the upstream row must differ there.
    ("encoder_bf16_eval", "core"): lambda p: "different" if p["torch"] == "2.13.0" else _ENCODER(p),
    ("encoder_bf16_eval", "padding_mask"): _always("reproduced"),
    ("encoder_bf16_eval", "fast_path_off"): lambda p: "timeout" if p["torch"] == "2.7.1" else "fixed",
    ("encoder_bf16_eval", "lightning_validate"): _ENCODER,
    ("encoder_bf16_eval", "bf16_true"): _when(lambda p: _v(p, "lightning") < Version("2.1"), "skipped", "fixed"),
    ("encoder_bf16_eval", "upstream_issue132613"): _ENCODER,
    ("encoder_bf16_eval", "upstream_issue107663"): _ENCODER,
    ("encoder_bf16_eval", "upstream_issue82783"): _when(lambda p: _v(p, "torch") < Version("2.1")),
    ("t5_loss_no_grad_fn", "adafactor_closure"): _when(lambda p: _v(p, "transformers") >= Version("4.30")),
    ("t5_loss_no_grad_fn", "lightning_trainer"): _T5_PL,
    ("t5_loss_no_grad_fn", "enable_grad_closure"): _always("fixed"),
    ("t5_loss_no_grad_fn", "upstream_lightning_pr18268_test"): _when(lambda p: _v(p, "lightning") < Version("2.0.7")),
}

#: What the pictures must show: the drawn axes of each picture's own variant (CPU rows; workaround and upstream join).
EXPECTED = {
    "autocast_cache::core[cpu]": ("torch",),
    "autocast_cache::lightning_manual_optimization[cpu]": ("torch", "lightning"),
    "double_unscale::fp16_parameters[cpu]": ("torch",),
    "double_unscale::unscale_twice[cpu]": ("torch",),
    "encoder_bf16_eval::core[cpu]": ("torch",),
    "encoder_bf16_eval::padding_mask[cpu]": ("torch",),
    "encoder_bf16_eval::lightning_validate[cpu]": ("torch", "lightning"),
    "t5_loss_no_grad_fn::adafactor_closure[cpu]": ("transformers",),
    "t5_loss_no_grad_fn::lightning_trainer[cpu]": ("lightning", "transformers"),
}
#: A cell whose environment cannot be built (a pin the resolver rejects), as real nights have.
UNINSTALLABLE = "py313-torch2.15.0-pl2.6.6-tf5.23.0"


@cache
def _planned() -> tuple[Any, dict[str, Any], tuple[Any, ...]]:
    matrix, catalog = reference_matrix(), reference_catalog()
    cells = tuple(c for c in plan_cells(matrix, "full", catalog) if c.device == "cpu")
    return catalog, plan_document(matrix, "full", list(cells)), cells


def _record(variant: Any, outcome: str) -> VariantRecord:
    observed = Outcome(outcome)
    return VariantRecord(
        id=variant.id, case=variant.case_id, variant=variant.name, device=variant.device, kind=Kind(variant.kind),
        workaround_for=variant.workaround_for, counterpart=variant.counterpart, outcome=observed, expected=None,
        verdict=Verdict.NEW if observed.ran else Verdict.NOT_RUN, signature_matched=observed is Outcome.REPRODUCED,
        message="no CUDA device" if variant.device == "cuda" else outcome, duration_s=0.2, axes=tuple(variant.axes),
    )  # fmt: skip


def full_runs(outcome_of: Callable[[str, str], str | None] | None = None) -> list[RunRecord]:
    """One run file per planned CPU cell; ``outcome_of(variant_id, cell_id)`` may override a rule's outcome."""
    catalog, _, cells = _planned()
    by_id = {v.id: v for v in catalog.variants}
    runs = []
    for cell in cells:
        pins = dict(cell.pins)
        records = []
        if cell.id != UNINSTALLABLE:
            for vid in cell.variants:
                variant = by_id[vid]
                outcome = RULES[(variant.case_id, variant.name)](pins) if variant.device == "cpu" else "skipped"
                outcome = (outcome_of(vid, cell.id) if outcome_of else None) or outcome
                records.append(_record(variant, outcome))
        environment = {"python": f"{pins['python']}.9", "torch": pins["torch"], "platform": "Linux-x86_64", "gpu": None}
        failed = {"status": "failed", "reason": "No solution found: torch==2.15.0 has no wheel for cp313"}
        runs.append(RunRecord(
            cell=cell.id, pins=pins, environment={} if cell.id == UNINSTALLABLE else environment,
            started="2026-11-23T02:00:00+00:00", finished="2026-11-23T02:01:00+00:00",
            install=failed if cell.id == UNINSTALLABLE else {"status": "ok", "reason": ""}, results=records,
            axes=list(pins), selected=list(cell.variants), complete=True,
        ))  # fmt: skip
    return runs


def full_compat(outcome_of: Callable[[str, str], str | None] | None = None, generated: str = "2026-11-23T03:00:00+00:00") -> Compat:
    """The full profile's compat document (83 CPU cells), merged against the real plan like ``report-full``."""
    _, plan, _ = _planned()
    return merge_runs(full_runs(outcome_of), profile="full", commit="f00d123", generated=generated, plan=PlanDocument.from_json(plan))


if __name__ == "__main__":
    from bugmatrix.report.night import analyse
    from bugmatrix.report.render_html import render_html

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "fullscale.html")
    target.write_text(render_html(analyse(full_compat())), encoding="utf-8")
    print(target)
