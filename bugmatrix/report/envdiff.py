"""Which distributions changed between two runs of one cell: the "why" behind an overnight change.

The run file records every installed distribution (``bugmatrix.cell.environment``)
under ``environment["distributions"]``; the compat document keeps it per cell.
When a variant's outcome in a cell differs from the baseline's, these lines
say what moved between the two runs of that cell ("numpy 2.3.4 → 2.4.0",
"+tokenizers 0.22.2"); :func:`explain_changes` puts them into the document
(``compat["moved"]``) for the HTML and the step summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["cell_distribution_changes", "distribution_changes", "distributions_of", "environment_changes", "explain_changes"]


def distribution_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``name old → new``, ``+name version`` (added), ``-name version`` (removed), sorted by name."""
    lines = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            lines.append(f"+{name} {new}")
        elif new is None:
            lines.append(f"-{name} {old}")
        else:
            lines.append(f"{name} {old} → {new}")
    return lines


def distributions_of(cell: Mapping[str, Any]) -> dict[str, str] | None:
    """A compat cell's recorded distributions; None for a cell recorded before they were (or never installed).

    A wheel build tag is part of the version here (``2.10.0 (build 3)``): a rebuilt
    wheel under an unchanged version is exactly the change this report must show.
    """
    environment = cell.get("environment") or {}
    found, builds = environment.get("distributions"), environment.get("wheel_builds") or {}
    if not isinstance(found, Mapping):
        return None
    return {name: f"{version} (build {builds[name]})" if name in builds else version for name, version in found.items()}


def cell_distribution_changes(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between two records of the same cell (baseline vs current compat cells).

    Empty when nothing changed *or* when either side recorded no distributions:
    an old baseline cannot say, and the report must not invent a difference.
    """
    if baseline.get("id") != current.get("id"):
        msg = f"comparing cell {baseline.get('id')!r} with {current.get('id')!r}: pass two records of one cell"
        raise ValueError(msg)
    before, after = distributions_of(baseline), distributions_of(current)
    if before is None or after is None:
        return []
    return distribution_changes(before, after)


def environment_changes(baseline: Mapping[str, Any] | None, current: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per cell id, the distribution changes since the baseline compat document (cells with none left out)."""
    old = {c["id"]: c for c in (baseline or {}).get("cells", [])}
    changes = {c["id"]: cell_distribution_changes(old[c["id"]], c) for c in current.get("cells", []) if c["id"] in old}
    return {cell: lines for cell, lines in changes.items() if lines}


def explain_changes(baseline: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every (variant, cell) whose outcome differs from the baseline's, with what moved in that cell.

    ``moved`` is empty when the two runs recorded the same distributions (or
    either recorded none): then the cause is not below the pins. Missing
    results are left to the diff (a hole has no environment to compare).
    """
    if not baseline:
        return []
    moved = environment_changes(baseline, current)
    old = baseline.get("results", {})
    explained = []
    for variant, per_cell in current.get("results", {}).items():
        for cell, entry in per_cell.items():
            before = old.get(variant, {}).get(cell)
            if before is None or before["outcome"] == entry["outcome"] or entry["outcome"] == "missing":
                continue
            explained.append({
                "variant": variant, "cell": cell, "before": before["outcome"], "after": entry["outcome"],
                "moved": moved.get(cell, []),
            })  # fmt: skip
    return sorted(explained, key=lambda e: (e["cell"], e["variant"]))
