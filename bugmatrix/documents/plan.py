"""The plan document (``bugmatrix.plan.cells/1``), read back as a typed value.

``plan --out`` and the nox report sessions write it (:func:`bugmatrix.plan.cells.plan_document`
plus the night's resolution), and the orchestrator computes it for ``report --profile`` without
``--plan``; the report reads it to know which (variant, cell) results the night owes. It lives
here, below every stage, so the report reads the plan without importing the planner; read once,
so the report never handles a raw dict: a defect in the file is one line naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json
from bugmatrix.values import profile_name

__all__ = ["PLAN_SCHEMA", "PlanDocument", "PlannedAxis", "PlannedCell", "read_plan_document"]

PLAN_SCHEMA = "bugmatrix.plan.cells/1"


@dataclass(frozen=True)
class PlannedAxis:
    """An axis the plan's cells pin: its name, the prefix of its part of a cell id, and whether it is the interpreter."""

    name: str
    prefix: str
    interpreter: bool = False


@dataclass(frozen=True)
class PlannedCell:
    """One planned cell: its id, its pins, the variants it owes, and the cell it is a sibling of (a case environment's)."""

    id: str
    pins: Mapping[str, str]
    variants: tuple[str, ...] = ()
    sibling_of: str = ""


@dataclass(frozen=True)
class PlanDocument:
    """What a profile planned that night: its cells in order, their axes, and what ``latest`` resolved to."""

    profile: str
    cells: tuple[PlannedCell, ...]
    axes: tuple[PlannedAxis, ...] = ()
    resolution: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cell_ids(self) -> frozenset[str]:
        return frozenset(c.id for c in self.cells)

    @classmethod
    def from_json(cls, data: Any) -> PlanDocument:
        """The document's content; raises ValueError (with what is wrong) where it is not a plan document."""
        if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA or not isinstance(data.get("cells"), list):
            msg = f"not a {PLAN_SCHEMA} document"
            raise ValueError(msg)
        try:
            cells = tuple(
                PlannedCell(
                    str(c["id"]),
                    {str(a): str(v) for a, v in dict(c["pins"]).items()},
                    tuple(str(v) for v in c.get("variants") or ()),
                    str(c.get("sibling_of") or ""),
                )
                for c in data["cells"]
            )
            axes = tuple(
                PlannedAxis(str(a["name"]), str(a.get("prefix") or a["name"]), bool(a.get("interpreter"))) for a in data.get("axes") or ()
            )
            resolution = dict(data.get("resolution") or {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            msg = f"a cell or axis entry is malformed ({exc!r})"
            raise ValueError(msg) from None
        try:  # the profile reaches file names, the site's paths and the issue bodies' links: one rule, here too
            profile = profile_name(data.get("profile"), "profile")
        except BugmatrixError as exc:
            raise ValueError(str(exc)) from None
        return cls(profile, cells, axes, resolution)


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
