"""What changed since the baseline (an earlier compat document): missing results and regressions first.

A regression is also read from the run's own verdict; a flaky pair's change is :attr:`ChangeKind.FLAKY` and fails
nothing, but a missing result is never downgraded. :data:`FAILING` is what fails ``--fail-on-regression``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.report.model import Compat, reused_note

__all__ = ["FAILING", "INFORMATIONAL", "PER_CELL", "Change", "ChangeKind", "diff_against_baseline", "flaky_lines", "summary_lines"]


class ChangeKind(enum.StrEnum):
    """Kinds of change, in display order: what needs a maintainer first."""

    MISSING = "missing"  # expected, but not recorded: a lost cell or a run that stopped early
    REGRESSION = "regression"
    RELEASE_DOES_NOT_INSTALL = "release-does-not-install"  # a cell of a new release whose environment cannot be built
    NO_LONGER_INSTALLS = "no-longer-installs"  # a baseline cell whose environment cannot be built any more
    FLAKY = "flaky"  # a regression / new failure mode / unexpected fix of a pair the history calls flaky
    NEW_FAILURE_MODE = "new-failure-mode"
    UNEXPECTED_FIX = "unexpected-fix"
    NEW_CELL = "new-cell"
    NEW_VARIANT = "new-variant"

    @property
    def severity(self) -> int:
        return list(ChangeKind).index(self)


#: Kinds that only say the matrix grew; renderers count them instead of listing them.
INFORMATIONAL = frozenset({ChangeKind.NEW_CELL, ChangeKind.NEW_VARIANT})
#: Kinds that fail ``report --fail-on-regression``.
FAILING = frozenset({ChangeKind.MISSING, ChangeKind.REGRESSION, ChangeKind.RELEASE_DOES_NOT_INSTALL, ChangeKind.NO_LONGER_INSTALLS})
#: Kinds that usually hit a whole cell at once: views say them once per cell, not once per variant.
PER_CELL = frozenset({ChangeKind.MISSING, ChangeKind.NO_LONGER_INSTALLS, ChangeKind.RELEASE_DOES_NOT_INSTALL})
#: Kinds a flaky (variant, cell) is listed as FLAKY instead of; MISSING is deliberately not one of them.
_DOWNGRADED = frozenset({ChangeKind.REGRESSION, ChangeKind.NEW_FAILURE_MODE, ChangeKind.UNEXPECTED_FIX})
#: Outcomes that mean "it failed some other way than the documented bug".
FAILURES = frozenset({Outcome.DIFFERENT, Outcome.CRASHED, Outcome.TIMEOUT})


@dataclass(frozen=True)
class Change:
    """One difference between the baseline and this run (``before`` None: the baseline has no entry)."""

    kind: ChangeKind
    variant_id: str
    cell_id: str
    before: Outcome | None
    after: Outcome | None
    message: str
    reused: str = ""  # the origin of a reused result (Origin.text); "" when tonight observed it

    @property
    def reused_note(self) -> str:
        """`` (♻ reused from <date, commit, run>)`` for a reused result."""
        return reused_note(self.reused)

    @property
    def first_line(self) -> str:
        """The message's first line that says something ("" for none)."""
        return self.message.strip().splitlines()[0] if self.message.strip() else ""


def _classify(before: Outcome | None, after: Outcome) -> ChangeKind | None:
    if before is after:
        return None
    if before is Outcome.FIXED and after is Outcome.REPRODUCED:
        return ChangeKind.REGRESSION
    if after in FAILURES:
        # Also from "no entry": a new cell that crashes is news, not noise.
        return ChangeKind.NEW_FAILURE_MODE
    if after is Outcome.INSTALL_FAILED:
        # Only what did install before; a new release's cell that never installed is the release notes' (install_changes).
        return ChangeKind.NO_LONGER_INSTALLS if before is not None else None
    if before is Outcome.REPRODUCED and after is Outcome.FIXED:
        return ChangeKind.UNEXPECTED_FIX
    return None


def diff_against_baseline(
    current: Compat, baseline: Compat | None, flaky: Collection[tuple[str, str]] = frozenset(), releases: Iterable[Change] = ()
) -> list[Change]:
    """Changes from ``baseline`` to ``current`` (and the ``releases`` that do not install), most severe first, then by variant and cell:
    the order every view lists them in. Without a baseline, only regression verdicts and missing results."""
    changes: list[Change] = list(releases)
    old = baseline.results if baseline is not None else {}
    origins = current.reused_origins
    for variant_id, per_cell in current.results.items():
        was = old.get(variant_id, {})
        for cell_id, entry in per_cell.items():
            before_entry = was.get(cell_id)
            before = before_entry.outcome if before_entry is not None else None
            after = entry.outcome
            kind = _classify(before, after) if baseline is not None else None
            if entry.verdict is Verdict.REGRESSION:
                kind = ChangeKind.REGRESSION  # the expectation outranks the baseline: it is the documented truth
            if kind in _DOWNGRADED and (variant_id, cell_id) in flaky:
                kind = ChangeKind.FLAKY
            if after is Outcome.MISSING:  # last: a hole is never downgraded, flaky or not
                kind = ChangeKind.MISSING
            if kind:
                changes.append(Change(kind, variant_id, cell_id, before, after, entry.message, origins.get(cell_id, "")))
    if baseline is not None:
        old_cells = baseline.cell_by_id
        changes += [
            Change(ChangeKind.NEW_CELL, "", c.id, None, None, "not in the baseline") for c in current.cells if c.id not in old_cells
        ]
        changes += [
            Change(ChangeKind.NEW_VARIANT, v.id, "", None, None, "not in the baseline") for v in current.variants if v.id not in old
        ]
    return sorted(changes, key=lambda c: (c.kind.severity, c.variant_id, c.cell_id))


def summary_lines(changes: Iterable[Change]) -> list[str]:
    """One line per failing change, for the CLI and CI logs; a cell that does not install is one line, not one per variant."""
    lines, said = [], set()
    for c in changes:
        if c.kind is ChangeKind.MISSING:
            lines.append(f"MISSING {c.variant_id} in {c.cell_id}: {c.first_line}")
        elif c.kind in PER_CELL and (c.kind, c.cell_id) not in said:
            said.add((c.kind, c.cell_id))
            lines.append(f"{c.kind.upper()} {c.cell_id}: {c.first_line}{c.reused_note}")
        elif c.kind is ChangeKind.REGRESSION:
            # A regression already in the baseline still fails the run; say what was expected, not "reproduced -> reproduced".
            was = c.before if c.before not in (None, c.after) else "expected fixed"
            lines.append(f"REGRESSION {c.variant_id} in {c.cell_id}: {was} -> {c.after}: {c.first_line}{c.reused_note}")
    return lines


def flaky_lines(changes: Iterable[Change]) -> list[str]:
    """One line per flaky change, for the CLI and CI logs: not failing, but never silent."""
    return [
        f"FLAKY {c.variant_id} in {c.cell_id}: {c.before or 'expected'} -> {c.after} (changed back and forth in recent nights){c.reused_note}"
        for c in changes
        if c.kind is ChangeKind.FLAKY
    ]
