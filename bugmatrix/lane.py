"""The re-resolve lane's record (``<out>/resolve.json``, ``bugmatrix.reresolve/1``): written by the run stage, read by the report.

A neutral shape: :mod:`bugmatrix.run.reresolve` writes it (and the fresh locks
and sibling runs beside it), :mod:`bugmatrix.report.fresh` and the ``fresh``
sessions read it. Keeping the format here lets both stages depend on it
without the report importing the runner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError

__all__ = ["RERESOLVE_SCHEMA", "STATUSES", "Lane", "Reresolved", "load_reresolved"]

RERESOLVE_SCHEMA = "bugmatrix.reresolve/1"
STATUSES = ("same", "moved", "failed", "unlocked")


@dataclass(frozen=True)
class Reresolved:
    """One cell's fresh resolution against its committed lock."""

    cell: str
    status: str  # one of STATUSES
    moved: tuple[str, ...] = ()
    reason: str = ""  # failed: the resolver's reason; unlocked: why there is no lock to compare with
    committed: str = ""  # the committed lock, relative to the repository (locks/<cell>.txt)

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "status": self.status, "moved": list(self.moved), "reason": self.reason, "committed": self.committed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reresolved:
        status = str(data["status"])
        if status not in STATUSES:
            msg = f"status {status!r} is not one of {', '.join(STATUSES)}"
            raise ValueError(msg)
        return cls(
            str(data["cell"]),
            status,
            tuple(str(m) for m in data.get("moved") or ()),
            str(data.get("reason", "")),
            str(data.get("committed", "")),
        )


@dataclass(frozen=True)
class Lane:
    """One night's lane as ``resolve.json`` holds it: when, as of when, what was held back, and each cell."""

    resolved_at: str
    as_of: str | None
    held: Mapping[str, str]
    cells: Mapping[str, Reresolved]
    profile: str | None = None  # None: written before lanes recorded their profile


def load_reresolved(out: Path) -> Lane | None:
    """``<out>/resolve.json`` (None when the lane did not run); a corrupt one is a one-line error naming the file."""
    path = out / "resolve.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != RERESOLVE_SCHEMA:
            msg = f"schema {data.get('schema')!r} is not {RERESOLVE_SCHEMA!r}"
            raise ValueError(msg)
        cells = {r.cell: r for r in (Reresolved.from_json(c) for c in data["cells"])}
        held = {str(k): str(v) for k, v in dict(data.get("held") or {}).items()}
        profile = data.get("profile")
        if profile is not None and not isinstance(profile, str):
            msg = f"profile {profile!r} is not a name"
            raise ValueError(msg)
        return Lane(str(data["resolved_at"]), data.get("as_of"), held, cells, profile)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{path}: not a re-resolve record ({exc}); run the lane again: nox -s reresolve -- --profile <profile>"
        raise BugmatrixError(msg) from exc
