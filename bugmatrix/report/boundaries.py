"""Where a variant's outcome flips: the compat document as strips and grids, data the renderers print.

A variant is read along the axes it declares, never along axes picked from the data: every other pin is context it
was "held at". One varying declared axis is a strip, two a grid, none a list; disagreeing context makes a position
*mixed*. Workarounds and upstream variants are drawn on the picture of the variant they belong to.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

import msgspec

from bugmatrix.cell.outcomes import Kind, Outcome
from bugmatrix.documents.compat import Entry, Variant
from bugmatrix.report.marks import NOT_RUN, Flip, Mark, Picture, Track, symbol
from bugmatrix.report.model import Compat
from bugmatrix.versions import version_key

__all__ = ["Boundary", "by_case", "pictures"]

#: Roles a variant can play on another variant's picture: the kind, and the field naming its target.
JOINS = {Kind.WORKAROUND: "workaround_for", Kind.UPSTREAM: "counterpart"}
#: The most releases a strip or grid draws along its columns / rows and still fits 1280 px.
MAX_COLUMNS = 20
MAX_ROWS = 40
_RANK = {o: i for i, o in enumerate(Outcome)}
_SKIPPED, _INSTALL_FAILED, _MISSING = Outcome.SKIPPED, Outcome.INSTALL_FAILED, Outcome.MISSING  # NOT_RUN, by identity


def _ran(per_cell: Mapping[str, Entry]) -> set[str]:
    """The cells where the variant ran: not skipped, installed, recorded (20,000 entries a picture set: identity tests)."""
    return {cell for cell, e in per_cell.items() if (o := e.outcome) is not _SKIPPED and o is not _INSTALL_FAILED and o is not _MISSING}


def _marks(per_cell: Mapping[str, Entry], positions: Mapping[str, tuple[str, ...]]) -> dict[tuple[str, ...], Mark]:
    """Position -> Mark (``positions``: each drawn cell's); an install failure only shows where nothing else ran."""
    grouped: defaultdict[tuple[str, ...], dict[Outcome, list[str]]] = defaultdict(dict)
    undeclared: set[tuple[str, ...]] = set()
    for cell, entry in per_cell.items():
        key = positions.get(cell)
        if key is None:
            continue
        grouped[key].setdefault(outcome := entry.outcome, []).append(cell)
        if outcome is not entry.expected and outcome not in NOT_RUN:  # not as declared, and ran
            undeclared.add(key)
    marks = {}
    for key, by_outcome in grouped.items():
        declared = key not in undeclared
        if len(by_outcome) == 1:  # the common case: every cell folded here agrees
            ((outcome, cells),) = by_outcome.items()
            marks[key] = Mark((outcome,), tuple(cells), declared)
            continue
        usable = {o: c for o, c in by_outcome.items() if o not in NOT_RUN} or by_outcome
        order = sorted(usable, key=_RANK.__getitem__)
        marks[key] = Mark(tuple(order), tuple(c for o in order for c in usable[o]), declared)
    return marks


def _line_flips(line: list[tuple[str, Mark]], axis: str, shorts: Mapping[str, str]) -> list[Flip]:
    flips, last, last_index = [], None, -1
    for index, (value, mark) in enumerate(line):
        if (outcome := mark.read) is None:
            continue  # a gap (not planned here, not installed, mixed): the boundary lies somewhere across it
        if last is not None and outcome is not last[1]:
            short = shorts.get(axis, axis)
            flips.append(
                Flip(axis, last[0], value, last[1], outcome, adjacent=index == last_index + 1, axis_short=short, declared=mark.declared)
            )
        last, last_index = (value, outcome), index
    return flips


def _flips(
    marks: dict[tuple[str, ...], Mark], axes: tuple[str, ...], values: tuple[tuple[str, ...], ...], shorts: Mapping[str, str]
) -> list[Flip]:
    if len(axes) == 1:
        return _line_flips([(v, marks.get((v,), Mark())) for v in values[0]], axes[0], shorts)
    found: dict[tuple[str, str, str, Outcome, Outcome, bool], list[tuple[str, Flip]]] = {}
    readable: tuple[set[str], set[str]] = (set(), set())
    for along in (0, 1):
        for fixed in values[1 - along]:
            line = [(v, marks.get((v, fixed) if along == 0 else (fixed, v), Mark())) for v in values[along]]
            # A flip is "everywhere" when it occurs on every line that has two outcomes to compare: a line where nothing
            # (or one release) ran -- a missing cell, another case's column -- neither shows nor contradicts it.
            if sum(mark.read is not None for _, mark in line) > 1:
                readable[along].add(fixed)
            for f in _line_flips(line, axes[along], shorts):
                found.setdefault((f.axis, f.before, f.after, f.was, f.now, f.adjacent), []).append((fixed, f))
    flips = []
    for (axis, *_), seen in found.items():
        other, at = axes[1 - axes.index(axis)], tuple(fixed for fixed, _ in seen)
        declared = all(f.declared for _, f in seen)
        everywhere = set(at) >= readable[axes.index(axis)]
        flips.append(
            replace(seen[0][1], at=() if everywhere else at, other_axis=other, other_short=shorts.get(other, other), declared=declared)
        )
    return sorted(flips, key=lambda f: (axes.index(f.axis), version_key(f.after), f.was, f.now))


class _Cells:
    """The cells' pins, the document's axes and each axis's release order, computed once per document (1,000 cells x 20 variants)."""

    def __init__(self, compat: Compat) -> None:
        self.axes = list(compat.axis_names)
        # A cell that pins nothing (the system cell: the environment as it is) sits where its observed releases are
        # (``2.5.1+cu124`` -> ``2.5.1``).
        observed = {c.id: {a: seen.split("+")[0] for a in self.axes if (seen := c.observed(a))} for c in compat.cells if not c.pins}
        cells = tuple(msgspec.structs.replace(c, pins=observed[c.id]) if c.id in observed else c for c in compat.cells)
        self.pins = {c.id: c.pins for c in cells}
        self.gpu = {c.id: c.observed("gpu") for c in cells}
        self.interpreter = compat.interpreter
        self.shorts = {a: compat.short(a) for a in self.axes}
        # Ranks instead of Version objects: sorting a subset is then integer comparisons.
        self.rank = {a: {v: i for i, v in enumerate(sorted({c.pins.get(a, "") for c in cells}, key=version_key))} for a in self.axes}

    def values(self, ids: Iterable[str], axis: str) -> list[str]:
        return sorted({self.pins[c].get(axis, "") for c in ids}, key=self.rank[axis].__getitem__)


def _read_axes(group: list[Variant], counts: Mapping[str, int], cells: _Cells) -> tuple[list[str], str]:
    """The axes a picture reads its variant along (declared, in document order), and a note when some cannot be drawn.

    A declared axis with one value is drawn only when no declared axis has more; an undeclared variant is read along
    the pins that vary where it ran (``counts``: each axis's values there).
    """
    declared = group[0].axes
    if declared is None:
        axes = [a for a in cells.axes if counts[a] > 1]
        note = "no run file or case says which axes it declares: read along every pin that varies where it ran" if axes else ""
    else:
        axes = [a for a in cells.axes if a in declared]
        unknown = [a for a in declared if a not in cells.axes]
        note = f"declares {', '.join(unknown)}, which no cell here pins: not read along it" if unknown else ""
        spanning = [a for a in axes if counts[a] > 1]
        axes = spanning or axes[:1]
    if len(axes) > 2:
        keep = sorted(axes, key=lambda a: -counts[a])[:2]
        extra = [a for a in axes if a not in keep]
        note = (
            f"also spans {', '.join(extra)}: positions where those cells disagree show every outcome; "
            "the per-cell table below has each cell"
        )
        axes = [a for a in axes if a in keep]
    return axes, note


def _unread(
    marks: dict[tuple[str, ...], Mark], axes: tuple[str, ...], held: Mapping[str, tuple[str, ...]], shorts: Mapping[str, str]
) -> str:
    """Why a track with more than one outcome shows no flip, in words (never a bare "no boundary")."""
    singles = {k: m.read for k, m in marks.items() if m.read is not None}
    mixed = [k for k, m in marks.items() if m.single is None and len([o for o in m.outcomes if o not in NOT_RUN]) > 1]
    name = " × ".join(shorts.get(a, a) for a in axes)

    def at(key: tuple[str, ...]) -> str:
        return " · ".join(f"{shorts.get(a, a)} {v}" for a, v in zip(axes, key, strict=True)) or "every cell"

    if mixed:
        context = ", ".join(shorts.get(a, a) for a, values in held.items() if len(values) > 1) or "nothing it does not declare"
        return (
            f"mixed at {at(mixed[0])}{f' +{len(mixed) - 1}' if len(mixed) > 1 else ''}: its cells there differ only in pins it does "
            f"not declare ({context}); declare that axis or see the per-cell table"
        )
    if len(set(singles.values())) > 1:
        shown = "; ".join(f"{symbol(o)} at {at(k)}" for k, o in list(singles.items())[:4])
        return f"cannot be read along {name}: the cells where it ran differ on all of them at once ({shown})"
    return ""


def _picture(group: list[Variant], results: Mapping[str, Mapping[str, Entry]], cells: _Cells) -> Picture:
    pins = cells.pins
    per_cell = [results.get(v.id, {}) for v in group]
    ran = {v.id: _ran(entries) for v, entries in zip(group, per_cell, strict=True)}
    anywhere = set().union(*ran.values())
    ran_ids = [c for c in pins if c in anywhere]
    counts = {a: len(cells.values(ran_ids, a)) for a in cells.axes}
    read, note = _read_axes(group, counts, cells)
    # Columns run along the axis with more values: the page is wider than it is tall per picture.
    axes = tuple(sorted(read, key=lambda a: -counts[a]))
    # Drawn over every cell with an entry that has a pin on each axis read: an install failure shows as ⚠, a visible gap.
    # A skip is drawn only between releases where it ran (a gap the boundary may lie in): a variant is read only where it
    # ran, so a CPU cell's "needs a CUDA GPU" outside them is no position of a CUDA variant's picture.
    span = {a: (min(r), max(r)) for a in axes if (r := [cells.rank[a][pins[c][a]] for c in ran_ids if pins[c].get(a)])}
    placed = [c for c in pins if all(pins[c].get(a) for a in axes)]
    listed = [
        c
        for c in placed
        if any(
            (e := entries.get(c)) is not None
            and (e.outcome is not _SKIPPED or all(a in span and span[a][0] <= cells.rank[a][pins[c][a]] <= span[a][1] for a in axes))
            for entries in per_cell
        )
    ]
    values = tuple(tuple(cells.values(listed, a)) for a in axes)
    # Held: the pins of the cells where it ran that the picture does not read along: context, never the reading.
    ran_placed = [c for c in placed if c in anywhere]
    held = tuple((a, tuple(seen)) for a in cells.axes if a not in axes and (seen := cells.values(ran_placed, a)) and seen != [""])
    tracks = []
    positions = {c: tuple([pins[c].get(a, "") for a in axes]) for c in listed}
    for v, entries in zip(group, per_cell, strict=True):
        marks = _marks(entries, positions)
        flips = _flips(marks, axes, values, cells.shorts) if axes else []
        old = tuple(c for c in ran[v.id] if c in positions and v.old_check(entries[c])) if v.old_checks else ()
        tracks.append(Track(v, marks, flips, "" if flips else _unread(marks, axes, dict(held), cells.shorts), old))
    kind = "list" if not axes else "strip" if len(axes) == 1 else "grid"
    if axes and (len(values[0]) > MAX_COLUMNS or (len(axes) > 1 and len(values[1]) > MAX_ROWS)):
        # Wider than a 1280 px page can show: keep the flips, leave the drawing to the per-cell table.
        kind = "list"
        note = (
            f"{' × '.join(str(len(v)) for v in values)} releases are too many to draw in 1280 px; "
            "its flips are listed and the per-cell table below has every cell"
        )
    elif not axes:
        note = note or "declares no axis: one reading for every cell it ran in"
    return Picture(
        kind=kind,
        axes=axes,
        values=values,
        tracks=tracks,
        folded=tuple(a for a, _ in held),
        note=note,
        shorts=cells.shorts,
        held=held,
        observed_on=_observed_on(group[0], ran[group[0].id], held, cells),
    )


def _observed_on(variant: Variant, ran: set[str], held: tuple[tuple[str, tuple[str, ...]], ...], cells: _Cells) -> str:
    """``NVIDIA H200; torch 2.11.0 · pl 2.0.3, 2.6.6``: the GPUs a non-CPU variant ran on and the pins it was held at."""
    if variant.device == "cpu":
        return ""
    gpus = sorted({cells.gpu[c] for c in ran if cells.gpu.get(c)}) or ["no GPU named"]
    context = " · ".join(
        f"{cells.shorts.get(a, a)} {', '.join(v or 'not installed' for v in values)}" for a, values in held if a != cells.interpreter
    )
    return "; ".join(p for p in (", ".join(gpus), context) if p)


#: What :func:`pictures` returns: the drawn pictures, and the variants that ran nowhere (listed, not drawn).
Boundary = tuple[list[Picture], list[Variant]]


def by_case(compat: Compat, boundary: Boundary) -> list[tuple[str, list[Picture], list[Variant]]]:
    """Per case, in document order: its pictures, and its variants that ran nowhere (listed, not drawn)."""
    cases: dict[str, tuple[list[Picture], list[Variant]]] = {v.case: ([], []) for v in compat.variants}
    for picture in boundary[0]:
        cases[picture.variant.case][0].append(picture)
    for variant in boundary[1]:
        cases[variant.case][1].append(variant)
    return [(case, drawn, idle) for case, (drawn, idle) in cases.items()]


def _root(variant: Variant, by_name: Mapping[tuple[str, str, str], Variant]) -> tuple[str, str, str] | None:
    """The (case, device, variant) whose picture ``variant`` joins (None: its own): a workaround's, an upstream's counterpart's."""
    target_field = JOINS.get(variant.kind) if variant.kind else None
    name = getattr(variant, target_field) if target_field else None
    seen = {variant.name}
    while name and name not in seen:
        seen.add(name)
        target = by_name.get((variant.case, variant.device, name))
        if target is None:
            return None
        name_field = JOINS.get(target.kind) if target.kind else None
        if not name_field or not getattr(target, name_field):
            return (variant.case, variant.device, name)
        name = getattr(target, name_field)
    return None


def pictures(compat: Compat) -> Boundary:
    """One picture per variant that ran (not only skipped, install-failed or missing), and the variants that ran nowhere."""
    results, context = compat.results, _Cells(compat)
    active = [v for v in compat.variants if v.id in compat.ran_variants]
    idle = [v for v in compat.variants if v.id not in compat.ran_variants]
    by_name = {(v.case, v.device, v.name): v for v in active}
    roots = {v.id: _root(v, by_name) for v in active}
    helpers: dict[tuple[str, str, str], list[Variant]] = {}
    for v in active:
        if roots[v.id] is not None:
            helpers.setdefault(roots[v.id], []).append(v)
    # A variant with a root is drawn on its root's picture: the variant it works around or reproduces.
    return [_picture([v, *helpers.get((v.case, v.device, v.name), [])], results, context) for v in active if roots[v.id] is None], idle
