"""The re-resolve lane's record (``<out>/resolve.json``, ``bugmatrix.reresolve/1``): written by the run stage, read by the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

import msgspec

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_bytes
from bugmatrix.values import profile_name

__all__ = ["RERESOLVE_SCHEMA", "STATUSES", "LaneFile", "Reresolved", "Status", "load_reresolved"]

RERESOLVE_SCHEMA = "bugmatrix.reresolve/1"
Status = Literal["same", "moved", "failed", "unlocked"]
STATUSES: tuple[str, ...] = get_args(Status)


class Reresolved(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One cell's fresh resolution against its committed lock."""

    cell: Annotated[str, msgspec.Meta(min_length=1)]
    status: Status
    moved: tuple[str, ...] = ()
    reason: str = ""  # failed: the resolver's reason; unlocked: why there is no lock to compare with
    committed: str = ""  # the committed lock, relative to the repository (locks/<cell>.txt)


class LaneFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``resolve.json``: when, as of when (``uv --exclude-newer``), what was held back, and each cell."""

    schema: Literal["bugmatrix.reresolve/1"]
    resolved_at: str
    cells: list[Reresolved]
    as_of: str | None = None
    held: dict[str, str] = {}
    profile: str | None = None  # None: written before lanes recorded their profile

    def __post_init__(self) -> None:
        if self.profile is not None:
            profile_name(self.profile, "profile", ValueError)

    @property
    def by_cell(self) -> dict[str, Reresolved]:
        """Each cell's resolution, by cell id."""
        return {r.cell: r for r in self.cells}


def load_reresolved(out: Path) -> LaneFile | None:
    """``<out>/resolve.json`` (None when the lane did not run); a corrupt one is a one-line error naming the file."""
    path = out / "resolve.json"
    fix = "run the lane again: nox -s reresolve -- --profile <profile>"
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return msgspec.json.decode(read_bytes(path, "lane record", fix=fix), type=LaneFile)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        problem = f"not valid JSON: {exc}" if type(exc) is msgspec.DecodeError else str(exc)
        msg = f"{path}: not a re-resolve record ({problem}); {fix}"
        raise BugmatrixError(msg) from None
