"""The re-resolve lane in the report: per cell, what moved below its lock tonight, and what that changed.

The lane (:mod:`bugmatrix.run.reresolve`) leaves ``<reports>/fresh/``: ``resolve.json`` and a sibling run per moved
cell. Each outcome that differs from the locked run is attributed to what moved; a cell that no longer resolves or
installs is a finding. Siblings of another lock or an earlier night are stale and left out, and a lane of another
profile or night is left out with one line. Its findings fail no run: the committed locks behaved as recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.lane import LaneFile, load_reresolved
from bugmatrix.documents.run import read_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import file_digest
from bugmatrix.report.model import Compat, Origin

__all__ = ["FreshCell", "FreshDifference", "FreshLane", "load_fresh_lane"]


@dataclass(frozen=True, slots=True)
class FreshDifference:
    """A variant whose outcome in the fresh environment differs from the locked run's."""

    variant: str
    locked: Outcome
    fresh: Outcome
    message: str = ""


@dataclass(frozen=True)
class FreshCell:
    """One cell (or CUDA twin) of the lane: its fresh resolution, and its sibling run when it moved.

    ``sibling``: ``ran``, ``reused``, ``install-failed``, ``not-run`` (moved, no current sibling) or "" (nothing moved).
    """

    cell: str
    status: str
    moved: tuple[str, ...] = ()
    reason: str = ""
    sibling: str = ""
    origin: Origin | None = None  # whose results the sibling holds
    differences: tuple[FreshDifference, ...] = ()

    @property
    def breaks(self) -> str:
        """Why the refreshed lock would break this cell ("" when it would not): it does not resolve, or does not install."""
        if self.status == "failed":
            return f"its requirements no longer resolve: {self.reason}"
        if self.sibling == "install-failed":
            return f"the fresh environment does not install: {self.reason}"
        return ""


@dataclass(frozen=True)
class FreshLane:
    """Tonight's lane: when it resolved (and as of when), each cell of the report, and sibling files left out as stale."""

    resolved_at: str
    as_of: str | None = None
    held: Mapping[str, str] = field(default_factory=dict)
    cells: tuple[FreshCell, ...] = ()
    stale: tuple[str, ...] = ()
    #: The sibling run files shown as tonight's (``fresh/runs/<cell>.json`` -> digest): what the history records of them.
    files: Mapping[str, str] = field(default_factory=dict, compare=False)

    def count(self, status: str) -> int:
        return sum(1 for c in self.cells if c.status == status and not c.cell.endswith("-cuda"))

    @property
    def shown(self) -> tuple[FreshCell, ...]:
        """The cells a view lists one by one: moved or failed (the unchanged ones are counted)."""
        return tuple(c for c in self.cells if c.status in ("moved", "failed"))

    @property
    def headline(self) -> str:
        """``re-resolved 70 cells against today's registry (…): 42 same, 28 moved, 0 failed, 0 unlocked``."""
        when = f"as of {self.as_of}" if self.as_of else "against the registry"
        held = f", {', '.join(f'{d} as of {t}' for d, t in self.held.items())}" if self.held else ""
        counts = ", ".join(f"{self.count(s)} {s}" for s in ("same", "moved", "failed", "unlocked"))
        return f"re-resolved {sum(self.count(s) for s in ('same', 'moved', 'failed', 'unlocked'))} cells {when}{held} ({self.resolved_at}): {counts}"


def _differences(compat: Compat, sibling: RunRecord) -> tuple[FreshDifference, ...]:
    """Variants whose fresh outcome differs from the locked one in the same cell (a hole on either side is no difference)."""
    found = []
    for record in sibling.results:
        locked = compat.entry(record.id, sibling.cell)
        if locked is None or locked.outcome in (Outcome.MISSING, Outcome.INSTALL_FAILED) or locked.outcome is record.outcome:
            continue
        found.append(FreshDifference(record.id, locked.outcome, record.outcome, record.message))
    return tuple(sorted(found, key=lambda d: d.variant))


def _moment(text: object) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _is_tonights(sibling: RunRecord, lane_dir: Path, resolved_at: dt.datetime | None) -> bool:
    """The sibling ran from tonight's fresh lock (its input key names that lock's hash), after tonight's lane resolved it."""
    lock = lane_dir / "locks" / f"{sibling.cell.removesuffix('-cuda')}.txt"
    recorded = ((sibling.input_key or {}).get("parts") or {}).get("lock")
    written = _moment((sibling.origin or {}).get("date"))
    tonight = resolved_at is not None and written is not None and written >= resolved_at
    return tonight and lock.is_file() and recorded == file_digest(lock)


def _not_this_night(record: LaneFile, profile: str, night: str | None) -> str | None:
    """Why the lane is not the report's night's (None: it is)."""
    if record.profile != profile:
        recorded = f"profile {record.profile}" if record.profile else "no profile (an older lane)"
        return f"it re-resolved {recorded}, this report is of profile {profile}"
    if night is None:
        return None
    try:
        when = dt.datetime.fromisoformat(record.resolved_at).astimezone(dt.UTC).date()
        day = dt.date.fromisoformat(night)
    except ValueError:
        return f"its resolved_at {record.resolved_at!r} is not a time"
    if when not in (day, day - dt.timedelta(days=1)):
        return f"it resolved on {when.isoformat()}, this report is of the night of {night}"
    return None


def load_fresh_lane(
    lane_dir: Path, compat: Compat, *, night: str | None = None, warn: Callable[[str], None] | None = None
) -> FreshLane | None:
    """The lane of ``lane_dir`` (``<reports>/fresh``) for the report's cells; None when none ran or it is not this night's."""
    try:
        record = load_reresolved(lane_dir)
    except BugmatrixError as exc:  # the lane is news beside the night: a corrupt record loses the lane, never the night
        (warn or print)(f"report: left out the re-resolve lane in {lane_dir}: {exc}")
        return None
    if record is None:
        return None
    why = _not_this_night(record, compat.profile, night)
    if why is not None:
        (warn or print)(f"report: left out the re-resolve lane in {lane_dir}: {why}")
        return None
    runs_dir = lane_dir / "runs"
    found, unreadable = read_run_dir(runs_dir) if runs_dir.is_dir() else ([], [])
    siblings = {r.cell: r for r in found}
    broken = {u.cell: u.why for u in unreadable}
    resolved_at = _moment(record.resolved_at)
    stale = sorted(cid for cid, run in siblings.items() if not _is_tonights(run, lane_dir, resolved_at))
    by_cell = record.by_cell
    cells, files = [], {}
    for cell in compat.cells:
        resolved = by_cell.get(cell.id.removesuffix("-cuda"))
        if resolved is None:
            continue
        if resolved.status != "moved":
            cells.append(FreshCell(cell.id, resolved.status, resolved.moved, resolved.reason))
            continue
        sibling = siblings.get(cell.id) if cell.id not in stale else None
        if sibling is None:
            why = (
                f"its sibling run file cannot be read: {broken[cell.id]}" if cell.id in broken else "no sibling run of tonight's fresh lock"
            )
            cells.append(FreshCell(cell.id, "moved", resolved.moved, why, "not-run"))
            continue
        files[f"fresh/runs/{cell.id}.json"] = sibling.digest
        failed = sibling.install.get("status") == "failed"
        kind = "install-failed" if failed else "reused" if sibling.reused_from else "ran"
        origin = msgspec.convert(sibling.observed, Origin | None)
        reason = sibling.install.get("reason", "") if failed else ""
        cells.append(FreshCell(cell.id, "moved", resolved.moved, reason, kind, origin, () if failed else _differences(compat, sibling)))
    return FreshLane(record.resolved_at, record.as_of, dict(record.held), tuple(cells), tuple(stale), files)
