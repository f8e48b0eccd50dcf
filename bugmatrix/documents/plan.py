"""The plan document (``bugmatrix.plan.cells/1``): which (variant, cell) results a night owes, as the report reads it.
Written by :func:`bugmatrix.plan.cells.plan_document`; it lives here so the report reads it without the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from bugmatrix.documents.compat import Axis
from bugmatrix.documents.resolution import ResolutionFile
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json
from bugmatrix.values import profile_name

__all__ = ["PLAN_SCHEMA", "PlanDocument", "PlannedCell", "read_plan_document"]

PLAN_SCHEMA = "bugmatrix.plan.cells/1"


class PlannedCell(msgspec.Struct, frozen=True):
    """One planned cell: its id, its pins, the variants it owes, and the cell it is a sibling of (a case environment's)."""

    id: str
    pins: dict[str, str]
    variants: tuple[str, ...] = ()
    sibling_of: str = ""


class PlanDocument(msgspec.Struct, frozen=True):
    """What a profile planned that night: its cells in order, their axes, and what ``latest`` resolved to."""

    schema: Literal["bugmatrix.plan.cells/1"]
    profile: str
    cells: tuple[PlannedCell, ...]
    axes: tuple[Axis, ...] = ()  # the axes its cells pin, in display order
    resolution: ResolutionFile = ResolutionFile({})

    def __post_init__(self) -> None:
        profile_name(self.profile, "profile", ValueError)  # it reaches file names, site paths and issue links

    @property
    def cell_ids(self) -> frozenset[str]:
        return frozenset(c.id for c in self.cells)

    @classmethod
    def from_json(cls, data: Any) -> PlanDocument:
        """The document's content; raises ValueError (with what is wrong) where it is not a plan document."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc) if str(exc).startswith("profile ") else f"not a {PLAN_SCHEMA} document ({exc})") from None


def read_plan_document(path: Path, option: str = "--plan") -> PlanDocument:
    """A plan document written by ``plan --out`` (or the nox report sessions); a defect is one line."""
    fix = f"write it with: python -m bugmatrix plan --profile P --out {path}"
    try:
        return PlanDocument.from_json(read_json(path, "plan document", fix=fix))
    except BugmatrixError as exc:
        msg = f"{option} {exc}"
        raise BugmatrixError(msg) from None
    except ValueError as exc:
        msg = f"{option} {path}: {exc}; {fix}"
        raise BugmatrixError(msg) from None
