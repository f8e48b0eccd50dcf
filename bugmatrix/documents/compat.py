"""The compat document (``reports/compat.json``) and the baseline (``reports/baseline.json``, an earlier compat document):
what :mod:`bugmatrix.report.model` holds and every view reads, in every version the report still reads."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec

from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.documents.lane import STATUSES, Status
from bugmatrix.documents.run import Origin, TrackedPin
from bugmatrix.values import profile_name

__all__ = [
    "Axis",
    "Baseline",
    "Cell",
    "CellInstall",
    "Compat",
    "Entry",
    "ExpectationSource",
    "ExpectationSummary",
    "FreshCell",
    "FreshDifference",
    "FreshLane",
    "Host",
    "InstallStatus",
    "Moved",
    "NoteKind",
    "ReleaseNote",
    "Tracking",
    "Variant",
]

_Strings = list[str]
_Names = tuple[str, ...]


class Struct(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A part of the document: an unknown key is an error (a typo, or a file from a newer harness); a value, never changed."""


class InstallStatus(enum.StrEnum):
    """Whether a cell's environment was built: ``missing`` is a planned cell without a run file."""

    OK = "ok"
    FAILED = "failed"
    MISSING = "missing"


class ExpectationSource(enum.StrEnum):
    """What the report held the runs against, so a hole in the table is never silent."""

    PLAN = "plan"  # the plan document: every planned (variant, cell)
    BASELINE = "baseline"  # the baseline's (variant, cell) set, and each run file's own selection
    RUNS = "runs"  # only each run file's own selection (no plan, no baseline of this profile)


class Axis(Struct):
    """One axis of the document, in display order: its name, its short name in cell ids, and whether it is the interpreter."""

    name: str
    prefix: str
    interpreter: bool = False


class Tracking(Struct):
    """What ``latest`` meant for this report: the plan's resolution, else what the run files recorded."""

    axes: dict[str, TrackedPin] = {}
    resolved_at: str | None = None
    stale: bool = False


class CellInstall(Struct):
    """How a cell's environment build ended, and the resolver's reason when it failed."""

    status: InstallStatus
    reason: str = ""


class Cell(Struct):
    """One pinned environment: pins as requested, environment as observed, and how its run went."""

    id: str
    pins: dict[str, str]
    environment: Annotated[dict[str, Any], msgspec.Meta(description="as observed inside the cell (bugmatrix/cell/environment.py)")] = {}
    install: CellInstall = CellInstall(InstallStatus.OK)
    started: str = ""
    finished: str = ""
    duration_s: float | None = None
    complete: bool = False
    deselected_by: str = ""
    tracked: dict[str, TrackedPin] = {}
    input_key: Annotated[str, msgspec.Meta(description="digest of what the cell's results depend on; empty where none was recorded")] = ""
    origin: Origin | None = None  # the run that wrote this cell's run file
    reused_from: Origin | None = None  # set when that run reused an earlier run's results: whose they are

    @property
    def failed(self) -> bool:
        return self.install.status is InstallStatus.FAILED

    @property
    def reused(self) -> bool:
        """Its results were taken over from an earlier run with the same inputs (never shown as fresh)."""
        return self.reused_from is not None

    def observed(self, key: str) -> str:
        """What the cell saw for ``key`` (an axis's installed version, ``cuda``, ``gpu``), or ""."""
        value = self.environment.get(key)
        return "" if value is None or value is False else str(value)

    def package(self, axis: str) -> str:
        """The distribution that provided ``axis`` in this cell (``pytorch-lightning``), or ""."""
        return self.observed(f"{axis}_package")


class Variant(Struct):
    """One row of the table: a case variant on one device, and what it is to its case."""

    id: str
    case: str
    name: str = msgspec.field(name="variant")
    device: str
    kind: Kind | None = None  # None only for a variant no run could describe (a crash record, a planned id)
    workaround_for: str | None = None
    counterpart: str | None = None
    evidence: str = ""
    #: The axes the variant declares it spans: the only axes it is read along (:mod:`~bugmatrix.report.boundaries`).
    #: None where nothing said (an older document, a variant no run or case described).
    axes: _Names | None = None
    #: A pin workaround's requirement on an axis (``transformers<=4.51.3``): read as avoiding the bug where it is absent.
    pinned: str = ""
    #: Checks the case says the variant no longer makes: a result whose message names one was taken under an old check,
    #: and every view says so beside it.
    old_checks: _Names = ()

    def old_check(self, entry: Entry) -> str:
        """The old check ``entry``'s message names ("" if none): the result stands as recorded, under that check."""
        return next((check for check in self.old_checks if check in entry.message), "")

    @property
    def label(self) -> str:
        """``core[cpu]``: name and device, where a heading already names the case (tables, pictures)."""
        return f"{self.name}[{self.device}]"

    @property
    def short(self) -> str:
        """``core[cpu-float16]``: the id without its case (name and tag, as :attr:`VariantId.short`)."""
        try:
            return VariantId.parse(self.id).short
        except ValueError:
            return self.label

    @property
    def role(self) -> str:
        """``workaround`` or ``upstream`` when the variant is drawn on another variant's picture, else ""."""
        return self.kind.value if self.kind in (Kind.WORKAROUND, Kind.UPSTREAM) else ""

    @classmethod
    def from_id(cls, variant_id: str) -> Variant:
        """What a variant id alone says (``case::name[tag]``), for a variant no run described."""
        parsed = VariantId.parse(variant_id)
        return cls(variant_id, parsed.case, parsed.name, parsed.device)


class Entry(Struct):
    """One result: a variant in a cell, against its expectation."""

    outcome: Outcome
    verdict: Verdict | None = None
    expected: Outcome | None = None
    message: str = ""
    log: str = ""
    leaked: _Names = ()
    duration_s: float | None = 0.0
    workarounds: _Names = ()  # for a reproduced entry: the workarounds of its case and device fixed in this cell
    tried: Annotated[_Names | None, msgspec.Meta(description="the workarounds that ran in the same cell at all (absent: not said)")] = None

    @property
    def flagged(self) -> bool:
        """The outcome differs from its expectation (regression, unexpected fix, new failure mode)."""
        return self.verdict is not None and self.verdict.flagged

    @property
    def as_declared(self) -> bool:
        """The outcome is what its expectation declares here: a change into it is no regression (candidate)."""
        return self.expected is not None and self.outcome is self.expected


class ExpectationSummary(Struct):
    """Which expectation the report used, and what it left out on purpose."""

    source: ExpectationSource
    text: str = ""
    dropped: _Names = ()  # baseline cells the plan no longer has (dropped on purpose, not missing)
    dropped_results: Annotated[int, msgspec.Meta(ge=0)] = 0  # baseline (variant, cell) results no longer planned or collected


class NoteKind(enum.StrEnum):
    """How a variant in a new release compares with the previous release of its axis."""

    SAME = "same"
    REGRESSION_CANDIDATE = "regression-candidate"  # fixed before, reproduced now, and no expectation declares that
    FIX_CANDIDATE = "fix-candidate"
    DECLARED = "as-declared"  # changed, exactly as the variant's expectation declares for this release
    CHANGED = "changed"
    FIRST = "first"  # no earlier release of the axis in this run to compare with
    DOES_NOT_INSTALL = "does-not-install"  # the cell's environment could not be built


class ReleaseNote(Struct):
    """One variant in one cell of a new release (or one cell that did not install), against the previous release."""

    axis: str
    version: str
    variant: str  # "" for a cell that did not install
    cell: str
    outcome: Outcome
    kind: NoteKind
    text: str
    previous_version: str | None = None
    previous_outcome: Outcome | None = None
    reason: str = ""  # uv's one-line reason, for a cell that did not install


class Moved(Struct):
    """A (variant, cell) whose outcome differs from the baseline's, and what moved below the pins in that cell."""

    variant: str
    cell: str
    before: Outcome
    after: Outcome
    moved: _Names  # empty: the two runs recorded the same distributions (or either recorded none)


class FreshDifference(Struct):
    """A variant whose outcome in the fresh environment differs from the locked run's."""

    variant: str
    locked: Outcome
    fresh: Outcome
    message: str = ""


class FreshCell(Struct):
    """One cell (or CUDA twin) of the re-resolve lane: its fresh resolution, and its sibling run when it moved."""

    cell: str
    status: Status
    moved: Annotated[_Names, msgspec.Meta(description="what moved below the pins: name old → new, +added, -removed")] = ()
    reason: str = ""
    sibling: Literal["", "ran", "reused", "install-failed", "not-run"] = ""  # not-run: moved, no current sibling; "": nothing moved
    origin: Origin | None = None  # whose results the sibling holds
    differences: tuple[FreshDifference, ...] = ()

    @property
    def breaks(self) -> str:
        """Why the refreshed lock would break this cell ("" when it would not): it does not resolve, or does not install."""
        if self.status == "failed":
            return f"its requirements no longer resolve: {self.reason}"
        if self.sibling == "install-failed":
            return f"the fresh environment does not install: {self.reason}"
        return ""


class FreshLane(Struct):
    """The re-resolve lane: when it resolved (and as of when), each cell of the report, and sibling files left out as stale."""

    resolved_at: str
    cells: tuple[FreshCell, ...]
    as_of: Annotated[str | None, msgspec.Meta(description="resolved as the registry stood then (uv --exclude-newer)")] = None
    held: dict[str, str] = {}
    stale: _Names = ()

    @property
    def shown(self) -> tuple[FreshCell, ...]:
        """The cells a view lists one by one: moved or failed (the unchanged ones are counted)."""
        return tuple(c for c in self.cells if c.status in ("moved", "failed"))

    @property
    def headline(self) -> str:
        """``re-resolved 70 cells against today's registry (…): 42 same, 28 moved, 0 failed, 0 unlocked``."""
        when = f"as of {self.as_of}" if self.as_of else "against the registry"
        held = f", {', '.join(f'{d} as of {t}' for d, t in self.held.items())}" if self.held else ""
        counts = {s: sum(1 for c in self.cells if c.status == s and not c.cell.endswith("-cuda")) for s in STATUSES}
        return f"re-resolved {sum(counts.values())} cells {when}{held} ({self.resolved_at}): {', '.join(f'{n} {s}' for s, n in counts.items())}"


#: Platform and GPU, with the CUDA builds seen there and, under the interpreter axis's own name, the interpreters.
Host = Annotated[dict[str, str | _Strings | None], msgspec.Meta(description="platform, gpu, cuda, cells and the interpreters by axis name")]


class Compat(Struct):
    """What the report writes (compat.json) and reads back as a baseline (baseline.json)."""

    schema: Literal["bugmatrix.compat/1", "bugmatrix.compat/2", "bugmatrix.compat/3", "bugmatrix.compat/4"]
    cells: tuple[Cell, ...]
    variants: tuple[Variant, ...]
    results: Annotated[dict[str, dict[str, Entry]], msgspec.Meta(description="variant id -> cell id -> entry")]
    generated: str = ""
    commit: str = ""
    profile: str = ""
    profile_source: str = ""
    axes: tuple[Axis, ...] = ()
    environments: tuple[Host, ...] = ()
    tracking: Tracking | None = None
    stale: Annotated[_Names, msgspec.Meta(description="variant ids recorded by a run but not planned")] = ()
    expectation: ExpectationSummary | None = None
    releases: tuple[ReleaseNote, ...] = ()
    moved: tuple[Moved, ...] = ()
    reresolved: FreshLane | None = None

    def __post_init__(self) -> None:
        if self.profile:  # it reaches file names, the site's paths and the issue bodies' links: one rule everywhere
            profile_name(self.profile, "key 'profile'", ValueError)


#: The baseline is a compat document of an earlier night: one model, one schema.
Baseline = Compat
