"""Markdown for what the night did not run and what it ran twice: reused cells, and the re-resolve lane.

Shared by compat.md and the step summary; the terminal reads the same groups. A reused result always names its origin,
and a fresh difference names what moved below the pins.
"""

from __future__ import annotations

from collections.abc import Sequence

from bugmatrix.documents.compat import FreshCell
from bugmatrix.report.markdown import code, escape_md
from bugmatrix.report.model import REUSED, Origin
from bugmatrix.report.night import NightReport

__all__ = ["REUSED", "lane_groups", "lane_lines", "reuse_groups", "reuse_lines"]


def reuse_groups(report: NightReport) -> list[tuple[Origin, list[str]]]:
    """The reused cells grouped by whose results they carry, oldest first."""
    groups: dict[Origin, list[str]] = {}
    for cell in report.compat.reused_cells:
        assert cell.reused_from is not None
        groups.setdefault(cell.reused_from, []).append(cell.id)
    return sorted(groups.items(), key=lambda item: item[0].date)


def _names(cells: Sequence[str], limit: int | None) -> str:
    shown = cells if limit is None else cells[:limit]
    more = f" … and {len(cells) - len(shown)} more" if len(shown) < len(cells) else ""
    return ", ".join(code(c) for c in shown) + more


def reuse_lines(report: NightReport, limit: int | None = None) -> list[str]:
    """``## ♻ Reused …``: which cells took over an earlier run's results, and whose; nothing when every cell ran."""
    groups = reuse_groups(report)
    if not groups:
        return []
    compat = report.compat
    lines = [
        f"## {REUSED} Reused: {len(compat.reused_cells)} of {len(compat.cells)} cells took over an earlier run's results (inputs unchanged)",
        "",
        "Their input key (lock, case files, harness code, platform, Python build, GPU) equals that run's, so they were not run"
        f" again; {REUSED} marks them in the tables. Results older than `[reuse] max_age_days` always run again.",
        "",
    ]
    lines += [f"- from {escape_md(origin.text)}: {_names(cells, limit)}" for origin, cells in groups]
    return [*lines, ""]


def lane_groups(cells: Sequence[FreshCell]) -> tuple[list[FreshCell], list[tuple[tuple[str, ...], list[FreshCell]]]]:
    """The lane's cells to name one by one (a finding or a sibling that did not run), and the quiet moved ones grouped by what moved."""
    single, quiet = [], {}
    for cell in cells:
        if cell.status == "failed" or cell.breaks or cell.differences or cell.sibling == "not-run":
            single.append(cell)
        elif cell.status == "moved":
            quiet.setdefault(cell.moved, []).append(cell)
    return single, list(quiet.items())


def _moved(moved: Sequence[str]) -> str:
    return escape_md("; ".join(moved)) if moved else "nothing"


def _sibling(cell: FreshCell) -> str:
    origin = f" ({escape_md(cell.origin.text)})" if cell.origin else ""
    return {
        "ran": f"ran in the fresh environment{origin}",
        "reused": f"{REUSED} reused an earlier run of the same fresh lock{origin}",
        "not-run": f"**not run** in the fresh environment ({escape_md(cell.reason)})",
    }.get(cell.sibling, cell.sibling)


def lane_lines(report: NightReport, limit: int | None = None) -> list[str]:
    """``## ↻ Re-resolved …``: the lane's totals, what breaks, and each moved cell with the outcomes that differ and why."""
    lane = report.fresh
    if lane is None:
        return []
    lines = [
        "## ↻ Re-resolved against today's registry (metadata only)",
        "",
        escape_md(lane.headline) + ". Refreshed locks: the lane's `locks.patch` (apply with `git apply`).",
        "",
    ]
    single, quiet = lane_groups(lane.shown)
    for cell in single[:limit]:
        if cell.breaks:
            lines.append(f"- **{escape_md('fresh lock breaks')}** {code(cell.cell)}: {escape_md(cell.breaks[:300])}")
            continue
        differs = f"{len(cell.differences)} outcome(s) differ from the locked run" if cell.differences else "no outcome differs"
        lines.append(f"- {code(cell.cell)}: moved {_moved(cell.moved)} — {_sibling(cell)}; {differs}")
        lines += [
            f"  - {code(d.variant)}: locked {d.locked} → fresh **{d.fresh}**, attributed to {_moved(cell.moved)}"
            + (f" — {escape_md(d.message[:200])}" if d.message else "")
            for d in cell.differences
        ]
    if limit is not None and len(single) > limit:
        lines.append(f"- … and {len(single) - limit} more (compat.json: reresolved)")
    for moved, cells in quiet:
        lines.append(
            f"- {len(cells)} cell(s) moved {_moved(moved)} — {_sibling(cells[0]) if len(cells) == 1 else 'sibling runs'}: no outcome differs"
            f" ({_names([c.cell for c in cells], limit)})"
        )
    if lane.stale:
        lines.append(f"- left out as stale (not of tonight's fresh lock): {_names(list(lane.stale), limit)}")
    return [*lines, ""]
