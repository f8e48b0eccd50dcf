"""The merged night as typed, frozen values: what every analysis and every view reads.

Its parts are the document's own structs (:mod:`bugmatrix.documents.compat`); :class:`Compat` holds them with what the
night says about itself, cached. :func:`load_compat` reads a file of any version.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents import compat as document
from bugmatrix.documents.compat import Cell, Entry, ExpectationSource, ExpectationSummary, Tracking, Variant
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, read_bytes

__all__ = ["COMPAT_SCHEMA", "OLD_COMPAT_SCHEMAS", "REUSED", "Compat", "compat_json", "load_compat", "reused_note"]

#: The one place the compat document's version is named (the model in bugmatrix/documents/compat.py accepts it and the older ones).
COMPAT_SCHEMA = "bugmatrix.compat/4"
OLD_COMPAT_SCHEMAS = ("bugmatrix.compat/1", "bugmatrix.compat/2", "bugmatrix.compat/3")
FIX = "regenerate it with: nox -s report -- --update-baseline"
_DECODER = msgspec.json.Decoder(document.Compat)
#: What a night says without a tracked release, and without a plan or a baseline to hold its runs against.
_UNTRACKED = Tracking()
_RUNS_ONLY = ExpectationSummary(ExpectationSource.RUNS)
#: What :meth:`Compat.from_document` leaves out: the analyses of the night a document was written by (NightReport adds tonight's).
_NO_ANALYSES = {"releases": (), "moved": (), "reresolved": None}
#: A host's keys other than its interpreters (listed under the interpreter axis's name).
_HOST_KEYS = frozenset({"platform", "gpu", "cuda", "cells"})


#: The mark of a reused cell, its columns, its entries and its findings, in every view.
REUSED = "♻"


def reused_note(origin: str) -> str:
    """`` (♻ reused from <date, commit, run>)`` after a line about a reused result ("" for one observed tonight)."""
    return f" ({REUSED} reused from {origin})" if origin else ""


class Compat(document.Compat, frozen=True, dict=True):
    """The merged night: cells (columns), variants (rows) and one entry per (variant, cell); derived facts cached.

    The document's own struct (its analyses left empty); ``dict=True`` lets it cache what it says about itself.
    """

    tracking: Tracking = _UNTRACKED
    expectation: ExpectationSummary = _RUNS_ONLY

    @cached_property
    def cell_by_id(self) -> dict[str, Cell]:
        return {c.id: c for c in self.cells}

    @cached_property
    def variant_by_id(self) -> dict[str, Variant]:
        return {v.id: v for v in self.variants}

    @cached_property
    def reused_cells(self) -> tuple[Cell, ...]:
        """The cells whose results were taken over from an earlier run."""
        return tuple(c for c in self.cells if c.reused)

    @cached_property
    def reused_origins(self) -> dict[str, str]:
        """Cell id -> whose results it holds (:attr:`Origin.text`), for the reused cells."""
        return {c.id: c.reused_from.text for c in self.cells if c.reused_from is not None}

    def reuses(self, variant_id: str) -> bool:
        """Whether one of the variant's entries is a reused cell's."""
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

    @staticmethod
    def interpreters(host: document.Host) -> list[str]:
        """The interpreters seen on a host (an older document may list them under another key)."""
        return next((v for k, v in host.items() if k not in _HOST_KEYS and isinstance(v, list)), [])

    def entry(self, variant_id: str, cell_id: str) -> Entry | None:
        return self.results.get(variant_id, {}).get(cell_id)

    def entries(self, variant_id: str) -> Mapping[str, Entry]:
        return self.results.get(variant_id, {})

    @cached_property
    def ran_variants(self) -> frozenset[str]:
        """The variants with an entry that is an outcome of running them (not skipped, install-failed or missing)."""
        ran = frozenset(o for o in Outcome if o.ran)
        return frozenset(vid for vid, per_cell in self.results.items() if any(e.outcome in ran for e in per_cell.values()))

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
        """``NVIDIA H200 · CUDA 13.0 · 2026-11-27: system-cuda-h200 (torch 2.11.0 · …)``: the cells that ran on a GPU, per GPU."""
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

    @cached_property
    def source_builds(self) -> list[str]:
        """One line per cell whose environment built a distribution from source (slow, and another binary than a wheel's)."""
        lines = []
        for cell in self.cells:
            if built := cell.environment.get("source_builds"):
                names = ", ".join(f"{name} {version}" for name, version in sorted(built.items()))
                lines.append(f"built from source in {cell.id}: {names} (no wheel for its Python; refuse with [harness] source_builds)")
        return lines

    def with_entry(self, variant_id: str, cell_id: str, **changes: Any) -> Compat:
        """This document with one entry changed (``outcome=Outcome.REPRODUCED, message=...``); the original is untouched."""
        entry = msgspec.convert(msgspec.structs.asdict(self.results[variant_id][cell_id]) | changes, Entry)  # "reproduced" read as the enum
        per_cell = {**self.results[variant_id], cell_id: entry}
        return msgspec.structs.replace(self, results={**self.results, variant_id: per_cell})

    @classmethod
    def from_document(cls, doc: document.Compat) -> Compat:
        """The night of a compat document of any known version (its analyses left out): what an older one lacks takes its default."""
        axes = tuple(a if a.prefix else msgspec.structs.replace(a, prefix=a.name) for a in doc.axes)
        defaults = {"axes": axes, "tracking": doc.tracking or _UNTRACKED, "expectation": doc.expectation or _RUNS_ONLY}
        return cls(**msgspec.structs.asdict(doc) | defaults | _NO_ANALYSES)


def compat_json(doc: document.Compat) -> dict[str, Any]:
    """Plain data for compat.json; a variant's ``axes``, ``pinned``, ``old_checks`` and an entry's ``tried`` only when said."""
    data = msgspec.json.decode(msgspec.json.encode(doc))  # what the file holds: lists, never the structs' tuples
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
