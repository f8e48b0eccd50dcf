"""The HTML overview's view model: boundary pictures per case, as plain text the template autoescapes and loops over."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bugmatrix.report.boundaries import Boundary, Mark, Picture, boundary_text, symbol
from bugmatrix.report.history import VariantHistory
from bugmatrix.report.marks import flip_edges
from bugmatrix.report.model import Compat

__all__ = ["CaseOverview", "Figure", "overview"]

#: Cell ids listed in a mark's tooltip before "+N more": a torch 2.15.0 position folds ~40 cells.
TITLE_CELLS = 4


@dataclass(frozen=True, slots=True)
class Spot:
    """One mark on the page: its symbol(s), CSS classes and tooltip."""

    text: str
    cls: str
    title: str
    sub: str = ""  # grids: one small symbol per companion (workaround, upstream), in the figure's order


@dataclass(frozen=True)
class Line:
    """A table row of a figure: a variant (strip) or one value of the row axis (grid)."""

    head: str
    variant_id: str
    role: str  # "" (the variant itself), "workaround" or "upstream"
    spots: list[Spot]
    history: VariantHistory | None = None  # the row's variant (strips), if the history has it


@dataclass(frozen=True)
class Figure:
    """A strip or grid with its captions and every flip as a labelled line."""

    variant_id: str
    kind: str
    axes: str
    caption: str
    corner: str
    heads: list[tuple[str, str]]
    lines: list[Line]
    flips: list[tuple[str, str, str, str]]  # (variant id, axis, release, label)
    note: str
    companions: list[str]  # the workaround and upstream variants drawn on this picture too
    history: VariantHistory | None = None


@dataclass
class CaseOverview:
    """A case's pictures, and the variants that ran nowhere (listed, not drawn)."""

    case: str
    figures: list[Figure] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)


def _title(prefix: str, mark: Mark) -> str:
    if not mark.outcomes:
        return f"{prefix}: not in any cell's run"
    cells = ", ".join(mark.cells[:TITLE_CELLS]) + (f" +{len(mark.cells) - TITLE_CELLS} more" if len(mark.cells) > TITLE_CELLS else "")
    words = " and ".join(o.value for o in mark.outcomes)
    return f"{prefix}: {words} ({cells})"


def _spot(mark: Mark, prefix: str, edges: set[str] = frozenset(), subs: list[Mark] = ()) -> Spot:
    cls = f"m o-{mark.outcome or 'none'}" + "".join(f" e{e}" for e in sorted(edges))
    sub = "".join(symbol(m.single) if m.single is not None else ("*" if m.outcomes else "·") for m in subs)
    if not any(m.outcomes for m in subs):
        sub = ""  # nothing ran here at all: an empty position stays empty
    return Spot(mark.symbol if mark.outcomes else "", cls, _title(prefix, mark), sub)


def _figure(picture: Picture, history: Mapping[str, VariantHistory]) -> Figure:
    target = picture.tracks[0]
    short = [picture.short(a) for a in picture.axes]
    flips = [(t.variant.id, f.axis, f.after, f"{t.name}: {f.label}") for t in picture.tracks for f in t.flips]
    folded = f"; {picture.held_text}" if picture.held else ""
    if picture.kind == "list":
        lines, heads, corner = [], [], ""
        caption = f"along {' × '.join(picture.axes)}{folded}" if picture.axes else f"one reading{folded}"
    elif picture.kind == "strip":
        axis, values = picture.axes[0], picture.values[0]
        edges = [flip_edges(t.marks, picture.axes, picture.values) for t in picture.tracks]
        lines = [
            Line(
                head=t.name,
                variant_id=t.variant.id,
                role=t.role,
                history=history.get(t.variant.id),
                spots=[_spot(t.marks.get((v,), Mark()), f"{t.name} at {short[0]} {v}", edge.get((v,), set())) for v in values],
            )
            for t, edge in zip(picture.tracks, edges, strict=True)
        ]
        heads = [(v, "") for v in values]
        caption = f"strip along {axis}{folded}"
        corner = short[0]
    else:
        (cols, rows), workarounds = picture.values, picture.tracks[1:]
        lines = []
        for r in rows:
            spots = []
            for c in cols:
                key = (c, r)
                prefix = f"{target.name} at {short[0]} {c} · {short[1]} {r}"
                spot = _spot(
                    target.marks.get(key, Mark()),
                    prefix,
                    picture.flip_edges.get(key, set()),
                    [w.marks.get(key, Mark()) for w in workarounds],
                )
                if spot.sub:
                    names = ", ".join(f"{w.name} {w.marks.get(key, Mark()).outcome or 'not run'}" for w in workarounds)
                    spot = Spot(spot.text, spot.cls, f"{spot.title}; also on this picture: {names}", spot.sub)
                spots.append(spot)
            lines.append(Line(head=r, variant_id=target.variant.id, role="", spots=spots))
        heads = [(c, "") for c in cols]
        caption = f"grid: {picture.axes[0]} across, {picture.axes[1]} down{folded}"
        corner = f"{short[1]} ╲ {short[0]}"
    return Figure(
        variant_id=target.variant.id,
        kind=picture.kind,
        axes=" ".join(picture.axes),
        caption=caption,
        corner=corner,
        heads=heads,
        lines=lines,
        flips=flips,
        # Another device than the CPU: what was observed and where (boundaries.py), above any note.
        note="; ".join(text for text in (boundary_text(picture) if picture.observed_on else "", picture.note) if text),
        companions=[t.name for t in picture.tracks[1:]],
        history=history.get(target.variant.id),
    )


def overview(compat: Compat, boundary: Boundary, history: Mapping[str, VariantHistory] | None = None) -> list[CaseOverview]:
    """Per case, in document order: its figures, then what ran nowhere."""
    drawn, idle = boundary
    cases: dict[str, CaseOverview] = {}
    for v in compat.variants:
        cases.setdefault(v.case, CaseOverview(v.case))
    for picture in drawn:
        cases[picture.variant.case].figures.append(_figure(picture, history or {}))
    for v in idle:
        cases[v.case].idle.append(v.label)
    return list(cases.values())
