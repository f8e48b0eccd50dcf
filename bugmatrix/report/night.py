"""One night's report as one value: the compat document and every analysis of it, built once by :func:`analyse`.

Every view reads the :class:`NightReport` and computes nothing of its own, so they cannot disagree. Which distributions
changed between two runs of one cell (``numpy 2.3.4 → 2.4.0``) is the "why" behind a change (:func:`explain_changes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents import compat as document
from bugmatrix.documents.compat import Cell, FreshCell, FreshLane, Moved, ReleaseNote
from bugmatrix.documents.run import Origin
from bugmatrix.report.agreement import AgreementRow, per_case
from bugmatrix.report.boundaries import Boundary, pictures
from bugmatrix.report.diff import FAILING, INFORMATIONAL, Change, ChangeKind, diff_against_baseline
from bugmatrix.report.expectation import SYSTEM_CELL
from bugmatrix.report.history import Night, VariantHistory, flaky_pairs, nights_of, summarise, unchanged_since
from bugmatrix.report.marks import Picture, boundary_text
from bugmatrix.report.model import Compat, compat_json
from bugmatrix.report.new_releases import ReleaseGroup, install_changes, release_groups, release_notes
from bugmatrix.versions import distribution_changes

__all__ = ["CELL_FINDINGS", "FINDING_KINDS", "Finding", "NightReport", "analyse", "distributions_of", "explain_changes"]

#: What a maintainer is asked to look at, one issue each (bugmatrix.publish): every kind of change down to a new failure mode.
FINDING_KINDS = frozenset(k for k in ChangeKind if k.severity <= ChangeKind.NEW_FAILURE_MODE.severity)
#: Kinds a finding is about whole cells of (one per cell, whatever the number of variants there); a release's is about the release.
CELL_FINDINGS = frozenset({ChangeKind.MISSING, ChangeKind.NO_LONGER_INSTALLS})


@dataclass(frozen=True)
class Finding:
    """One thing to act on, and everything the night knows about it.

    ``kind`` and ``subject`` (a variant id, a cell id, or ``axis version``) make it the same finding on another night.
    """

    kind: ChangeKind
    variant_id: str
    cells: tuple[str, ...]
    message: str
    since: str | None = None
    moved: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    boundary: str = ""
    subject: str = ""
    variants: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()
    since_by_cell: Mapping[str, str | None] = field(default_factory=dict)
    release: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        """``regression:autocast_cache::core[cpu]``: the same on every night the finding is there."""
        return f"{self.kind}:{self.subject}"

    @property
    def of_variant(self) -> bool:
        """About one variant (its cells are where it changed), not about whole cells or a release."""
        return self.kind not in CELL_FINDINGS and self.release is None


@dataclass(frozen=True)
class NightReport:
    """The compat document, the baseline it was compared with, and what every analysis returned."""

    compat: Compat
    baseline: Compat | None
    changes: tuple[Change, ...]
    notes: tuple[ReleaseNote, ...]
    releases: tuple[ReleaseGroup, ...]
    moved: tuple[Moved, ...]
    agreement: Mapping[str, tuple[list[AgreementRow], list[str]]]
    boundary: Boundary
    history: Mapping[str, VariantHistory] = field(default_factory=dict)
    nights: int = 0  # nights of this profile in the history, tonight included
    own_nights: tuple[Night, ...] = ()  # those nights, oldest first (since when a cell is as it is tonight)
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

    @property
    def expectation_text(self) -> str:
        """``Expected: the plan … (70 cells); profile full from the plan.``"""
        summary, compat = self.compat.expectation, self.compat
        return f"Expected: {summary.text or 'not recorded (an older document)'}; profile {compat.profile} from {compat.profile_source or 'the document'}."

    @property
    def dropped_text(self) -> str:
        """What the baseline had and this plan left out on purpose, one line every view puts last (or "")."""
        summary, baseline = self.compat.expectation, self.baseline
        if summary.dropped and baseline is not None and baseline.profile != self.compat.profile:
            ran = [c.id for c in self.compat.cells if c.id != SYSTEM_CELL]
            if all(c in baseline.cell_by_id for c in ran):
                return (
                    f"Profile {self.compat.profile} runs {len(ran)} of the {len(ran) + len(summary.dropped)} cells of the baseline's"
                    f" profile {baseline.profile}; the others are not in this plan (on purpose, not missing)."
                )
        parts = []
        if summary.dropped:
            shown = ", ".join(summary.dropped[:5]) + (f" +{len(summary.dropped) - 5} more" if len(summary.dropped) > 5 else "")
            parts.append(f"{len(summary.dropped)} baseline cell(s) are not in this plan (dropped on purpose, not missing): {shown}.")
        if summary.dropped_results:
            parts.append(f"{summary.dropped_results} baseline result(s) are no longer planned or collected (dropped on purpose).")
        return " ".join(parts)

    @property
    def upstream_releases(self) -> tuple[ReleaseGroup, ...]:
        """New releases upstream shipped, and additions that do not install: they lead every view."""
        return tuple(g for g in self.releases if not g.addition or not g.installs)

    @property
    def additions(self) -> tuple[ReleaseGroup, ...]:
        """Pins new to this matrix on purpose that install: said quietly, after the findings."""
        return tuple(g for g in self.releases if g.addition and g.installs)

    @property
    def reuse_groups(self) -> list[tuple[Origin, list[str]]]:
        """The reused cells grouped by whose results they carry, oldest first."""
        groups: dict[Origin, list[str]] = {}
        for cell in self.compat.reused_cells:
            assert cell.reused_from is not None
            groups.setdefault(cell.reused_from, []).append(cell.id)
        return sorted(groups.items(), key=lambda item: item[0].date)

    @property
    def lane_groups(self) -> tuple[list[FreshCell], list[tuple[tuple[str, ...], list[FreshCell]]]]:
        """The lane's cells named one by one (a finding, or a sibling that did not run), and the quiet moved ones by what moved."""
        single, quiet = [], {}
        for cell in self.fresh.shown if self.fresh else ():
            if cell.status == "failed" or cell.breaks or cell.differences or cell.sibling == "not-run":
                single.append(cell)
            elif cell.status == "moved":
                quiet.setdefault(cell.moved, []).append(cell)
        return single, list(quiet.items())

    @cached_property
    def pictures_by_variant(self) -> dict[str, Picture]:
        """Each drawn variant (and each variant drawn on another's picture) -> its picture."""
        return {t.variant.id: p for p in self.boundary[0] for t in p.tracks}

    def to_document(self) -> document.Compat:
        """compat.json: the document, the release notes, what moved, the re-resolve lane."""
        return msgspec.structs.replace(self.compat, releases=self.notes, moved=self.moved, reresolved=self.fresh)

    def to_json(self) -> dict[str, Any]:
        """Plain data for compat.json."""
        return compat_json(self.to_document())

    def findings(self) -> list[Finding]:
        """What needs a maintainer, most severe first; a variant stays a flaky finding while the history calls it flaky."""
        grouped: dict[tuple[ChangeKind, str], list[Change]] = {}
        for change in self.changes:
            if change.kind in FINDING_KINDS and change.kind is not ChangeKind.RELEASE_DOES_NOT_INSTALL:
                subject = change.cell_id if change.kind in CELL_FINDINGS else change.variant_id
                grouped.setdefault((change.kind, subject), []).append(change)
        for variant_id, history in self.history.items():
            if history.flaky:
                grouped.setdefault((ChangeKind.FLAKY, variant_id), [])
        found = [self._finding(kind, subject, changes) for (kind, subject), changes in grouped.items()]
        found += [self._release_finding(group) for group in self.releases if group.not_installed]
        return sorted(found, key=lambda f: (f.kind.severity, f.subject))

    def _finding(self, kind: ChangeKind, subject: str, changes: list[Change]) -> Finding:
        per_cell = kind in CELL_FINDINGS
        if kind is ChangeKind.FLAKY:
            cells = tuple(self.history[subject].flaky)
            message = f"{subject} {self.history[subject].flaky_title}"
        else:
            cells = tuple(dict.fromkeys(c.cell_id for c in changes))
            message = changes[0].message
        variants = tuple(dict.fromkeys(c.variant_id for c in changes)) if per_cell else (subject,)
        moved = {(m.variant, m.cell): m.moved for m in self.moved}
        picture = None if per_cell else self.pictures_by_variant.get(subject)
        track = next((t for t in picture.tracks if t.variant.id == subject), None) if picture else None
        history = None if per_cell else self.history.get(subject)
        return Finding(
            kind,
            "" if per_cell else subject,
            cells,
            message,
            since=history.since if history else None,
            moved={c: m for c in cells for v in variants if (m := moved.get((v, c)))},
            boundary=boundary_text(picture, track) if picture else "",
            subject=subject,
            variants=variants,
            changes=tuple(changes),
            since_by_cell={c: unchanged_since(self.own_nights, c, variants) for c in cells},
        )

    def _release_finding(self, group: ReleaseGroup) -> Finding:
        cells = tuple(n.cell for n in group.not_installed)
        changes = tuple(c for c in self.changes if c.kind is ChangeKind.RELEASE_DOES_NOT_INSTALL and c.cell_id in cells)
        variants = tuple(self.compat.results)
        return Finding(
            ChangeKind.RELEASE_DOES_NOT_INSTALL,
            "",
            cells,
            group.headline,
            subject=f"{group.axis} {group.version}",
            changes=changes,
            since_by_cell={c: unchanged_since(self.own_nights, c, variants) for c in cells},
            release=(group.axis, group.version),
        )


def distributions_of(cell: Cell) -> dict[str, str] | None:
    """A cell's recorded distributions (None: not recorded); a rebuilt wheel shows as ``2.10.0 (build 3)``."""
    found, builds = cell.environment.get("distributions"), cell.environment.get("wheel_builds") or {}
    if not isinstance(found, Mapping):
        return None
    return {name: f"{version} (build {builds[name]})" if name in builds else version for name, version in found.items()}


def explain_changes(baseline: Compat | None, current: Compat) -> list[Moved]:
    """Every (variant, cell) whose outcome differs from the baseline's (missing ones aside), with what moved in that cell."""
    if baseline is None:
        return []
    old, moved = baseline.cell_by_id, {}
    for cell in current.cells:
        had, has = distributions_of(old[cell.id]) if cell.id in old else None, distributions_of(cell)
        if had is not None and has is not None:  # either record without distributions: nothing moved (never invented)
            moved[cell.id] = distribution_changes(had, has)
    explained = []
    for variant, per_cell in current.results.items():
        was = baseline.results.get(variant, {})
        for cell, entry in per_cell.items():
            before = was.get(cell)
            if before is None or before.outcome is entry.outcome or entry.outcome is Outcome.MISSING:
                continue
            explained.append(Moved(variant, cell, before.outcome, entry.outcome, tuple(moved.get(cell, ()))))
    return sorted(explained, key=lambda e: (e.cell, e.variant))


def analyse(
    compat: Compat,
    baseline: Compat | None = None,
    nights: Sequence[Night] = (),
    *,
    baseline_path: str = "",
    fresh: FreshLane | None = None,
) -> NightReport:
    """Every analysis of one night, once: the diff (flaky pairs from this profile's history), releases, moved, agreement, pictures."""
    own = nights_of(list(nights), compat.profile)  # profiles share the history file, not their story
    history = summarise(own)
    notes = release_notes(compat, baseline)
    groups = release_groups(notes, compat, baseline)
    changes = diff_against_baseline(compat, baseline, flaky_pairs(history), install_changes(groups))
    return NightReport(
        compat=compat,
        baseline=baseline,
        changes=tuple(changes),
        notes=tuple(notes),
        releases=tuple(groups),
        moved=tuple(explain_changes(baseline, compat)),
        agreement=per_case(compat),
        boundary=pictures(compat),
        history=history,
        nights=len(own),
        own_nights=tuple(own),
        baseline_path=baseline_path,
        fresh=fresh,
    )
