"""What changed since the baseline: regressions first.

A baseline is an earlier compat document (``reports/baseline.json``). Entries
are compared per (variant, cell); a regression is also taken from a run's own
verdict (the expectation said fixed, the bug is back), so a regression shows
even on the first run without a baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SEVERITY", "Change", "diff_against_baseline", "summary_lines"]

FAILURES = {"different", "crashed", "timeout"}
#: Display order: what needs a maintainer first.
SEVERITY = ("regression", "new-failure-mode", "no-longer-installs", "unexpected-fix", "new-cell", "new-variant")


@dataclass(frozen=True)
class Change:
    """One difference between the baseline and this run."""

    kind: str
    variant_id: str
    cell_id: str
    before: str | None
    after: str
    message: str


def _classify(before: str | None, after: str) -> str | None:
    if before == after:
        return None
    if before == "fixed" and after == "reproduced":
        return "regression"
    if after in FAILURES:
        return "new-failure-mode"
    if after == "install-failed":
        return "no-longer-installs"
    if before == "reproduced" and after == "fixed":
        return "unexpected-fix"
    return None


def diff_against_baseline(current: dict[str, Any], baseline: dict[str, Any] | None) -> list[Change]:
    """Changes from ``baseline`` to ``current``, most severe first."""
    changes: dict[tuple[str, str, str], Change] = {}
    old = (baseline or {}).get("results", {})
    old_cells = {c["id"] for c in (baseline or {}).get("cells", [])}
    for variant_id, per_cell in current.get("results", {}).items():
        for cell_id, entry in per_cell.items():
            before = old.get(variant_id, {}).get(cell_id, {}).get("outcome")
            kind = _classify(before, entry["outcome"]) if baseline is not None else None
            if entry.get("verdict") == "regression":
                kind = "regression"
            if kind:
                changes[(kind, variant_id, cell_id)] = Change(kind, variant_id, cell_id, before, entry["outcome"], entry.get("message", ""))
    if baseline is not None:
        for cell in current.get("cells", []):
            if cell["id"] not in old_cells:
                changes[("new-cell", "", cell["id"])] = Change("new-cell", "", cell["id"], None, "", "not in the baseline")
        for variant in current.get("variants", []):
            if variant["id"] not in old:
                changes[("new-variant", variant["id"], "")] = Change("new-variant", variant["id"], "", None, "", "not in the baseline")
    return sorted(changes.values(), key=lambda c: (SEVERITY.index(c.kind), c.variant_id, c.cell_id))


def summary_lines(changes: list[Change]) -> list[str]:
    """One line per regression, for the CLI and CI logs."""
    return [
        f"{c.variant_id} in {c.cell_id}: {c.before or 'expected fixed'} -> {c.after}: {c.message.splitlines()[0] if c.message else ''}"
        for c in changes
        if c.kind == "regression"
    ]
