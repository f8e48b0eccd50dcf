"""The re-resolve lane in the report: per cell, what moved below its lock tonight, and what that changed.

The lane (:mod:`bugmatrix.run.reresolve`) leaves ``<reports>/fresh/``: ``resolve.json`` and a sibling run per moved
cell. Siblings of another lock or night are stale; a lane of another profile or night is left out with one line. Its
findings fail no run: the committed locks behaved as recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.compat import FreshCell, FreshDifference, FreshLane
from bugmatrix.documents.lane import LaneFile, load_reresolved
from bugmatrix.documents.run import Origin, read_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import file_digest
from bugmatrix.report.model import Compat

__all__ = ["load_fresh_lane"]


def _differences(compat: Compat, sibling: RunRecord) -> tuple[FreshDifference, ...]:
    """Variants whose fresh outcome differs from the locked one in the same cell (a hole on either side is no difference)."""
    found = []
    for record in sibling.results:
        locked = compat.entries(record.id).get(sibling.cell)
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
) -> tuple[FreshLane, dict[str, str]] | None:
    """The lane of ``lane_dir`` for the report's cells, and its sibling run files' digests (for the history); None when none ran."""
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
    return FreshLane(record.resolved_at, tuple(cells), record.as_of, dict(record.held), tuple(stale)), files
