"""The compat document (``reports/compat.json``) and the baseline (``reports/baseline.json``, an earlier compat document).

The report builds it from typed values (:mod:`bugmatrix.report.model`); this model says what a valid document is for
every version the report still reads, and generates ``json/compat.schema.json``. The report's own enums are spelled
here as literals, kept in step by the tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.documents.run import Origin, TrackedPin
from bugmatrix.values import profile_name

__all__ = ["Baseline", "CellEntry", "Compat", "Entry", "Host", "ReleaseNote", "Variant"]

_Strings = list[str]


class Struct(msgspec.Struct, forbid_unknown_fields=True):
    """A part of the document: an unknown key is an error (a typo, or a file from a newer harness)."""


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
    """How a cell's environment build ended: ``missing`` is a planned cell without a run file."""

    status: Literal["ok", "failed", "missing"]
    reason: str = ""


class CellEntry(Struct):
    """One pinned environment: pins as requested, environment as observed, and how its run went."""

    id: str
    pins: dict[str, str]
    environment: Annotated[dict[str, Any], msgspec.Meta(description="as observed inside the cell (bugmatrix/cell/environment.py)")] = {}
    install: CellInstall = msgspec.field(default_factory=lambda: CellInstall("ok"))
    started: str = ""
    finished: str = ""
    duration_s: float | None = None
    complete: bool = False
    deselected_by: str = ""
    tracked: dict[str, TrackedPin] = {}
    input_key: Annotated[str, msgspec.Meta(description="digest of what the cell's results depend on; empty where none was recorded")] = ""
    origin: Origin | None = None
    reused_from: Origin | None = None


class Variant(Struct):
    """One row of the table: a case variant on one device, and what it is to its case."""

    id: str
    case: str
    variant: str
    device: str
    kind: Kind | None = None
    workaround_for: str | None = None
    counterpart: str | None = None
    evidence: str = ""
    axes: _Strings | None = None
    pinned: str = ""
    old_checks: _Strings = []


class Entry(Struct):
    """One result: a variant in a cell, against its expectation."""

    outcome: Outcome
    verdict: Verdict | None = None
    expected: Outcome | None = None
    message: str = ""
    log: str = ""
    leaked: _Strings = []
    duration_s: float | None = 0.0
    workarounds: _Strings = []
    tried: Annotated[_Strings | None, msgspec.Meta(description="the workarounds that ran in the same cell at all (absent: not said)")] = (
        None
    )


class Expectation(Struct):
    """Which expectation the report used, and what it left out on purpose."""

    source: Literal["plan", "baseline", "runs"]
    text: str = ""
    dropped: _Strings = []
    dropped_results: Annotated[int, msgspec.Meta(ge=0)] = 0


class ReleaseNote(Struct):
    """How a variant in a new release compares with the previous release of its axis."""

    axis: str
    version: str
    variant: str
    cell: str
    outcome: Outcome
    kind: Literal["same", "regression-candidate", "fix-candidate", "as-declared", "changed", "first", "does-not-install"]
    text: str
    previous_version: str | None = None
    previous_outcome: Outcome | None = None
    reason: str = ""


class Moved(Struct):
    """A result whose environment moved below its pins since the baseline, and whose outcome changed with it."""

    variant: str
    cell: str
    before: Outcome
    after: Outcome
    moved: _Strings


class FreshDifference(Struct):
    """A variant whose outcome differs between a cell's locked run and its fresh sibling."""

    variant: str
    locked: Outcome
    fresh: Outcome
    message: str = ""


class FreshCell(Struct):
    """One cell of the re-resolve lane: did a fresh resolution move anything, and did its sibling run."""

    cell: str
    status: Literal["same", "moved", "failed", "unlocked"]
    moved: Annotated[_Strings, msgspec.Meta(description="what moved below the pins: name old → new, +added, -removed")] = []
    reason: str = ""
    sibling: Literal["", "ran", "reused", "install-failed", "not-run"] = ""
    origin: Origin | None = None
    differences: list[FreshDifference] = []


class FreshLane(Struct):
    """The re-resolve lane: each cell resolved again without its lock."""

    resolved_at: str
    cells: list[FreshCell]
    as_of: Annotated[str | None, msgspec.Meta(description="resolved as the registry stood then (uv --exclude-newer)")] = None
    held: dict[str, str] = {}
    stale: _Strings = []


#: Platform and GPU, with the CUDA builds seen there and, under the interpreter axis's own name, the interpreters.
Host = Annotated[dict[str, str | _Strings | None], msgspec.Meta(description="platform, gpu, cuda, cells and the interpreters by axis name")]


class Compat(Struct):
    """What the report writes (compat.json) and reads back as a baseline (baseline.json)."""

    schema: Literal["bugmatrix.compat/1", "bugmatrix.compat/2", "bugmatrix.compat/3", "bugmatrix.compat/4"]
    cells: list[CellEntry]
    variants: list[Variant]
    results: Annotated[dict[str, dict[str, Entry]], msgspec.Meta(description="variant id -> cell id -> entry")]
    generated: str = ""
    commit: str = ""
    profile: str = ""
    profile_source: str = ""
    axes: list[Axis] = []
    environments: list[Host] = []
    tracking: Tracking | None = None
    stale: Annotated[_Strings, msgspec.Meta(description="variant ids recorded by a run but not planned")] = []
    expectation: Expectation | None = None
    releases: list[ReleaseNote] = []
    moved: list[Moved] = []
    reresolved: FreshLane | None = None

    def __post_init__(self) -> None:
        if self.profile:  # it reaches file names, the site's paths and the issue bodies' links: one rule everywhere
            profile_name(self.profile, "key 'profile'", ValueError)


#: The baseline is a compat document of an earlier night: one model, one schema.
Baseline = Compat
