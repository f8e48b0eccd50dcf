"""The new-release section: how each variant fares in a release the suite has not judged before.

A release is *new* in a run when the baseline holds no cell that pins it (the
first nightly after ``latest`` moved), or when no expectation covers any
result in its cells (every entry there has the verdict ``new``). For every
variant that ran in a cell pinning a new release, its outcome is compared
with its outcome in the *previous release of that axis that the run holds*:
the cell with the same other pins and the nearest lower version of that axis.

    torch 2.16.0 (new): autocast_cache::core fixed, as in 2.15.0
    torch 2.16.0 (new): autocast_cache::core reproduced, but fixed in 2.15.0 — a regression candidate

Reads only the compat document and the baseline; the notes go into the
document (``compat["releases"]``) for the HTML and the step summary to lead with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.report import short

__all__ = ["ReleaseNote", "group_headline", "new_releases", "release_groups", "release_notes"]

INTERPRETER = "python"
_RAN = {o.value: o.ran for o in Outcome}  # compat entries hold outcome values (merge.py), as the JSON does
_UNJUDGED = frozenset(
    {Verdict.NEW.value, Verdict.NOT_RUN.value, None, ""}
)  # its "releases" are interpreters, not upstream releases of the stack under test


@dataclass(frozen=True)
class ReleaseNote:
    """One variant in one cell of a new release, against the previous release of that axis."""

    axis: str
    version: str
    variant: str
    cell: str
    outcome: str
    previous_version: str | None
    previous_outcome: str | None
    kind: str  # "same", "regression-candidate", "fix-candidate", "changed", "first"
    text: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _pinned(compat: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    return {(a, str(v)) for c in (compat or {}).get("cells", []) for a, v in (c.get("pins") or {}).items() if a != INTERPRETER}


def new_releases(compat: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(axis, version) pairs new in this run, in the document's cell order."""
    before = _pinned(baseline) if baseline else set()
    pins_of = {c["id"]: c.get("pins") or {} for c in compat.get("cells", [])}
    # Per cell first (a full report holds ~10^4-10^5 entries), then the cells' pins.
    ran_cells: set[str] = set()  # a release nothing ran in (install-failed) is not judged "new" by verdicts
    judged_cells: set[str] = set()
    for per_cell in compat.get("results", {}).values():
        for cell_id, entry in per_cell.items():
            if _RAN[entry["outcome"]]:
                ran_cells.add(cell_id)
            if entry.get("verdict") not in _UNJUDGED:
                judged_cells.add(cell_id)
    ran = {(a, str(v)) for cid in ran_cells for a, v in pins_of.get(cid, {}).items()}
    judged = {(a, str(v)) for cid in judged_cells for a, v in pins_of.get(cid, {}).items()}
    found: list[tuple[str, str]] = []
    for cell in compat.get("cells", []):
        for axis, version in (cell.get("pins") or {}).items():
            pair = (axis, str(version))
            if axis == INTERPRETER or pair in found:
                continue
            if (baseline and pair not in before) or (pair in ran and pair not in judged):
                found.append(pair)
    return found


def _previous_index(cells: list[Mapping[str, Any]], axis: str) -> dict[tuple, list[tuple[Version, str, str]]]:
    """Cells by their pins other than ``axis`` (the same pin set), each list sorted by the ``axis`` version."""
    index: dict[tuple, list[tuple[Version, str, str]]] = {}  # (version, cell id, the pin as written)
    for cell in cells:
        pins = cell.get("pins") or {}
        version = _version(str(pins.get(axis, "")))
        if axis not in pins or version is None:
            continue
        key = tuple(sorted((a, str(v)) for a, v in pins.items() if a != axis))
        index.setdefault(key, []).append((version, cell["id"], str(pins[axis])))
    for entries in index.values():
        entries.sort()
    return index


def _previous(
    index: dict[tuple, list[tuple[Version, str, str]]], cell: Mapping[str, Any], axis: str, ran: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(pin, cell id) of the cell with the same other pins and the nearest lower ``axis`` version in which the variant ran."""
    pins = cell.get("pins") or {}
    mine = _version(str(pins.get(axis, "")))
    key = tuple(sorted((a, str(v)) for a, v in pins.items() if a != axis))
    best = None
    for version, cid, pin in index.get(key, []):
        if mine is None or version >= mine:
            break
        if cid in ran:
            best = (pin, cid)
    return best


def _classify(outcome: str, previous: str | None) -> str:
    if previous is None:
        return "first"
    if outcome == previous:
        return "same"
    if outcome == Outcome.REPRODUCED.value and previous == Outcome.FIXED.value:
        return "regression-candidate"
    if outcome == Outcome.FIXED.value and previous == Outcome.REPRODUCED.value:
        return "fix-candidate"
    return "changed"


_TAILS = {
    "same": "{outcome}, as in {previous_version}",
    "regression-candidate": "{outcome}, but fixed in {previous_version} — a regression candidate",
    "fix-candidate": "{outcome}, but reproduced in {previous_version} — fixed in this release",
    "changed": "{outcome}, but {previous_outcome} in {previous_version} — changed",
    "first": "{outcome} (no earlier {axis} release in this run to compare with)",
}


def release_notes(compat: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[ReleaseNote]:
    """Every (new release, variant, cell) that ran, compared with the previous release of that axis."""
    cells = list(compat.get("cells", []))
    results = compat.get("results", {})
    # What ran, per variant, once: a full profile has ~70 cells x ~50 variants x every new release.
    ran_by_variant = {
        v["id"]: {cid: e for cid, e in results.get(v["id"], {}).items() if Outcome(e["outcome"]).ran} for v in compat.get("variants", [])
    }
    notes: list[ReleaseNote] = []
    indexes: dict[str, dict[tuple, list[tuple[Version, str, str]]]] = {}
    for axis, version in new_releases(compat, baseline):
        index = indexes.setdefault(axis, _previous_index(cells, axis))
        holders = [c for c in cells if str((c.get("pins") or {}).get(axis)) == version]
        for variant in compat.get("variants", []):
            ran = ran_by_variant[variant["id"]]
            for cell in holders:
                if cell["id"] not in ran:
                    continue
                outcome = ran[cell["id"]]["outcome"]
                previous = _previous(index, cell, axis, ran)
                previous_version = previous[0] if previous else None
                previous_outcome = ran[previous[1]]["outcome"] if previous else None
                kind = _classify(outcome, previous_outcome)
                # Name the other pins only where the release has several cells (pl 2.0.3 vs pl 2.6.6).
                others = [(a, v) for a, v in (cell.get("pins") or {}).items() if a not in (axis, INTERPRETER)]
                where = f" with {' '.join(f'{short(compat, a)} {v}' for a, v in others)}" if len(holders) > 1 and others else ""
                tail = _TAILS[kind].format(outcome=outcome, previous_version=previous_version, previous_outcome=previous_outcome, axis=axis)
                text = f"{axis} {version} (new){where}: {variant['id']} {tail}"
                notes.append(ReleaseNote(axis, version, variant["id"], cell["id"], outcome, previous_version, previous_outcome, kind, text))
    return notes


def release_groups(notes: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The notes per new release, for reading: a count of results as before, and every other note spelled out.

    At the full profile a first run has hundreds of notes, nearly all "as in
    the previous release"; a maintainer needs the exceptions, so those are
    listed (regression candidates first) and the rest are one count.
    ``{"axis", "version", "total", "same", "first", "previous": [versions], "notable": [notes]}``,
    releases with a regression candidate first, else in first-seen order. "first" (nothing to compare
    with) is a count too: it says only that the run holds no earlier release beside it.
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for note in notes:
        key = (note["axis"], note["version"])
        group = groups.setdefault(
            key, {"axis": key[0], "version": key[1], "total": 0, "same": 0, "first": 0, "previous": [], "notable": []}
        )
        group["total"] += 1
        if note["kind"] == "first":
            group["first"] += 1
        elif note["kind"] == "same":
            group["same"] += 1
            if note["previous_version"] not in group["previous"]:
                group["previous"].append(note["previous_version"])
        else:
            group["notable"].append(note)
    for group in groups.values():
        group["notable"].sort(key=lambda n: n["kind"] != "regression-candidate")
        group["previous"].sort(key=lambda v: _version(str(v)) or Version("0"))
    return sorted(groups.values(), key=lambda g: not any(n["kind"] == "regression-candidate" for n in g["notable"]))


def group_headline(group: Mapping[str, Any]) -> str:
    """``torch 2.16.0 (new): 44 of 46 results as in 2.15.0; 2 differ; 3 with no earlier release to compare``."""
    previous = ", ".join(group["previous"])
    head = (
        f"{group['axis']} {group['version']} (new): {group['same']} of {group['total']} results as in {previous or 'the previous release'}"
    )
    if group["notable"]:
        head += f"; {len(group['notable'])} differ"
    if group["first"]:
        head += f"; {group['first']} with no earlier {group['axis']} release in this run to compare"
    return head
