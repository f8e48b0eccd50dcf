"""One night's report as one value: the compat document and every analysis of it, built once.

:func:`analyse` takes the merged document, the baseline and the history and
returns a :class:`NightReport`; every view (compat.md, index.html, the
terminal, the step summary, the README table) reads that one value and
computes nothing of its own, so they cannot disagree. :meth:`NightReport.findings`
groups what needs a maintainer (a regression, a new failure mode, a missing
cell, a release that does not install) with everything known about it: its
cells, since which night, what moved below the pins, the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from bugmatrix.releases.notes import ReleaseGroup, ReleaseNote, install_changes, release_groups, release_notes
from bugmatrix.report.agreement import AgreementLine, per_case
from bugmatrix.report.boundaries import Boundary, Picture, boundary_text, pictures
from bugmatrix.report.diff import (
    FAILING,
    INFORMATIONAL,
    Change,
    ChangeKind,
    diff_against_baseline,
    flaky_lines,
    sort_changes,
    summary_lines,
)
from bugmatrix.report.envdiff import Moved, explain_changes
from bugmatrix.report.fresh import FreshLane
from bugmatrix.report.history import Night, VariantHistory, flaky_pairs, nights_of, summarise
from bugmatrix.report.model import Compat

__all__ = ["FINDING_KINDS", "Finding", "NightReport", "analyse"]

#: What a maintainer is asked to look at, one finding per (kind, variant): the future issue bodies' subjects.
FINDING_KINDS = (
    ChangeKind.MISSING,
    ChangeKind.REGRESSION,
    ChangeKind.RELEASE_DOES_NOT_INSTALL,
    ChangeKind.NO_LONGER_INSTALLS,
    ChangeKind.FRESH_BREAKS,
    ChangeKind.FRESH_DIFFERS,
    ChangeKind.NEW_FAILURE_MODE,
)


@dataclass(frozen=True)
class Finding:
    """One thing to act on, and everything the night knows about it.

    ``variant_id`` is "" for a finding about whole cells (a release that does
    not install); ``since`` is the first night of the variant's current
    outcomes (None without history); ``moved`` names, per cell, what moved
    below the pins since the baseline; ``boundary`` is the variant's picture
    in one line ("" when it ran nowhere).
    """

    kind: ChangeKind
    variant_id: str
    cells: tuple[str, ...]
    message: str
    since: str | None = None
    moved: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    boundary: str = ""


@dataclass(frozen=True)
class NightReport:
    """The compat document, the baseline it was compared with, and what every analysis returned."""

    compat: Compat
    baseline: Compat | None
    changes: tuple[Change, ...]
    notes: tuple[ReleaseNote, ...]
    releases: tuple[ReleaseGroup, ...]
    moved: tuple[Moved, ...]
    agreement: Mapping[str, tuple[list[AgreementLine], list[str]]]
    boundary: Boundary
    history: Mapping[str, VariantHistory] = field(default_factory=dict)
    nights: int = 0  # nights of this profile in the history, tonight included
    baseline_path: str = ""
    fresh: FreshLane | None = None  # the re-resolve lane, when it ran tonight

    @property
    def failing(self) -> list[Change]:
        """Changes that fail ``--fail-on-regression`` (:data:`~bugmatrix.report.diff.FAILING`)."""
        return [c for c in self.changes if c.kind in FAILING]

    @property
    def listed(self) -> list[Change]:
        """Changes the views list one by one (new cells and variants are only counted)."""
        return [c for c in self.changes if c.kind not in INFORMATIONAL]

    @property
    def informational(self) -> int:
        return sum(1 for c in self.changes if c.kind in INFORMATIONAL)

    @property
    def missing(self) -> list[Change]:
        return [c for c in self.changes if c.kind is ChangeKind.MISSING]

    def summary_lines(self) -> list[str]:
        return summary_lines(list(self.changes))

    def flaky_lines(self) -> list[str]:
        return flaky_lines(list(self.changes))

    @property
    def expectation_text(self) -> str:
        """``Expected: the plan … (70 cells); profile full from the plan.`` (+ what was dropped on purpose): every view says it."""
        summary, compat = self.compat.expectation, self.compat
        text = f"Expected: {summary.text or 'not recorded (an older document)'}; profile {compat.profile} from {compat.profile_source or 'the document'}."
        if summary.dropped:
            shown = ", ".join(summary.dropped[:5]) + (f" +{len(summary.dropped) - 5} more" if len(summary.dropped) > 5 else "")
            text += f" {len(summary.dropped)} baseline cell(s) are not in this plan (dropped on purpose, not missing): {shown}."
        if summary.dropped_results:
            text += f" {summary.dropped_results} baseline result(s) are no longer planned or collected (dropped on purpose)."
        return text

    @cached_property
    def pictures_by_variant(self) -> dict[str, Picture]:
        """Each drawn variant (and each variant drawn on another's picture) -> its picture."""
        return {t.variant.id: p for p in self.boundary[0] for t in p.tracks}

    def to_json(self) -> dict[str, Any]:
        """compat.json: the document, the release notes, what moved, the re-resolve lane (the baseline of a later night is this)."""
        return {
            **self.compat.to_json(), "releases": [n.to_json() for n in self.notes], "moved": [m.to_json() for m in self.moved],
            "reresolved": self.fresh.to_json() if self.fresh else None,
        }  # fmt: skip

    def _lane_findings(self) -> list[Finding]:
        """The lane's: cells the refreshed lock would break, and variants whose outcome differs in the fresh environment (with what moved)."""
        if self.fresh is None:
            return []
        found = [
            Finding(ChangeKind.FRESH_BREAKS, "", (c.cell,), c.breaks, moved={c.cell: c.moved} if c.moved else {})
            for c in self.fresh.cells
            if c.breaks
        ]
        by_variant: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
        for cell in self.fresh.cells:
            for d in cell.differences:
                by_variant.setdefault(d.variant, []).append((cell.cell, f"locked {d.locked} → fresh {d.fresh}: {d.message}", cell.moved))
        for variant, items in by_variant.items():
            picture = self.pictures_by_variant.get(variant)
            track = next((t for t in picture.tracks if t.variant.id == variant), None) if picture else None
            found.append(Finding(
                ChangeKind.FRESH_DIFFERS, variant, tuple(c for c, _, _ in items), items[0][1],
                moved={c: m for c, _, m in items}, boundary=boundary_text(picture, track) if picture else "",
            ))  # fmt: skip
        return found

    def findings(self) -> list[Finding]:
        """What needs a maintainer, one finding per (kind, variant), most severe first, with its cells and context."""
        grouped: dict[tuple[ChangeKind, str], list[Change]] = {}
        for change in self.changes:
            if change.kind in FINDING_KINDS:
                grouped.setdefault((change.kind, change.variant_id), []).append(change)
        moved = {(m.variant, m.cell): m.moved for m in self.moved}
        found = []
        for (kind, variant_id), changes in grouped.items():
            cells = tuple(c.cell_id for c in changes)
            picture = self.pictures_by_variant.get(variant_id)
            track = next((t for t in picture.tracks if t.variant.id == variant_id), None) if picture else None
            history = self.history.get(variant_id)
            found.append(Finding(
                kind, variant_id, cells, changes[0].message, since=history.since if history else None,
                moved={c: moved[(variant_id, c)] for c in cells if moved.get((variant_id, c))},
                boundary=boundary_text(picture, track) if picture else "",
            ))  # fmt: skip
        found += self._lane_findings()
        return sorted(found, key=lambda f: FINDING_KINDS.index(f.kind))


def analyse(
    compat: Compat,
    baseline: Compat | None = None,
    nights: Sequence[Night] = (),
    *,
    baseline_path: str = "",
    fresh: FreshLane | None = None,
) -> NightReport:
    """Every analysis of one night, once: the diff (flaky pairs from this profile's history), releases, moved, agreement, pictures; the lane as given."""
    own = nights_of(list(nights), compat.profile)  # profiles share the history file, not their story
    history = summarise(own)
    notes = release_notes(compat, baseline)
    groups = release_groups(notes)
    changes = sort_changes([*diff_against_baseline(compat, baseline, flaky_pairs(history)), *install_changes(groups)])
    return NightReport(
        compat=compat, baseline=baseline, changes=tuple(changes), notes=tuple(notes), releases=tuple(groups),
        moved=tuple(explain_changes(baseline, compat)), agreement=per_case(compat), boundary=pictures(compat), history=history,
        nights=len(own), baseline_path=baseline_path, fresh=fresh,
    )  # fmt: skip
