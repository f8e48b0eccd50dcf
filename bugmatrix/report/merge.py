"""Merge run files into one compat document (:class:`~bugmatrix.report.model.Compat`): every view's single input.

A cell whose install failed gets ``install-failed`` for every variant; an expected result no run recorded is ``missing``
with why. A run whose pins disagree with the plan's for its cell is refused.
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Mapping, Sequence

import msgspec

from bugmatrix.cell.case import Variant as CaseVariant
from bugmatrix.cell.outcomes import Kind, Outcome, Verdict, judge
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.documents import compat as document
from bugmatrix.documents.compat import Axis, Cell, CellInstall, Entry, ExpectationSource, InstallStatus, Tracking, Variant
from bugmatrix.documents.plan import PlanDocument
from bugmatrix.documents.run import Origin, TrackedPin, UnreadableRun
from bugmatrix.errors import BugmatrixError
from bugmatrix.report.expectation import SELECTIONS, Expectation, from_plan, is_system
from bugmatrix.report.model import COMPAT_SCHEMA, Compat
from bugmatrix.versions import parse_version

__all__ = ["LOG_LIMIT", "merge_runs", "version_order"]

#: The tail of a log is where the error is; 2 kB per entry keeps a 1,000-cell report small.
LOG_LIMIT = 2000
#: Interpreter paths differ per machine and say nothing about compatibility.
PRIVATE_ENVIRONMENT_KEYS = frozenset({"executable"})
#: The suffix of the environment key naming the distribution that provided an axis (bugmatrix.cell.environment).
PACKAGE_SUFFIX = "_package"


def _failed(run: RunRecord) -> bool:
    return InstallStatus(run.install.get("status", InstallStatus.OK)) is InstallStatus.FAILED


def _cell(run: RunRecord) -> Cell:
    return Cell(
        id=run.cell,
        pins=dict(run.pins),
        environment={k: v for k, v in run.environment.items() if k not in PRIVATE_ENVIRONMENT_KEYS},
        install=CellInstall(InstallStatus(run.install.get("status", InstallStatus.OK)), run.install.get("reason", "")),
        started=run.started,
        finished=run.finished,
        duration_s=run.wall_s,
        complete=run.complete,
        deselected_by=run.deselected_by,
        tracked={axis: TrackedPin(t.get("requested", ""), t.get("resolved", "")) for axis, t in run.tracked.items()},
        input_key=str((run.input_key or {}).get("digest", "")),
        origin=msgspec.convert(run.origin, Origin | None),
        reused_from=msgspec.convert(run.reused_from, Origin | None),
    )


def _tracking(runs: Sequence[RunRecord], expectation: Expectation) -> Tracking:
    """The plan's resolution when given, else what the run files recorded (empty when nothing tracked a release)."""
    if expectation.tracking is not None:
        return expectation.tracking
    axes: dict[str, TrackedPin] = {}
    for run in runs:
        for axis, tracked in run.tracked.items():
            axes.setdefault(axis, TrackedPin(tracked.get("requested", ""), tracked.get("resolved", "")))
    return Tracking(axes)


def _environments(runs: Sequence[RunRecord], interpreter: str | None) -> tuple[document.Host, ...]:
    hosts: dict[tuple[str, str], tuple[str | None, list[str], list[str], list[str]]] = {}
    for run in runs:
        env = run.environment
        if _failed(run) and not env:
            continue  # nothing was observed in a cell that never installed
        key = (str(env.get("platform") or "unknown platform"), str(env.get("gpu") or ""))
        _, cuda, interpreters, cells = hosts.setdefault(key, (env.get("gpu") or None, [], [], []))
        for seen, value in ((cuda, env.get("cuda")), (interpreters, env.get(interpreter) if interpreter else None)):
            if value and str(value) not in seen:
                seen.append(str(value))
        cells.append(run.cell)
    named = interpreter or "interpreter"  # the document lists a host's interpreters under the interpreter axis's name
    return tuple({"platform": key[0], "gpu": gpu, "cuda": cuda, named: py, "cells": cells} for key, (gpu, cuda, py, cells) in hosts.items())


def _entry(record: VariantRecord, declared: CaseVariant | None = None, versions: Mapping[str, str] | None = None) -> Entry:
    """The record as an entry; one recorded ``new`` is judged against what its case declares now (its outcome unchanged)."""
    # A record built in code (not loaded from a file) may carry the enums' words; the model holds the enums.
    outcome, verdict, expected = record.outcome, record.verdict, record.expected
    if verdict == Verdict.NEW and declared is not None and (now := declared.expectation(versions or {})) is not None:
        expected, verdict = now.outcome, judge(Outcome(outcome), now.outcome)
    return Entry(
        outcome=outcome if type(outcome) is Outcome else Outcome(outcome),
        verdict=verdict if type(verdict) is Verdict or verdict is None else Verdict(verdict),
        expected=expected if type(expected) is Outcome or expected is None else Outcome(expected),
        message=record.message,
        log=record.log[-LOG_LIMIT:],
        leaked=tuple(record.leaked),
        duration_s=record.duration_s,
    )


def _axes(runs: Sequence[RunRecord], expectation: Expectation) -> tuple[Axis, ...]:
    """Axis names, order, short names and which is the interpreter: the plan's, else read back from the cell ids.

    Without a plan: an order every cell id agrees with; the interpreter is the axis whose distribution the environment
    does not record (no ``<axis>_package``), else the prefix that drops its dots (``py311``).
    """
    prefixes: dict[str, str] = {}
    dotless: set[str] = set()
    sequences: list[list[str]] = []  # each cell id's axes, in the order the id names them
    for run in runs:
        parts = run.cell.split("-")
        placed: dict[str, int] = {}
        for axis, version in run.pins.items():
            for position, part in enumerate(parts):
                text = next((t for t in (version, version.replace(".", "")) if part.endswith(t) and len(part) > len(t)), None)
                if text is not None:
                    placed[axis] = position
                    prefixes.setdefault(axis, part[: -len(text)])
                    if text != version:
                        dotless.add(axis)
                    break
        sequences.append(sorted(placed, key=placed.__getitem__) + sorted(a for a in run.pins if a not in placed))
    observed = [r for r in runs if r.environment and any(k.endswith(PACKAGE_SUFFIX) for k in r.environment)]
    packaged = {k.removesuffix(PACKAGE_SUFFIX) for r in observed for k in r.environment if k.endswith(PACKAGE_SUFFIX)}
    unpackaged = {a for r in observed for a in r.pins if a not in packaged}
    interpreters = unpackaged if observed else dotless
    axes = expectation.axes or tuple(Axis(a, prefixes.get(a, a)) for a in _agreed_order(sequences))
    return axes if any(a.interpreter for a in axes) else tuple(msgspec.structs.replace(a, interpreter=a.name in interpreters) for a in axes)


def _agreed_order(sequences: Sequence[Sequence[str]]) -> list[str]:
    """The axes in an order every cell id keeps, ties by name; ids that contradict each other: by name alone."""
    after: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for sequence in sequences:
        for axis in sequence:  # an axis no other precedes is a node too
            after.add(axis)
        for earlier, later in itertools.pairwise(sequence):
            after.add(later, earlier)
    try:
        after.prepare()
    except graphlib.CycleError:
        return sorted({axis for sequence in sequences for axis in sequence})
    order: list[str] = []
    while after.is_active():
        ready = sorted(after.get_ready())
        order.extend(ready)
        after.done(*ready)
    return order


def _variant(record: VariantRecord) -> Variant:
    return Variant(
        id=record.id,
        case=record.case,
        name=record.variant,
        device=record.device,
        kind=record.kind if type(record.kind) is Kind or not record.kind else Kind(record.kind),
        workaround_for=record.workaround_for,
        counterpart=record.counterpart,
        evidence=record.evidence,
        axes=record.axes,
        pinned=record.pinned,
    )


def _missing(
    runs: Sequence[RunRecord],
    expectation: Expectation,
    results: dict[str, dict[str, Entry]],
    variants: dict[str, Variant],
    unreadable: Mapping[str, UnreadableRun],
) -> None:
    """Add a ``missing`` entry for each expected result no run holds (an unreadable run file holds none, and says why)."""
    by_cell = {run.cell: run for run in runs}
    order = [c.id for c in expectation.cells] + [r.cell for r in runs if r.cell not in expectation.by_id]
    order += [c for c in unreadable if c not in order]
    known = list(variants)
    noun = "planned" if expectation.summary.source is ExpectationSource.PLAN else "expected"
    for cell_id in order:
        run = by_cell.get(cell_id)
        if run is not None and _failed(run):
            continue  # install-failed entries already stand for every variant
        expected = expectation.variants_for(cell_id, run)
        bad = unreadable.get(cell_id) if run is None else None
        if bad is not None and not expected:
            # No plan or baseline names this cell's variants: what the file still says it selected, else every known one.
            expected = bad.selected or tuple(known)
        for variant_id in expected:
            if cell_id in results.get(variant_id, {}):
                continue
            if run is not None and run.deselected_by and variant_id not in run.selected:
                continue  # the user narrowed this run on purpose (-k/-m); the run file says so
            if bad is not None:
                why = f"unreadable run file: {bad.why}"
            elif run is None:
                why = "no run file for this cell: its job did not run, or its run file was lost"
            else:
                why = f"the run recorded {len(run.results)} of {len(expected)} {noun} variants" + (
                    "" if run.complete else " and never completed (killed or crashed mid-run)"
                )
            results.setdefault(variant_id, {})[cell_id] = Entry(Outcome.MISSING, Verdict.NOT_RUN, message=why)
            if variant_id not in variants:
                variants[variant_id] = Variant.from_id(variant_id)


def _attach_workarounds(variants: Sequence[Variant], results: dict[str, dict[str, Entry]], siblings: Mapping[str, Sequence[str]]) -> None:
    """For each reproduced entry: the workarounds of its case and device fixed in the same pins (its cell or a sibling)."""
    helpers: dict[tuple[str, str, str], list[Variant]] = {}
    for w in variants:
        if w.workaround_for:
            helpers.setdefault((w.case, w.device, w.workaround_for), []).append(w)
    for variant in variants:
        candidates = helpers.get((variant.case, variant.device, variant.name), [])
        if not candidates:
            continue
        per_cell = results.get(variant.id, {})
        for cell, entry in per_cell.items():
            if entry.outcome is Outcome.REPRODUCED:
                home = next((base for base, others in siblings.items() if cell in others), cell)
                where = (home, *siblings.get(home, ()))
                found = {w.name: [o.outcome for c in where if (o := results.get(w.id, {}).get(c)) is not None] for w in candidates}
                held = tuple(name for name, outcomes in found.items() if Outcome.FIXED in outcomes)
                tried = tuple(name for name, outcomes in found.items() if any(o.ran for o in outcomes))
                per_cell[cell] = msgspec.structs.replace(entry, workarounds=held, tried=tried)


def merge_runs(
    runs: Sequence[RunRecord],
    *,
    profile: str,
    commit: str,
    generated: str,
    plan: PlanDocument | None = None,
    expectation: Expectation | None = None,
    profile_source: str = "",
    declared: Mapping[str, tuple[str, ...]] | None = None,
    cases: Mapping[str, CaseVariant] | None = None,
    unreadable: Sequence[UnreadableRun] = (),
) -> Compat:
    """One compat document from run files: cells in the plan's order (else as given), then the expected cells no run holds.

    ``expectation`` says what should be there (a bare ``plan``: ``from_plan(plan)``); ``declared`` and ``cases`` (by
    variant id) stand in for what older run files did not record (axes, old checks, the expectation of a ``new`` result).
    """
    if expectation is None:
        expectation = from_plan(plan) if plan is not None else Expectation(SELECTIONS)
    planned = expectation.summary.source is ExpectationSource.PLAN
    seen: set[str] = set()
    for run in runs:
        if run.cell in seen:
            # Two files claiming one cell would silently overwrite each other's results.
            msg = f"cell {run.cell!r} appears in two run files; delete the stale one from the runs directory and re-run the report"
            raise BugmatrixError(msg)
        seen.add(run.cell)
        if planned and (cell := expectation.by_id.get(run.cell)) is not None and dict(cell.pins) != run.pins:
            msg = f"run file of {run.cell}: pins {run.pins} differ from the plan's {dict(cell.pins)}; re-run the cell with this plan"
            raise BugmatrixError(msg)
    if planned:
        order = {c.id: i for i, c in enumerate(expectation.cells)}
        runs = sorted(runs, key=lambda r: (-1 if is_system(r.cell) else order.get(r.cell, len(order)), r.cell))

    variants: dict[str, Variant] = {}
    results: dict[str, dict[str, Entry]] = {}
    for run in runs:
        for record in run.results:
            known = variants.get(record.id)
            if known is None:
                variants[record.id] = _variant(record)
            elif known.kind is None and record.kind:  # a crashed record knows no kind; another cell does
                variants[record.id] = msgspec.structs.replace(
                    known, kind=record.kind, workaround_for=record.workaround_for, evidence=record.evidence, axes=record.axes
                )
            elif known.axes is None and record.axes is not None:
                variants[record.id] = msgspec.structs.replace(known, axes=record.axes)
            results.setdefault(record.id, {})[run.cell] = _entry(record, (cases or {}).get(record.id), run.environment)
    for run in runs:
        if _failed(run):
            reason = run.install.get("reason", "")
            for variant_id in expectation.variants_for(run.cell, run) or list(variants):
                variants.setdefault(variant_id, Variant.from_id(variant_id))
                results.setdefault(variant_id, {})[run.cell] = Entry(Outcome.INSTALL_FAILED, Verdict.NOT_RUN, message=reason)
    refused = {bad.cell: bad for bad in unreadable if bad.cell not in seen}
    _missing(runs, expectation, results, variants, refused)
    stale: tuple[str, ...] = ()
    cells = [_cell(run) for run in runs]
    if planned:
        planned_ids = {v for c in expectation.cells for v in c.variants}
        stale = tuple(sorted(v for v in variants if v not in planned_ids and any(not is_system(c) for c in results.get(v, {}))))
    absent = {c.id: c.pins for c in expectation.cells if c.id not in seen}  # the plan's order, then unreadable unplanned cells
    for bad in refused.values():
        absent.setdefault(bad.cell, bad.pins)
    why = {cell: "unreadable run file" if cell in refused else "no run file" for cell in absent}
    cells += [Cell(cell, dict(pins), install=CellInstall(InstallStatus.MISSING, why[cell])) for cell, pins in absent.items()]
    if declared:
        for vid, variant in variants.items():
            if variant.axes is None and vid in declared:
                variants[vid] = msgspec.structs.replace(variant, axes=tuple(declared[vid]))
    for vid, case_variant in (cases or {}).items():
        if vid in variants and case_variant.old_checks:
            variants[vid] = msgspec.structs.replace(variants[vid], old_checks=case_variant.old_checks)
    ordered = sorted(variants.values(), key=lambda v: (v.case, v.kind.order if v.kind else 9, v.name, v.device))
    siblings: dict[str, list[str]] = {}
    for expected in expectation.cells:
        if expected.sibling_of:
            siblings.setdefault(expected.sibling_of, []).append(expected.id)
    _attach_workarounds(ordered, results, siblings)
    axes = _axes(runs, expectation)
    interpreter = next((a.name for a in axes if a.interpreter), None)
    return Compat(
        schema=COMPAT_SCHEMA,
        generated=generated,
        commit=commit,
        profile=profile,
        axes=axes,
        cells=tuple(cells),
        variants=tuple(ordered),
        results=results,
        environments=_environments(runs, interpreter),
        tracking=_tracking(runs, expectation),
        stale=stale,
        expectation=expectation.summary,
        profile_source=profile_source,
    )


def version_order(run: RunRecord) -> tuple:
    """Sort key without a plan: the system cells first, then by the pins' versions (2.5.1 before 2.10.0)."""
    key = tuple(parse_version(run.pins.get(axis, "0")) or parse_version("0") for axis in run.axes or sorted(run.pins))
    return (not is_system(run.cell), key, run.cell)
