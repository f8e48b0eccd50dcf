"""Outcomes across nights (``bugmatrix.history/1``, one line per night and profile): last change, timeline, flakiness.

One letter per (variant, cell) a night. A (variant, cell) is *flaky* when within the last :data:`WINDOW` nights it
changed at least :data:`FLIPS` times and went back to an outcome it already had (a ``missing`` night is a gap); the
diff lists its changes as flaky instead of failing the run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents.history import HISTORY_SCHEMA
from bugmatrix.documents.history import NightLine as Night
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_text, write_text_atomic
from bugmatrix.report.model import Compat

__all__ = [
    "FLIPS",
    "HISTORY_SCHEMA",
    "KEEP_NIGHTS",
    "WINDOW",
    "Night",
    "Tick",
    "VariantHistory",
    "append_night",
    "flaky_pairs",
    "history_text",
    "load_history",
    "night_from_compat",
    "nights_of",
    "outcome_runs",
    "reuse_facts",
    "summarise",
    "unchanged_since",
    "write_history",
]

#: Nights kept in the file: a season of nightlies, ~2 MB at 1,000 cells x 20 variants.
KEEP_NIGHTS = 90
#: Nights shown as a timeline and searched for flakiness.
WINDOW = 30
#: Changes within the window (one of them back to an earlier outcome) that make a (variant, cell) flaky.
FLIPS = 2
#: One letter per outcome (``Outcome.code``) -> the outcome's word.
WORDS = {o.code: o.value for o in Outcome}
ABSENT = "."
#: Letters that are no outcome of the bug: a gap on the timeline, never a change, never flaky.
GAPS = frozenset({ABSENT, Outcome.MISSING.code})
_DECODER = msgspec.json.Decoder(Night)
#: Timeline symbols: shape first, the CSS colour only repeats them.
TICK_SYMBOLS = {"none": "○", "first": "•", "same": "·", "missing": "?", "changed": "Δ", "flap": "↯"}


@dataclass(frozen=True, slots=True)
class Tick:
    """One night on a variant's timeline."""

    date: str
    state: str  # none | first | same | missing | changed | flap
    title: str

    @property
    def symbol(self) -> str:
        return TICK_SYMBOLS[self.state]


@dataclass(frozen=True)
class VariantHistory:
    """What the history says about one variant (summarised over its cells)."""

    since: str
    timeline: list[Tick]
    flaky: list[str] = field(default_factory=list)  # cell ids whose outcome flip-flopped in the window

    @property
    def flaky_title(self) -> str:
        return f"changed back and forth within the last {WINDOW} nights in: " + ", ".join(self.flaky)


def night_from_compat(compat: Compat, date: str, files: Mapping[str, str] | None = None) -> Night:
    """Tonight's line from a compat document, with the digests of the run files it was merged from (``files``)."""
    cells = tuple(c.id for c in compat.cells)
    outcomes = {}
    for variant in compat.variants:
        per_cell = compat.entries(variant.id)
        outcomes[variant.id] = "".join(per_cell[c].outcome.code if c in per_cell else ABSENT for c in cells)
    return Night(
        schema=HISTORY_SCHEMA,
        date=date,
        commit=compat.commit,
        profile=compat.profile,
        cells=cells,
        outcomes=outcomes,
        files=dict(files or {}),
    )


def load_history(path: Path) -> list[Night]:
    """Every night in ``path``, oldest first; a missing file is a new, empty history."""
    if not os.path.lexists(path):
        return []
    fix = f"move it aside (mv {path} {path}.bad) to start a new history, or restore it from the last nightly's artifact"
    nights = []
    for number, line in enumerate(read_text(path, "history", fix=fix).splitlines(), 1):
        if not line.strip():
            continue
        try:
            nights.append(_DECODER.decode(line))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            msg = f"{path}:{number}: corrupt history line ({exc}); {fix}"
            raise BugmatrixError(msg) from exc
    return sorted(nights, key=lambda n: n.date)


def append_night(nights: list[Night], night: Night, keep: int = KEEP_NIGHTS) -> list[Night]:
    """``nights`` plus ``night`` (replacing one of the same date and profile); per profile, the last ``keep`` only."""
    kept = [n for n in nights if (n.date, n.profile) != (night.date, night.profile)] + [night]
    ordered = sorted(kept, key=lambda n: n.date)
    own = [n for n in ordered if n.profile == night.profile][-keep:]
    return sorted([n for n in ordered if n.profile != night.profile] + own, key=lambda n: n.date)


def nights_of(nights: list[Night], profile: str) -> list[Night]:
    """The nights of one profile, oldest first: what that profile's page is summarised from."""
    return [n for n in nights if n.profile == profile]


def history_text(nights: Iterable[Night]) -> str:
    """The history file's text (one JSON line per night); the report writes it with its other outputs, all or nothing."""
    return "".join(json.dumps(msgspec.to_builtins(n), separators=(",", ":")) + "\n" for n in nights)


def write_history(path: Path, nights: Iterable[Night]) -> None:
    """Only the history, atomically (the benchmark, tools); the report writes it together with its other outputs."""
    write_text_atomic(path, history_text(nights))


def _changes(last: dict[str, str], cells: tuple[str, ...], letters: str) -> list[tuple[str, str, str]]:
    """(cell, before, after) per cell whose outcome differs from its last real one in ``last`` (a gap keeps it; updated)."""
    changes = []
    for cell, letter in zip(cells, letters, strict=True):
        if letter in GAPS:
            continue  # F, missing, R is a change F -> R on the night of R; F, missing, F is none
        old = last.get(cell)
        if old is not None and old != letter:
            changes.append((cell, old, letter))
        last[cell] = letter
    return changes


def _tick(night: Night, state: str, changes: list[tuple[str, str, str]]) -> Tick:
    detail = "; ".join(f"{c}: {WORDS.get(o, o)} → {WORDS.get(n, n)}" for c, o, n in changes[:5])
    more = f" (+{len(changes) - 5} more)" if len(changes) > 5 else ""
    title = {
        "first": "first night in the history",
        "same": "unchanged",
        "missing": "a planned result is missing (not recorded); not counted as a change",
    }.get(state, detail + more)
    return Tick(night.date, state, f"{night.date} ({night.commit}): {title}")


def summarise(nights: list[Night], window: int = WINDOW) -> dict[str, VariantHistory]:
    """Per variant of the last night: since when unchanged, the last ``window`` nights, its flaky cells."""
    if not nights:
        return {}
    first_recent = max(0, len(nights) - window)
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    columns = [shared.setdefault(n.cells, n.cells) for n in nights]  # one tuple per distinct list of cells: compared by identity
    summary = {}
    for variant in nights[-1].outcomes:
        since: str | None = None
        last: dict[str, str] = {}  # cell -> its last real outcome
        fed: tuple[tuple[str, ...], str] | None = None  # the cells and letters of the variant's night before
        runs: dict[str, list[str]] = {}  # cell -> its outcome entering the window, then one entry per change in it
        flaky: dict[str, None] = {}
        ticks = []
        for i, night in enumerate(nights):
            recent = i >= first_recent
            letters = night.outcomes.get(variant)
            if letters is None:
                if recent:
                    ticks.append(Tick(night.date, "none", f"{night.date}: not in this night's report"))
                continue
            # Most nights nothing changed: compared in one step (the cells by identity).
            changes = [] if fed is not None and fed[0] is columns[i] and fed[1] == letters else _changes(last, columns[i], letters)
            fed = (columns[i], letters)
            if since is None or changes:
                state = "first" if since is None else "changed"
                since = night.date
            else:
                state = "missing" if Outcome.MISSING.code in letters else "same"
            if not recent:
                continue
            flapped = False
            for cell, old, new in changes:
                seen = runs.setdefault(cell, [old])
                if new in seen:
                    flapped = True
                    if len(seen) >= FLIPS:  # this change is at least the FLIPS-th in the window
                        flaky[cell] = None
                seen.append(new)
            ticks.append(_tick(night, "flap" if flapped else state, changes))
        summary[variant] = VariantHistory(since or nights[-1].date, ticks, list(flaky))
    return summary


def unchanged_since(nights: Sequence[Night], cell: str, variants: Iterable[str]) -> str | None:
    """The first night from which each variant has had its last night's outcome in ``cell`` (``missing`` counts); None without one."""
    if not nights or cell not in nights[-1].cells:
        return None
    last = nights[-1]
    index = last.cells.index(cell)
    wanted = {v: last.outcomes[v][index] for v in variants if v in last.outcomes}
    if not wanted:
        return None
    since = last.date
    for night in reversed(nights[:-1]):
        if cell not in night.cells:
            break
        at = night.cells.index(cell)
        if any(night.outcomes.get(v, "")[at : at + 1] != letter for v, letter in wanted.items()):
            break
        since = night.date
    return since


def outcome_runs(nights: Sequence[Night], variant: str, cell: str) -> list[tuple[str, str]]:
    """(first night, outcome) of each run of one outcome of a variant in a cell, oldest first; gaps skipped."""
    runs: list[tuple[str, str]] = []
    for night in nights:
        letters = night.outcomes.get(variant)
        if letters is None or cell not in night.cells:
            continue
        letter = letters[night.cells.index(cell)]
        if letter in GAPS or (runs and runs[-1][1] == WORDS.get(letter, letter)):
            continue
        runs.append((night.date, WORDS.get(letter, letter)))
    return runs


def flaky_pairs(summary: Mapping[str, VariantHistory]) -> frozenset[tuple[str, str]]:
    """(variant id, cell id) pairs that flip-flopped: the baseline diff reports their changes as "flaky"."""
    return frozenset((variant, cell) for variant, h in summary.items() for cell in h.flaky)


def reuse_facts(path: Path) -> tuple[frozenset[tuple[str, str]], dict[str, tuple[str, str]]]:
    """What reuse takes from the history (none without a file): the flaky pairs of any profile, and each run file a night's
    report read (``runs/<cell>.json``) -> (that night's date, its digest), the newest night's record."""
    nights = load_history(path)  # oldest first: a later night's record of the same path replaces an earlier one's
    pairs = frozenset().union(*(flaky_pairs(summarise(nights_of(nights, profile))) for profile in {n.profile for n in nights}))
    return pairs, {path: (night.date, digest) for night in nights for path, digest in night.files.items()}
