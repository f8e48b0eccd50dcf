"""What changed since the baseline: regressions first.

A baseline is an earlier compat document (``reports/baseline.json``). Entries
are compared per (variant, cell). A regression is also taken from the run's
own verdict (the expectation said fixed, the bug is back), so a regression
shows even on the first run, without a baseline, and cannot be hidden by
refreshing the baseline while the bug is still there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["INFORMATIONAL", "SEVERITY", "Change", "diff_against_baseline", "summary_lines"]

#: Outcomes that mean "it failed some other way than the documented bug".
FAILURES = frozenset({"different", "crashed", "timeout"})
#: Display order: what needs a maintainer first.
SEVERITY = ("regression", "new-failure-mode", "no-longer-installs", "unexpected-fix", "new-cell", "new-variant")
#: Kinds that only say the matrix grew; renderers count them instead of listing them.
INFORMATIONAL = frozenset({"new-cell", "new-variant"})


@dataclass(frozen=True)
class Change:
    """One difference between the baseline and this run.

    ``before`` is None where the baseline has no entry (a new cell or variant,
    or no baseline at all); ``message`` is the current entry's message, the
    first thing a maintainer reads to decide whether the change is real.
    """

    kind: str
    variant_id: str
    cell_id: str
    before: str | None
    after: str
    message: str


def _classify(before: str | None, after: str) -> str | None:
    """The change kind for one entry, or None when nothing worth saying changed."""
    if before == after:
        return None
    if before == "fixed" and after == "reproduced":
        return "regression"
    if after in FAILURES:
        # Also from "no entry": a new cell that crashes is news, not noise.
        return "new-failure-mode"
    if after == "install-failed":
        # Only what did install before; a new cell that never installed is a new-cell.
        return "no-longer-installs" if before is not None else None
    if before == "reproduced" and after == "fixed":
        return "unexpected-fix"
    return None


def diff_against_baseline(current: dict[str, Any], baseline: dict[str, Any] | None) -> list[Change]:
    """Changes from ``baseline`` to ``current``, most severe first.

    Without a baseline only the run's own regression verdicts are reported:
    everything else would be "new" and drown the one line that matters.
    """
    changes: dict[tuple[str, str], Change] = {}
    old = (baseline or {}).get("results", {})
    for variant_id, per_cell in current.get("results", {}).items():
        for cell_id, entry in per_cell.items():
            before = old.get(variant_id, {}).get(cell_id, {}).get("outcome")
            after = entry["outcome"]
            kind = _classify(before, after) if baseline is not None else None
            if entry.get("verdict") == "regression":
                kind = "regression"  # the expectation outranks the baseline: it is the documented truth
            if kind:
                changes[(variant_id, cell_id)] = Change(kind, variant_id, cell_id, before, after, entry.get("message", ""))
    listed = list(changes.values())
    if baseline is not None:
        old_cells = {c["id"] for c in baseline.get("cells", [])}
        listed += [
            Change("new-cell", "", c["id"], None, "", "not in the baseline") for c in current.get("cells", []) if c["id"] not in old_cells
        ]
        listed += [
            Change("new-variant", v["id"], "", None, "", "not in the baseline") for v in current.get("variants", []) if v["id"] not in old
        ]
    return sorted(listed, key=lambda c: (SEVERITY.index(c.kind), c.variant_id, c.cell_id))


def summary_lines(changes: list[Change]) -> list[str]:
    """One line per regression, for the CLI and CI logs."""
    lines = []
    for c in changes:
        if c.kind != "regression":
            continue
        first = c.message.strip().splitlines()[0] if c.message.strip() else ""
        # A regression already in the baseline still fails the run; say what was expected, not "reproduced -> reproduced".
        was = c.before if c.before not in (None, c.after) else "expected fixed"
        lines.append(f"{c.variant_id} in {c.cell_id}: {was} -> {c.after}: {first}")
    return lines
