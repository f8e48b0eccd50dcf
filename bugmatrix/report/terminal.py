"""The report's last words in the terminal: one line per variant, its boundary, the workarounds that held.

Colour only on a TTY without ``NO_COLOR`` (https://no-color.org); the symbols carry the meaning either way.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from typing import TextIO

from packaging.requirements import Requirement

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.report.diff import ChangeKind, flaky_lines, summary_lines
from bugmatrix.report.history import VariantHistory
from bugmatrix.report.marks import Picture, Track, boundary_text
from bugmatrix.report.model import REUSED, Compat
from bugmatrix.report.night import NightReport
from bugmatrix.report.render_md import TEXT

__all__ = ["render_terminal", "summary_rows", "use_colour"]

#: Missing results and release notes named one by one before "… and N more": the page has them all.
HEADLINE_LIMIT = 10

_ANSI = {"✗": "31", "✓": "32", "≠": "33", "‼": "33", "∞": "33", "⚠": "90", "≈": "35"}


def use_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True only for a terminal, and only when ``NO_COLOR`` is unset or empty."""
    environ = os.environ if environ is None else environ
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not environ.get("NO_COLOR")


def _ranges(values: list[str], hits: set[str]) -> str:
    """``2.0.1–2.10.0, 2.13.0``: consecutive values as one range."""
    runs = [list(run) for hit, run in itertools.groupby(values, key=hits.__contains__) if hit]
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def _where(picture: Picture, track: Track, outcome: Outcome) -> str:
    """Where a track had ``outcome``: release ranges on a strip, a cell count on a grid."""
    if picture.kind == "strip":
        hits = {key[0] for key, mark in track.marks.items() if outcome in mark.outcomes}
        text = _ranges(list(picture.values[0]), hits)
        return f"{picture.short(picture.axes[0])} {text}" if text else "—"
    count = sum(1 for mark in track.marks.values() if outcome in mark.outcomes)
    return f"{count} of {len(track.marks)} positions" if count else "—"


def _pin(requirement: str) -> str:
    words = {"<=": "≤", ">=": "≥", "==": "=", "!=": "≠"}
    parsed = [Requirement(r) for r in requirement.split(", ")]
    return ", ".join(f"{r.name} {', '.join(f'{words.get(s.operator, s.operator)} {s.version}' for s in r.specifier)}" for r in parsed)


def _cells(n: int) -> str:
    return f"{n} cell{'s' if n != 1 else ''}"


def _held(track: Track, workarounds: list[Track], compat: Compat, history: Mapping[str, VariantHistory]) -> str:
    """``cache_disabled ✓ 11/11; fast_path_off ✓ 6/6 (…)``: per workaround, fixed / ran among the cells where the variant reproduced."""
    entries = compat.entries(track.variant.id)
    reproduced = [e for e in entries.values() if e.outcome is Outcome.REPRODUCED]
    if not reproduced or not workarounds:
        return ""
    parts = []
    for w in (w for w in workarounds if w.variant.role == "workaround"):
        flaky = " ≈ flaky" if (h := history.get(w.variant.id)) is not None and h.flaky else ""
        held = sum(1 for e in reproduced if w.variant.name in e.workarounds)
        ran = sum(1 for e in reproduced if e.tried is None or w.variant.name in e.tried)  # None: an older document, not said
        said = [f"{'✓ ' if held == ran else ''}{held}/{ran}"] if ran else []
        if w.variant.pinned:
            absent = [c for c, e in compat.entries(w.variant.id).items() if e.outcome is Outcome.FIXED and c in entries]
            absent = [c for c in absent if entries[c].outcome is not Outcome.REPRODUCED]
            if absent:
                where = f"avoided by pinning {_pin(w.variant.pinned)}, where the bug is absent ({_cells(len(absent))})"
                said = [where, *(f"{s} where it reproduced" for s in said)]
        elif said and ran < len(reproduced):
            said[0] += f" (not run where it reproduced: {_cells(len(reproduced) - ran)})"
        parts.append(f"{w.variant.name} {', '.join(said) or f'not run where it reproduced ({_cells(len(reproduced))})'}{flaky}")
    return "; ".join(parts)


def summary_rows(report: NightReport, *, with_history: bool = True) -> tuple[list[tuple[str, str, str, str, str]], int]:
    """Per drawn variant: (name, reproduced in, fixed in, boundary, workarounds held); and how many ran nowhere (also the README)."""
    drawn, idle = report.boundary
    history = report.history if with_history else {}
    rows = []
    for picture in drawn:
        track = picture.tracks[0]
        flaky = history.get(track.variant.id)
        reused = f" {REUSED}" if report.compat.reuses(track.variant.id) else ""
        name = track.variant.id + reused + (" ≈ flaky" if flaky is not None and flaky.flaky else "")
        held = _held(track, picture.tracks[1:], report.compat, history)
        rows.append((name, _where(picture, track, Outcome.REPRODUCED), _where(picture, track, Outcome.FIXED), boundary_text(picture), held))
    return rows, len(idle)


def render_terminal(report: NightReport, *, colour: bool = False) -> str:
    """The findings and new releases first, then the summary table (no trailing newline); the history adds ≈ flaky marks."""
    body, idle = summary_rows(report)
    rows = [("variant", "reproduced in", "fixed in", "boundary", ""), *body]
    missing_cells: dict[str, list[str]] = {}
    for change in report.missing:
        missing_cells.setdefault(change.cell_id, []).append(change.message)
    # One line per finding not said elsewhere in the headline (missing cells and releases that do not install are).
    changes = [c for c in report.changes if c.kind not in (ChangeKind.MISSING, ChangeKind.RELEASE_DOES_NOT_INSTALL)]
    findings = [f"{'✗' if line.startswith('REGRESSION') else '⚠'} {line}" for line in summary_lines(changes)]
    findings += [f"≈ {line}" for line in flaky_lines(changes)]
    for c in (c for c in changes if c.kind is ChangeKind.NEW_FAILURE_MODE):
        was = c.before or "new"
        findings.append(f"≠ NEW FAILURE MODE {c.variant_id} in {c.cell_id}: {was} -> {c.after}: {c.first_line}{c.reused_note}")
    if len(findings) > HEADLINE_LIMIT:
        findings[HEADLINE_LIMIT:] = [f"    … and {len(findings) - HEADLINE_LIMIT} more finding(s) (see compat.md or index.html)"]
    text = TEXT.get_template("terminal.txt.j2").render(
        report=report,
        missing_cells=list(missing_cells.items()),
        findings=findings,
        rows=rows,
        widths=[max(len(r[i]) for r in rows) for i in range(3)],
        bold=colour,
        idle=idle,
        limit=HEADLINE_LIMIT,
    )
    text = text.removesuffix("\n")
    return "".join(f"\033[{_ANSI[ch]}m{ch}\033[0m" if ch in _ANSI else ch for ch in text) if colour else text
