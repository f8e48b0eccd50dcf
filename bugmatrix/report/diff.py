"""What changed since the baseline: missing results and regressions first.

A baseline is an earlier compat document (``reports/baseline.json``). Entries
are compared per (variant, cell). A regression is also taken from the run's
own verdict (the expectation said fixed, the bug is back), so a regression
shows even on the first run, without a baseline, and cannot be hidden by
refreshing the baseline while the bug is still there. Likewise a *missing*
result (planned, but no run recorded it) is reported with or without a
baseline: a hole in the table is never silent.

The history (:mod:`bugmatrix.report.history`) can name (variant, cell) pairs
that flip back and forth across recent nights (the rule is in that module's
docstring). A regression, new failure mode or unexpected fix of such a pair
is listed as :attr:`ChangeKind.FLAKY` instead: still listed, right after the
regressions, in the page, compat.md and the step summary, but it does not fail
``--fail-on-regression`` every other night. A *missing* result is never
downgraded: a flaky cell that stops reporting is still a hole.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bugmatrix.cell.outcomes import Outcome, Verdict

__all__ = ["DOWNGRADED", "FAILING", "INFORMATIONAL", "Change", "ChangeKind", "diff_against_baseline", "flaky_lines", "summary_lines"]


class ChangeKind(enum.StrEnum):
    """Kinds of change, in display order: what needs a maintainer first."""

    MISSING = "missing"  # planned, but not recorded: a lost cell or a run that stopped early
    REGRESSION = "regression"
    FLAKY = "flaky"  # a regression / new failure mode / unexpected fix of a pair the history calls flaky
    NEW_FAILURE_MODE = "new-failure-mode"
    NO_LONGER_INSTALLS = "no-longer-installs"
    UNEXPECTED_FIX = "unexpected-fix"
    NEW_CELL = "new-cell"
    NEW_VARIANT = "new-variant"

    @property
    def severity(self) -> int:
        return list(ChangeKind).index(self)


#: Kinds that only say the matrix grew; renderers count them instead of listing them.
INFORMATIONAL = frozenset({ChangeKind.NEW_CELL, ChangeKind.NEW_VARIANT})
#: Kinds that fail ``report --fail-on-regression``.
FAILING = frozenset({ChangeKind.MISSING, ChangeKind.REGRESSION})
#: Kinds a flaky (variant, cell) is listed as FLAKY instead of; MISSING is deliberately not one of them.
DOWNGRADED = frozenset({ChangeKind.REGRESSION, ChangeKind.NEW_FAILURE_MODE, ChangeKind.UNEXPECTED_FIX})
#: Outcomes that mean "it failed some other way than the documented bug".
FAILURES = frozenset({Outcome.DIFFERENT, Outcome.CRASHED, Outcome.TIMEOUT})


@dataclass(frozen=True)
class Change:
    """One difference between the baseline and this run.

    ``before`` is None where the baseline has no entry (a new cell or variant,
    or no baseline at all); ``message`` is the current entry's message, the
    first thing a maintainer reads to decide whether the change is real.
    """

    kind: ChangeKind
    variant_id: str
    cell_id: str
    before: str | None
    after: str
    message: str


def _classify(before: str | None, after: str) -> ChangeKind | None:
    """The change kind for one entry, or None when nothing worth saying changed."""
    if before == after:
        return None
    if before == Outcome.FIXED and after == Outcome.REPRODUCED:
        return ChangeKind.REGRESSION
    if after in FAILURES:
        # Also from "no entry": a new cell that crashes is news, not noise.
        return ChangeKind.NEW_FAILURE_MODE
    if after == Outcome.INSTALL_FAILED:
        # Only what did install before; a new cell that never installed is a new-cell.
        return ChangeKind.NO_LONGER_INSTALLS if before is not None else None
    if before == Outcome.REPRODUCED and after == Outcome.FIXED:
        return ChangeKind.UNEXPECTED_FIX
    return None


def diff_against_baseline(
    current: dict[str, Any], baseline: dict[str, Any] | None, flaky: Collection[tuple[str, str]] = frozenset()
) -> list[Change]:
    """Changes from ``baseline`` to ``current``, most severe first.

    Without a baseline only the run's own regression verdicts and missing
    results are reported: everything else would be "new" and drown the lines
    that matter. ``flaky`` holds the (variant id, cell id) pairs the history
    calls flaky (:func:`bugmatrix.report.history.flaky_pairs`).
    """
    changes: dict[tuple[str, str], Change] = {}
    old = (baseline or {}).get("results", {})
    for variant_id, per_cell in current.get("results", {}).items():
        for cell_id, entry in per_cell.items():
            before = old.get(variant_id, {}).get(cell_id, {}).get("outcome")
            after = entry["outcome"]
            kind = _classify(before, after) if baseline is not None else None
            if entry.get("verdict") == Verdict.REGRESSION:
                kind = ChangeKind.REGRESSION  # the expectation outranks the baseline: it is the documented truth
            if kind in DOWNGRADED and (variant_id, cell_id) in flaky:
                kind = ChangeKind.FLAKY
            if after == Outcome.MISSING:  # last: a hole is never downgraded, flaky or not
                kind = ChangeKind.MISSING
            if kind:
                changes[(variant_id, cell_id)] = Change(kind, variant_id, cell_id, before, str(after), entry.get("message", ""))
    listed = list(changes.values())
    if baseline is not None:
        old_cells = {c["id"] for c in baseline.get("cells", [])}
        listed += [
            Change(ChangeKind.NEW_CELL, "", c["id"], None, "", "not in the baseline")
            for c in current.get("cells", [])
            if c["id"] not in old_cells
        ]
        listed += [
            Change(ChangeKind.NEW_VARIANT, v["id"], "", None, "", "not in the baseline")
            for v in current.get("variants", [])
            if v["id"] not in old
        ]
    return sorted(listed, key=lambda c: (c.kind.severity, c.variant_id, c.cell_id))


def summary_lines(changes: list[Change]) -> list[str]:
    """One line per failing change (missing result, regression), for the CLI and CI logs."""
    lines = []
    for c in changes:
        if c.kind not in FAILING:
            continue
        first = c.message.strip().splitlines()[0] if c.message.strip() else ""
        if c.kind is ChangeKind.MISSING:
            lines.append(f"MISSING {c.variant_id} in {c.cell_id}: {first}")
            continue
        # A regression already in the baseline still fails the run; say what was expected, not "reproduced -> reproduced".
        was = c.before if c.before not in (None, c.after) else "expected fixed"
        lines.append(f"REGRESSION {c.variant_id} in {c.cell_id}: {was} -> {c.after}: {first}")
    return lines


def flaky_lines(changes: list[Change]) -> list[str]:
    """One line per flaky change, for the CLI and CI logs: not failing, but never silent."""
    return [
        f"FLAKY {c.variant_id} in {c.cell_id}: {c.before or 'expected'} -> {c.after} (changed back and forth in recent nights)"
        for c in changes
        if c.kind is ChangeKind.FLAKY
    ]
