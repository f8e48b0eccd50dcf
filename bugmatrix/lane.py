"""The re-resolve lane's record (``<out>/resolve.json``, ``bugmatrix.reresolve/1``): written by the run stage, read by the report.

A neutral shape: :mod:`bugmatrix.run.reresolve` writes it (and the fresh locks
and sibling runs beside it), :mod:`bugmatrix.report.fresh` and the ``fresh``
sessions read it. Keeping the format here lets both stages depend on it
without the report importing the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json
from bugmatrix.values import profile_name

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
    def from_json(cls, data: Any) -> Reresolved:
        """One ``cells`` entry; a wrong shape (``moved`` as one string, a number as a cell) is a ValueError saying which."""
        if not isinstance(data, dict):
            msg = f"a cells entry is {type(data).__name__}, not an object"
            raise ValueError(msg)
        cell, status, moved = data.get("cell"), data.get("status"), data.get("moved") or []
        if not isinstance(cell, str) or not cell:
            msg = f"cell {cell!r} is not a cell id"
            raise ValueError(msg)
        if status not in STATUSES:
            msg = f"{cell}: status {status!r} is not one of {', '.join(STATUSES)}"
            raise ValueError(msg)
        if not isinstance(moved, list) or not all(isinstance(m, str) for m in moved):
            msg = f"{cell}: moved {moved!r} is not a list of distributions"
            raise ValueError(msg)
        texts = {key: data.get(key, "") for key in ("reason", "committed")}
        wrong = [key for key, value in texts.items() if not isinstance(value, str)]
        if wrong:
            msg = f"{cell}: {wrong[0]} is not a string"
            raise ValueError(msg)
        return cls(cell, status, tuple(moved), texts["reason"], texts["committed"])


@dataclass(frozen=True)
class Lane:
    """One night's lane as ``resolve.json`` holds it: when, as of when, what was held back, and each cell."""

    resolved_at: str
    as_of: str | None
    held: Mapping[str, str]
    cells: Mapping[str, Reresolved]
    profile: str | None = None  # None: written before lanes recorded their profile


def _lane(data: Any) -> Lane:
    """The record's content; a ValueError names the first key of the wrong shape."""
    if not isinstance(data, dict) or data.get("schema") != RERESOLVE_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        msg = f"schema {found!r} is not {RERESOLVE_SCHEMA!r}"
        raise ValueError(msg)
    cells, held = data.get("cells"), data.get("held") or {}
    if not isinstance(cells, list):
        msg = "cells is not a list"
        raise ValueError(msg)
    if not isinstance(held, dict) or not all(isinstance(v, str) for v in held.values()):
        msg = "held is not an object of distribution -> timestamp"
        raise ValueError(msg)
    resolved_at, as_of = data.get("resolved_at"), data.get("as_of")
    if not isinstance(resolved_at, str) or not (as_of is None or isinstance(as_of, str)):
        msg = "resolved_at (and as_of, when given) must be timestamps"
        raise ValueError(msg)
    profile = data.get("profile")
    if profile is not None:
        profile = profile_name(profile, "profile")
    return Lane(resolved_at, as_of, dict(held), {r.cell: r for r in (Reresolved.from_json(c) for c in cells)}, profile)


def load_reresolved(out: Path) -> Lane | None:
    """``<out>/resolve.json`` (None when the lane did not run); a corrupt one is a one-line error naming the file."""
    path = out / "resolve.json"
    fix = "run the lane again: nox -s reresolve -- --profile <profile>"
    if not path.exists() and not path.is_symlink():
        return None
    data = read_json(path, "lane record", fix=fix)
    try:
        return _lane(data)
    except (ValueError, BugmatrixError) as exc:
        msg = f"{path}: not a re-resolve record ({exc}); {fix}"
        raise BugmatrixError(msg) from None
