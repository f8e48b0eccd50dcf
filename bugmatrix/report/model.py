"""The compat document as typed, frozen values: what every analysis and every view reads.

Its JSON form is declared by :class:`bugmatrix.documents.compat.Compat`: :meth:`Compat.to_document` and
:meth:`Compat.from_document` convert, and :func:`load_compat` reads a file of any version (a defect is one line).
What a document says about itself (axes, the interpreter, short names, which pins tell cells apart) is cached here.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.documents import compat as document
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, read_bytes

__all__ = [
    "COMPAT_SCHEMA",
    "OLD_COMPAT_SCHEMAS",
    "REUSED",
    "Axis",
    "Cell",
    "Compat",
    "Entry",
    "ExpectationSource",
    "ExpectationSummary",
    "Host",
    "Install",
    "InstallStatus",
    "Origin",
    "TrackedPin",
    "Tracking",
    "Variant",
    "compat_json",
    "load_compat",
    "reused_note",
]

#: The one place the compat document's version is named (the model in bugmatrix/documents/compat.py accepts it and the older ones).
COMPAT_SCHEMA = "bugmatrix.compat/4"
OLD_COMPAT_SCHEMAS = ("bugmatrix.compat/1", "bugmatrix.compat/2", "bugmatrix.compat/3")
FIX = "regenerate it with: nox -s report -- --update-baseline"
_DECODER = msgspec.json.Decoder(document.Compat)


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


@dataclass(frozen=True, slots=True)
class Axis:
    """One axis of the document, in display order: its name, its short name in cell ids, and whether it is the interpreter."""

    name: str
    prefix: str
    interpreter: bool = False


@dataclass(frozen=True, slots=True)
class TrackedPin:
    """A pin a profile asked for symbolically: ``latest`` resolved to ``2.15.0``."""

    requested: str
    resolved: str


@dataclass(frozen=True, slots=True)
class Tracking:
    """What ``latest`` meant for this report: the plan's resolution, else what the run files recorded."""

    axes: Mapping[str, TrackedPin] = field(default_factory=dict)
    resolved_at: str | None = None
    stale: bool = False


#: The mark of a reused cell, its columns, its entries and its findings, in every view.
REUSED = "♻"


def reused_note(origin: str) -> str:
    """`` (♻ reused from <date, commit, run>)`` after a line about a reused result ("" for one observed tonight)."""
    return f" ({REUSED} reused from {origin})" if origin else ""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where results were observed: when, by which commit, in which run (a CI run's URL, or ``local <host>``)."""

    date: str
    commit: str = ""
    run: str = ""

    @property
    def text(self) -> str:
        """``2026-11-22T03:17:40+00:00, commit abc1234, https://github.com/…/runs/1/attempts/1``: what every view says of a reused result."""
        return f"{self.date}, commit {self.commit or '?'}, {self.run or 'run unknown'}"

    @property
    def day(self) -> str:
        return self.date[:10]

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Origin | None:
        if not data:
            return None
        return cls(str(data.get("date", "")), str(data.get("commit", "")), str(data.get("run", "")))


@dataclass(frozen=True, slots=True)
class Install:
    """How a cell's environment build ended, and the resolver's reason when it failed."""

    status: InstallStatus = InstallStatus.OK
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Cell:
    """One pinned environment: pins as requested, environment as observed, and how its run went."""

    id: str
    pins: Mapping[str, str]
    environment: Mapping[str, Any] = field(default_factory=dict)
    install: Install = Install()
    started: str = ""
    finished: str = ""
    duration_s: float | None = None
    complete: bool = False
    deselected_by: str = ""
    tracked: Mapping[str, TrackedPin] = field(default_factory=dict)
    input_key: str = ""  # the digest of what its results depend on (bugmatrix/run/inputkey.py); "" where none was recorded
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


@dataclass(frozen=True, slots=True)
class Variant:
    """One row of the table: a case variant on one device, and what it is to its case."""

    id: str
    case: str
    name: str
    device: str
    kind: Kind | None = None  # None only for a variant no run could describe (a crash record, a planned id)
    workaround_for: str | None = None
    counterpart: str | None = None
    evidence: str = ""
    #: The axes the variant declares it spans: the only axes it is read along (:mod:`~bugmatrix.report.boundaries`).
    #: None where nothing said (an older document, a variant no run or case described).
    axes: tuple[str, ...] | None = None
    #: A pin workaround's requirement on an axis (``transformers<=4.51.3``): read as avoiding the bug where it is absent.
    pinned: str = ""
    #: Checks the case says the variant no longer makes (``old_checks``): a result whose message names one was taken
    #: under an old check, and every view says so beside it.
    old_checks: tuple[str, ...] = ()

    def old_check(self, entry: Entry) -> str:
        """The old check ``entry``'s message names ("" if none): the result stands as recorded, under that check."""
        return next((check for check in self.old_checks if check in entry.message), "")

    @property
    def tag(self) -> str:
        """The id's tag: the device, or ``device-dtype`` where one variant declares two dtypes on one device."""
        try:
            return VariantId.parse(self.id).tag
        except ValueError:
            return self.device

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


@dataclass(frozen=True, slots=True)
class Entry:
    """One result: a variant in a cell, against its expectation, with its message, log and the workarounds that held there."""

    outcome: Outcome
    verdict: Verdict | None = None
    expected: Outcome | None = None
    message: str = ""
    log: str = ""
    leaked: tuple[str, ...] = ()
    duration_s: float | None = 0.0
    workarounds: tuple[str, ...] = ()  # for a reproduced entry: the workarounds of its case and device fixed in this cell
    tried: tuple[str, ...] | None = None  # for a reproduced entry: those of them that ran here at all (None: not said, older)

    @property
    def flagged(self) -> bool:
        """The outcome differs from its expectation (regression, unexpected fix, new failure mode)."""
        return self.verdict is not None and self.verdict.flagged

    @property
    def as_declared(self) -> bool:
        """The outcome is what its expectation declares here: a change into it is no regression (candidate)."""
        return self.expected is not None and self.outcome is self.expected


@dataclass(frozen=True, slots=True)
class Host:
    """A machine the cells ran on, for the report header: platform and GPU, with the CUDA builds and interpreters seen there."""

    platform: str
    gpu: str | None = None
    cuda: tuple[str, ...] = ()
    interpreters: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()

    def to_document(self, interpreter: str) -> document.Host:
        """The model leaves a host a plain mapping: the interpreters' versions are under the interpreter axis's own name."""
        return {
            "platform": self.platform,
            "gpu": self.gpu,
            "cuda": list(self.cuda),
            interpreter: list(self.interpreters),
            "cells": list(self.cells),
        }

    @classmethod
    def from_document(cls, data: document.Host) -> Host:
        interpreters = next((v for k, v in data.items() if k not in ("platform", "gpu", "cuda", "cells") and isinstance(v, list)), [])
        return cls(
            str(data.get("platform") or ""),
            data.get("gpu"),
            tuple(data.get("cuda") or ()),
            tuple(interpreters),
            tuple(data.get("cells") or ()),
        )


@dataclass(frozen=True, slots=True)
class ExpectationSummary:
    """Which expectation the report used, said on the page, and what it left out on purpose."""

    source: ExpectationSource = ExpectationSource.RUNS
    text: str = ""
    dropped: tuple[str, ...] = ()  # baseline cells the plan no longer has (dropped on purpose, not missing)
    dropped_results: int = 0  # baseline (variant, cell) results no longer planned or collected


@dataclass(frozen=True)
class Compat:
    """The merged night: cells (columns), variants (rows) and one entry per (variant, cell), in the merge's order.

    Derived facts are cached on first use: a full report asks them ~10^5 times.
    """

    generated: str
    commit: str
    profile: str
    axes: tuple[Axis, ...]
    cells: tuple[Cell, ...]
    variants: tuple[Variant, ...]
    results: Mapping[str, Mapping[str, Entry]]
    environments: tuple[Host, ...] = ()
    tracking: Tracking = Tracking()
    stale: tuple[str, ...] = ()  # variant ids recorded by a run but not planned (renamed or removed)
    expectation: ExpectationSummary = ExpectationSummary()
    profile_source: str = ""  # where the profile came from: the plan, --profile, the baseline, or an ad-hoc set
    schema: str = COMPAT_SCHEMA

    # -- what the document says about itself ------------------------------------------------------

    @cached_property
    def cell_by_id(self) -> dict[str, Cell]:
        return {c.id: c for c in self.cells}

    @cached_property
    def variant_by_id(self) -> dict[str, Variant]:
        return {v.id: v for v in self.variants}

    @cached_property
    def reused_cells(self) -> tuple[Cell, ...]:
        """The cells whose results were taken over from an earlier run (each view names them with their origin)."""
        return tuple(c for c in self.cells if c.reused)

    @cached_property
    def reused_origins(self) -> dict[str, str]:
        """Cell id -> whose results it holds (:attr:`Origin.text`), for the reused cells: every line about them says so."""
        return {c.id: c.reused_from.text for c in self.cells if c.reused_from is not None}

    def reuses(self, variant_id: str) -> bool:
        """Whether one of the variant's entries is a reused cell's: a line that reads the variant then says ♻."""
        return not self.reused_origins.keys().isdisjoint(self.entries(variant_id))

    @cached_property
    def axis_names(self) -> tuple[str, ...]:
        """Every axis pinned by at least one cell, in the document's display order (unknown ones after, sorted)."""
        order = [a.name for a in self.axes]
        seen = {axis for cell in self.cells for axis in cell.pins}
        return tuple([a for a in order if a in seen] + sorted(seen.difference(order)))

    @cached_property
    def interpreter(self) -> str | None:
        """The axis that is the interpreter (its pins are Pythons, not distributions), if the document knows one."""
        return next((a.name for a in self.axes if a.interpreter), None)

    @cached_property
    def _shorts(self) -> dict[str, str]:
        return {a.name: a.prefix for a in self.axes}

    def short(self, axis: str) -> str:
        """An axis's short name in headings, as in cell ids (the prefix the plan gives it)."""
        return self._shorts.get(axis, axis)

    def entry(self, variant_id: str, cell_id: str) -> Entry | None:
        return self.results.get(variant_id, {}).get(cell_id)

    def entries(self, variant_id: str) -> Mapping[str, Entry]:
        return self.results.get(variant_id, {})

    @cached_property
    def _ran_variants(self) -> frozenset[str]:
        ran = frozenset(o for o in Outcome if o.ran)
        return frozenset(vid for vid, per_cell in self.results.items() if any(e.outcome in ran for e in per_cell.values()))

    def ran_anywhere(self, variant_id: str) -> bool:
        """Some entry of the variant is an outcome of running it (not skipped, install-failed or missing)."""
        return variant_id in self._ran_variants

    @cached_property
    def varying_and_shared(self) -> tuple[list[str], dict[str, str]]:
        """Axes whose pin differs between the cells, and the pins every cell shares (said once above a table)."""
        varying: list[str] = []
        shared: dict[str, str] = {}
        for axis in self.axis_names:
            values = {c.pins.get(axis, "") for c in self.cells}
            if len(values) == 1 and "" not in values:
                shared[axis] = values.pop()
            else:
                varying.append(axis)
        return varying, shared

    def tracking_text(self) -> str:
        """``torch latest = 2.15.0 · lightning latest = 2.6.6`` (+ when, and a warning if it was a saved answer); "" if none."""
        order = [a.name for a in self.axes]
        axes = sorted(self.tracking.axes, key=lambda a: order.index(a) if a in order else len(order))
        parts = [f"{axis} {self.tracking.axes[axis].requested} = {self.tracking.axes[axis].resolved}" for axis in axes]
        if not parts:
            return ""
        when = f" (resolved {self.tracking.resolved_at})" if self.tracking.resolved_at else ""
        stale = "; registry unreachable: the last saved resolution" if self.tracking.stale else ""
        return " · ".join(parts) + when + stale

    def gpu_runs_text(self) -> str:
        """``NVIDIA H200 · CUDA 13.0 · 2026-11-27: system-cuda-h200 (torch 2.11.0 · pl 2.6.6 · tf 5.17.0); …``: the cells that
        ran on a GPU, per GPU, with the day and the stack each observed; "" where none did."""
        groups: dict[tuple[str, str, str], list[str]] = {}
        for cell in self.cells:
            gpu = cell.observed("gpu")
            if not gpu:
                continue
            stack = " · ".join(f"{self.short(a)} {v}" for a in (x.name for x in self.axes if not x.interpreter) if (v := cell.observed(a)))
            groups.setdefault((gpu, cell.observed("cuda"), cell.started[:10]), []).append(f"{cell.id} ({stack})" if stack else cell.id)
        return "; ".join(
            f"{gpu} · CUDA {cuda or '?'} · {day or 'date unknown'}: {', '.join(cells)}" for (gpu, cuda, day), cells in groups.items()
        )

    # -- new documents from this one (tests, what-ifs) ------------------------------------------

    def with_entry(self, variant_id: str, cell_id: str, **changes: Any) -> Compat:
        """This document with one entry changed (``outcome=Outcome.REPRODUCED, message=...``); the original is untouched."""
        entry = self.results[variant_id][cell_id]
        changes = {
            k: (Outcome(v) if k in ("outcome", "expected") and v else Verdict(v) if k == "verdict" and v else v) for k, v in changes.items()
        }
        per_cell = {**self.results[variant_id], cell_id: dataclasses.replace(entry, **changes)}
        return dataclasses.replace(self, results={**self.results, variant_id: per_cell})

    # -- the document (bugmatrix.documents.compat) -----------------------------------------------

    def to_document(self) -> document.Compat:
        """This night as the model of compat.json (:meth:`NightReport.to_document` adds the analyses)."""
        return document.Compat(
            schema=self.schema,
            generated=self.generated,
            commit=self.commit,
            profile=self.profile,
            profile_source=self.profile_source,
            axes=_convert(self.axes, list[document.Axis]),
            environments=[h.to_document(self.interpreter or "interpreter") for h in self.environments],
            tracking=_convert(self.tracking, document.Tracking),
            cells=_convert(self.cells, list[document.CellEntry]),
            variants=[_variant_document(v) for v in self.variants],
            results=_convert(self.results, dict[str, dict[str, document.Entry]]),
            stale=list(self.stale),
            expectation=_convert(self.expectation, document.Expectation),
        )

    @classmethod
    def from_document(cls, doc: document.Compat) -> Compat:
        """The values of a compat document of any known version: what an older one lacks takes its default."""
        return cls(
            generated=doc.generated,
            commit=doc.commit,
            profile=doc.profile,
            axes=tuple(Axis(a.name, a.prefix or a.name, a.interpreter) for a in doc.axes),
            cells=_convert(doc.cells, tuple[Cell, ...]),
            variants=tuple(_variant(v) for v in doc.variants),
            results=_convert(doc.results, dict[str, dict[str, Entry]]),
            environments=tuple(Host.from_document(h) for h in doc.environments),
            tracking=_convert(doc.tracking, Tracking) if doc.tracking else Tracking(),
            stale=tuple(doc.stale),
            expectation=_convert(doc.expectation, ExpectationSummary) if doc.expectation else ExpectationSummary(),
            profile_source=doc.profile_source,
            schema=doc.schema,
        )

    @classmethod
    def from_json(cls, data: object) -> Compat:
        """A compat document from plain data (``json.load``), checked by the model; raises msgspec.ValidationError."""
        return cls.from_document(msgspec.convert(data, document.Compat))

    def to_json(self) -> dict[str, Any]:
        """Plain data for compat.json (:func:`compat_json`)."""
        return compat_json(self.to_document())


def _convert(value: object, into: Any) -> Any:
    """Between the report's values and the model's structs, field by field by name (both ways)."""
    return msgspec.convert(value, into, from_attributes=True)


def _variant_document(variant: Variant) -> document.Variant:
    fields = dataclasses.asdict(variant)
    fields["variant"] = fields.pop("name")  # the model's key for the report's name
    return _convert(fields, document.Variant)


def _variant(doc: document.Variant) -> Variant:
    fields = msgspec.structs.asdict(doc)
    fields["name"] = fields.pop("variant")
    return _convert(fields, Variant)


def compat_json(doc: document.Compat) -> dict[str, Any]:
    """Plain data for compat.json; a variant's ``axes``, ``pinned``, ``old_checks`` and an entry's ``tried`` only when said."""
    data = msgspec.to_builtins(doc)
    for variant in data["variants"]:
        for key, empty in (("axes", None), ("pinned", ""), ("old_checks", [])):
            if variant[key] == empty:
                del variant[key]
    for per_cell in data["results"].values():
        for entry in per_cell.values():
            if entry["tried"] is None:
                del entry["tried"]
    return data


def load_compat(path: Path) -> Compat:
    """Read a compat document (the baseline) of any known version; a defect is one line naming the file, the key and the fix."""
    raw = read_bytes(path, "compat document", fix=FIX)
    decode_json(raw, path, "compat document", fix=FIX)  # not JSON at all: the same line as every other reader's
    try:
        return Compat.from_document(_DECODER.decode(raw))
    except msgspec.ValidationError as exc:
        msg = f"{path}: malformed compat document ({type(exc).__name__}: {exc}); {FIX}"
        raise BugmatrixError(msg) from exc
