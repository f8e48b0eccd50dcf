"""The plan a night is held against when the report is given ``--profile`` but no ``--plan``.

A profile names a set of cells; reporting it from its run files alone would
let a lost run file pass as a clean night (no file, no result, nothing
missing). So the expectation is that profile's plan, computed as ``plan`` would
have computed it that night: from matrix.toml, the cases, and the night's
*saved* resolution of ``latest`` (``<reports>/resolution.json``, or
``$BUGMATRIX_RESOLUTION``). The registry is never asked: a release published
after the night must not show up as missing from it. Without a saved
resolution that a symbolic version needs, the plan cannot be known, and that
is one line, not a guess. The saved resolution is checked as ``plan`` checks
it (:func:`~bugmatrix.releases.existence.check_resolved`: each version a
release, from the registry's cached answers, else one request): a hand-edited
``latest = 9.9.9`` plans no cell that cannot exist.

Which devices: the profile's CPU cells (what ``nox -t P`` runs); its CUDA
twins too (``nox -t gpu-P``) when one of them left a run file in this night,
since then the night ran on a GPU runner as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.cells import plan_document
from bugmatrix.plan.document import PlanDocument
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.releases.existence import check_resolved
from bugmatrix.releases.planned import load_plan

__all__ = ["computed_plan"]


def computed_plan(matrix: Path, cases: Path, profile: str, resolution: Path, ran: Iterable[str]) -> tuple[PlanDocument, str]:
    """(the profile's plan that night, where it came from); a plan that cannot be computed offline is one line."""
    try:
        planned = load_plan(load_matrix(matrix), cases, registry=False, offline=True, saved=resolution)
        check_resolved(planned.resolution, planned.declared, resolution)
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
    document = PlanDocument.from_json({**plan_document(planned.matrix, profile, kept), "resolution": planned.resolution.to_json()})
    source = f"computed from {matrix} and the saved resolution {resolution}" if planned.resolution.entries else f"computed from {matrix}"
    return document, source
