"""The new-release section: how each variant fares in a release the suite has not judged before, installed or not.

A release is *new* when the baseline pins no cell to it (without a baseline: nothing judged its cells, or ``latest``
resolved to it); each variant is compared with the previous release of the axis in the same run. A pin new to the
matrix but not just shipped is an addition, said quietly; a new release that does not install fails the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.documents.compat import Cell, Entry, InstallStatus, NoteKind, ReleaseNote
from bugmatrix.report.diff import Change, ChangeKind
from bugmatrix.report.model import Compat
from bugmatrix.versions import parse_version

__all__ = ["ReleaseGroup", "install_changes", "is_addition", "new_releases", "one_line_reason", "release_groups", "release_notes"]

_UNJUDGED = frozenset({Verdict.NEW, Verdict.NOT_RUN, None})
#: How a note names its pin: a release upstream shipped, or a pin this matrix added (a new axis, an older release).
NEW, NEW_IN_MATRIX = "(new)", "(new in this matrix)"


def one_line_reason(reason: str) -> str:
    """uv's reason in one line: its "Because ..." sentence, else its last line that says something."""
    lines = [line.strip().lstrip("×╰─▶│ ").strip() for line in reason.splitlines()]
    # uv's own chatter: where it installs ("... environment at: <venv>") and its hints are not the reason.
    lines = [line for line in lines if line and "environment at:" not in line and not line.lower().startswith(("hint:", "help:"))]
    if not lines:
        return "no reason recorded"
    because = next((line for line in lines if "because" in line.lower()), None)
    text = because or lines[-1]
    return text.removeprefix("cause:").removeprefix("error:").strip()


def _tracked(compat: Compat) -> set[tuple[str, str]]:
    return {(a, t.resolved) for a, t in compat.tracking.axes.items()} | {
        (a, t.resolved) for c in compat.cells for a, t in c.tracked.items()
    }


def new_releases(compat: Compat, baseline: Compat | None) -> list[tuple[str, str]]:
    """(axis, version) pairs new in this run, in the document's cell order."""
    interpreter = compat.interpreter
    before = {pair for c in baseline.cells for pair in c.pins.items()} if baseline else set()
    pins_of = {c.id: c.pins for c in compat.cells}
    # Per cell first (a full report holds ~10^4-10^5 entries), then the cells' pins.
    ran_cells: set[str] = set()  # a release nothing ran in is judged "new" by its tracking, not by verdicts
    judged_cells: set[str] = set()
    for per_cell in compat.results.values():
        for cell_id, entry in per_cell.items():
            if cell_id in judged_cells and cell_id in ran_cells:
                continue  # most cells are both after a few variants: no need to look at every entry
            if entry.outcome.ran:
                ran_cells.add(cell_id)
            if entry.verdict not in _UNJUDGED:
                judged_cells.add(cell_id)
    ran = {(a, v) for cid in ran_cells for a, v in pins_of.get(cid, {}).items()}
    judged = {(a, v) for cid in judged_cells for a, v in pins_of.get(cid, {}).items()}
    tracked = _tracked(compat)
    uninstalled = {(a, v) for c in compat.cells if c.failed for a, v in c.pins.items()}
    found: list[tuple[str, str]] = []
    for cell in compat.cells:
        for pair in cell.pins.items():
            if pair[0] == interpreter or pair in found:
                continue
            unjudged = pair not in judged and (pair in ran or (pair in tracked and pair in uninstalled))
            if (baseline and pair not in before) or (not baseline and unjudged):
                found.append(pair)
    return found


def is_addition(compat: Compat, baseline: Compat | None, axis: str, version: str) -> bool:
    """A pin new to this run that upstream did not just ship: a new axis, or older than a release already judged."""
    if (axis, version) in _tracked(compat):
        return False
    mine = parse_version(version)
    reference = baseline if baseline is not None else compat
    # Only cells that installed judged a release: a pin that never installed (torch 9.0.0) is no newer release than tonight's.
    known = [v for c in reference.cells if c.install.status is InstallStatus.OK and (v := parse_version(c.pins.get(axis, ""))) is not None]
    if not known:
        return baseline is not None  # no earlier cell pins the axis: a new axis (without a baseline: nothing to tell)
    return mine is not None and mine < max(known)


def _others(cell: Cell, axis: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((a, v) for a, v in cell.pins.items() if a != axis))


def _previous_index(cells: Sequence[Cell], axis: str) -> dict[tuple, list[tuple[Version, str, str]]]:
    """Cells by their pins other than ``axis``: (the ``axis`` version, cell id, the pin as written)."""
    index: dict[tuple, list[tuple[Version, str, str]]] = {}
    for cell in cells:
        if axis in cell.pins and (version := parse_version(cell.pins[axis])) is not None:
            index.setdefault(_others(cell, axis), []).append((version, cell.id, cell.pins[axis]))
    return index


def _previous(
    index: dict[tuple, list[tuple[Version, str, str]]], cell: Cell, axis: str, ran: Mapping[str, Entry]
) -> tuple[str, str] | None:
    """(pin, cell id) of the nearest lower ``axis`` version with the same other pins where the variant ran."""
    mine = parse_version(cell.pins.get(axis, ""))
    lower = [(v, cid, pin) for v, cid, pin in index.get(_others(cell, axis), []) if mine is not None and v < mine and cid in ran]
    nearest = max(lower, default=None)  # ties (a cpu and a cuda cell) as the cell ids sort
    return (nearest[2], nearest[1]) if nearest else None


def _classify(entry: Entry, previous: Outcome | None) -> NoteKind:
    outcome = entry.outcome
    if previous is None:
        return NoteKind.FIRST
    if outcome is previous:
        return NoteKind.SAME
    if {outcome, previous} == {Outcome.REPRODUCED, Outcome.FIXED} and entry.as_declared:
        return NoteKind.DECLARED
    if outcome is Outcome.REPRODUCED and previous is Outcome.FIXED:
        return NoteKind.REGRESSION_CANDIDATE
    if outcome is Outcome.FIXED and previous is Outcome.REPRODUCED:
        return NoteKind.FIX_CANDIDATE
    return NoteKind.CHANGED


_TAILS = {
    NoteKind.SAME: "{outcome}, as in {previous_version}",
    NoteKind.REGRESSION_CANDIDATE: "{outcome}, but fixed in {previous_version} — a regression candidate",
    NoteKind.FIX_CANDIDATE: "{outcome}, but reproduced in {previous_version} — fixed in this release",
    NoteKind.DECLARED: "{outcome}, but {previous_outcome} in {previous_version} — as its expectation declares",
    NoteKind.CHANGED: "{outcome}, but {previous_outcome} in {previous_version} — changed",
    NoteKind.FIRST: "{outcome} (no earlier {axis} release in this run to compare with)",
}


def _where(compat: Compat, cell: Cell, axis: str, holders: int) -> str:
    others = [(a, v) for a, v in cell.pins.items() if a not in (axis, compat.interpreter)]
    return f" with {' '.join(f'{compat.short(a)} {v}' for a, v in others)}" if holders > 1 and others else ""


def release_notes(compat: Compat, baseline: Compat | None) -> list[ReleaseNote]:
    """Every (new release, variant, cell) that ran, compared with the previous release of that axis; every such cell that did not install."""
    releases = new_releases(compat, baseline)
    if not releases:
        return []
    ran_by_variant = {v.id: {cid: e for cid, e in compat.entries(v.id).items() if e.outcome.ran} for v in compat.variants}
    notes: list[ReleaseNote] = []
    indexes: dict[str, dict[tuple, list[tuple[Version, str, str]]]] = {}
    for axis, version in releases:
        index = indexes.setdefault(axis, _previous_index(compat.cells, axis))
        holders = [c for c in compat.cells if c.pins.get(axis) == version]
        new = NEW_IN_MATRIX if is_addition(compat, baseline, axis, version) else NEW
        for cell in holders:
            if cell.failed:
                reason = one_line_reason(cell.install.reason)
                text = f"{axis} {version} {new}{_where(compat, cell, axis, len(holders))}: does not install in {cell.id}: {reason}"
                notes.append(
                    ReleaseNote(axis, version, "", cell.id, Outcome.INSTALL_FAILED, NoteKind.DOES_NOT_INSTALL, text, reason=reason)
                )
        for variant in compat.variants:
            ran = ran_by_variant[variant.id]
            for cell in holders:
                entry = ran.get(cell.id)
                if entry is None:
                    continue
                previous = _previous(index, cell, axis, ran)
                previous_version = previous[0] if previous else None
                previous_outcome = ran[previous[1]].outcome if previous else None
                kind = _classify(entry, previous_outcome)
                tail = _TAILS[kind].format(
                    outcome=entry.outcome, previous_version=previous_version, previous_outcome=previous_outcome, axis=axis
                )
                text = f"{axis} {version} {new}{_where(compat, cell, axis, len(holders))}: {variant.id} {tail}"
                notes.append(ReleaseNote(axis, version, variant.id, cell.id, entry.outcome, kind, text, previous_version, previous_outcome))
    return notes


@dataclass(frozen=True)
class ReleaseGroup:
    """The notes of one new release, for reading: the exceptions spelled out (regression candidates first), the rest counted."""

    axis: str
    version: str
    total: int = 0  # results that ran in the release's cells
    same: int = 0
    first: int = 0
    previous: tuple[str, ...] = ()
    notable: tuple[ReleaseNote, ...] = ()
    not_installed: tuple[ReleaseNote, ...] = ()
    addition: bool = False  # new to this matrix, not a new upstream release: said quietly, after the findings

    @property
    def installs(self) -> bool:
        """False when no cell of the release could be built."""
        return self.total > 0 or not self.not_installed

    @property
    def headline(self) -> str:
        """``torch 2.16.0 (new): 44 of 46 results as in 2.15.0; 2 differ`` or ``torch 2.99.0 (new): does not install in 2 cells: …``."""
        head, failed = f"{self.axis} {self.version} {NEW_IN_MATRIX if self.addition else NEW}: ", len(self.not_installed)
        previous = ", ".join(self.previous) or "the previous release"
        parts = [f"{self.same} of {self.total} results as in {previous}"] if self.total or not failed else []  # none ran: only why
        parts += [f"{len(self.notable)} differ"] if self.notable else []
        parts += [f"{self.first} with no earlier {self.axis} release in this run to compare"] if self.first else []
        parts += [f"does not install in {failed} cell{'s' if failed != 1 else ''}: {self.not_installed[0].reason}"] if failed else []
        return head + "; ".join(parts)


def release_groups(notes: Iterable[ReleaseNote], compat: Compat, baseline: Compat | None) -> list[ReleaseGroup]:
    """The notes per new release: one that does not install first, then upstream releases (regression candidates first), then additions."""
    by_release: dict[tuple[str, str], list[ReleaseNote]] = {}
    for note in notes:
        by_release.setdefault((note.axis, note.version), []).append(note)
    built = []
    for (axis, version), group in by_release.items():
        ran = [n for n in group if n.kind is not NoteKind.DOES_NOT_INSTALL]
        previous = dict.fromkeys(n.previous_version for n in ran if n.kind is NoteKind.SAME)
        notable = [n for n in ran if n.kind not in (NoteKind.FIRST, NoteKind.SAME)]
        built.append(
            ReleaseGroup(
                axis,
                version,
                len(ran),
                sum(n.kind is NoteKind.SAME for n in ran),
                sum(n.kind is NoteKind.FIRST for n in ran),
                tuple(sorted(previous, key=lambda v: parse_version(v) or Version("0"))),
                tuple(sorted(notable, key=lambda n: n.kind is not NoteKind.REGRESSION_CANDIDATE)),
                tuple(n for n in group if n.kind is NoteKind.DOES_NOT_INSTALL),
                is_addition(compat, baseline, axis, version),
            )
        )
    regression_candidate = NoteKind.REGRESSION_CANDIDATE
    return sorted(built, key=lambda g: (g.installs, g.addition, all(n.kind is not regression_candidate for n in g.notable)))


def install_changes(groups: Iterable[ReleaseGroup]) -> list[Change]:
    """One failing change per cell of a new release that did not install: the report's exit code must see it."""
    return [
        Change(ChangeKind.RELEASE_DOES_NOT_INSTALL, "", note.cell, None, Outcome.INSTALL_FAILED, note.text)
        for group in groups
        for note in group.not_installed
    ]
