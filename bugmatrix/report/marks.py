"""What a boundary picture is made of: marks, flips, tracks, pictures (values only), a flip's wording and its thick edges."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.documents.compat import Variant

__all__ = ["NOT_RUN", "Flip", "Mark", "Picture", "Track", "boundary_text", "flip_edges", "symbol"]

#: Outcomes that say nothing about the bug (a skip too): never a flip, a gap on the picture.
NOT_RUN = frozenset(o for o in Outcome if not o.ran)
#: The most values of one held axis a picture's caption names before it says "…".
HELD_SHOWN = 4
#: Verbs for a flip from ``was`` to ``now`` (default: ``now``'s own); "regressed in" only where not declared (:attr:`Flip.declared`).
_PAIR_VERBS = {(Outcome.REPRODUCED, Outcome.FIXED): "fixed in", (Outcome.FIXED, Outcome.REPRODUCED): "regressed in"}


def symbol(outcome: Outcome | None) -> str:
    """The outcome's symbol; ``·`` where there is none."""
    return outcome.symbol if outcome is not None else "·"


@dataclass(frozen=True, slots=True)
class Mark:
    """What one variant did at one position: one outcome, several (mixed), or nothing; ``declared``: all as expected."""

    outcomes: tuple[Outcome, ...] = ()
    cells: tuple[str, ...] = ()
    declared: bool = field(default=False, compare=False)

    @property
    def single(self) -> Outcome | None:
        """The one outcome of this position, or None (nothing, or mixed)."""
        return self.outcomes[0] if len(self.outcomes) == 1 else None

    @property
    def read(self) -> Outcome | None:
        """The single outcome where it says something about the bug (it ran), else None: a gap a boundary may lie in."""
        return single if (single := self.single) not in NOT_RUN else None

    @property
    def outcome(self) -> str:
        """The single outcome's word, "mixed", or "" where the variant has no entry here (the page's CSS class)."""
        return self.outcomes[0].value if len(self.outcomes) == 1 else ("mixed" if self.outcomes else "")

    @property
    def symbol(self) -> str:
        return "".join(o.symbol for o in self.outcomes) or "·"


@dataclass(frozen=True, slots=True)
class Flip:
    """The outcome changes from ``was`` at ``before`` to ``now`` at ``after`` along ``axis`` (``at``: the grid lines where)."""

    axis: str
    before: str
    after: str
    was: Outcome
    now: Outcome
    at: tuple[str, ...] = ()
    other_axis: str = ""
    adjacent: bool = True
    #: Short names (``pl``), for labels only.
    axis_short: str = field(default="", compare=False)
    other_short: str = field(default="", compare=False)
    #: The outcome after the flip is what its expectation declares there.
    declared: bool = field(default=False, compare=False)

    @property
    def verb(self) -> str:
        return self.now.verb if self.declared else _PAIR_VERBS.get((self.was, self.now), self.now.verb)

    @property
    def label(self) -> str:
        """``fixed in torch 2.11.0`` (+ where on a grid, + the last value before a gap)."""
        text = f"{self.verb} {self.axis_short or self.axis} {self.after}"
        if not self.adjacent:
            text += f" (first after {self.before})"
        if self.at:
            shown = ", ".join(self.at[:3]) + (f" +{len(self.at) - 3}" if len(self.at) > 3 else "")
            text += f" at {self.other_short or self.other_axis} {shown}"
        return text


@dataclass(frozen=True)
class Track:
    """One variant on a picture: its marks per position and its flips."""

    variant: Variant
    marks: dict[tuple[str, ...], Mark]
    flips: list[Flip]
    unread: str = ""  # why a track with several outcomes shows no flip
    old: tuple[str, ...] = ()  # cells whose result was taken under a check its case no longer makes


@dataclass(frozen=True)
class Picture:
    """A strip (one axis) or grid (two) of a variant (``tracks[0]``) and the workarounds for it.

    ``values[i]``: ``axes[i]``'s values in release order; ``held``: the other pins of its cells, as context.
    """

    kind: str  # strip | grid | list (too many releases to draw: flips only)
    axes: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    tracks: list[Track]
    folded: tuple[str, ...] = ()
    note: str = ""
    shorts: Mapping[str, str] = field(default_factory=dict)  # axis -> short name, from the document
    held: tuple[tuple[str, tuple[str, ...]], ...] = ()
    observed_on: str = ""  # a non-CPU variant's GPUs and pins (``NVIDIA H200; torch 2.11.0``); "" for a CPU one

    @property
    def held_text(self) -> str:
        """``held at py 3.11 · pl 2.0.3, 2.6.6, not installed``: the context of every position, "" where there is none."""
        parts = []
        for axis, values in self.held:
            shown = [v or "not installed" for v in values]
            if len(shown) > HELD_SHOWN:  # a caption, not a table: the first and last, and how many
                shown = [shown[0], "…", f"{shown[-1]} ({len(shown)} values)"]
            parts.append(f"{self.short(axis)} {', '.join(shown)}")
        return "held at " + " · ".join(parts) if parts else ""

    def short(self, axis: str) -> str:
        return self.shorts.get(axis, axis)

    @property
    def variant(self) -> Variant:
        return self.tracks[0].variant


def _at(picture: Picture, track: Track) -> str:
    """``pl 2.0.3, 2.6.6 · tf 5.17.0``: the values of each axis read where the track ran."""
    ran = [key for key, mark in track.marks.items() if any(o not in NOT_RUN for o in mark.outcomes)]
    parts = [
        f"{picture.short(axis)} {', '.join(v for v in picture.values[i] if any(key[i] == v for key in ran))}"
        for i, axis in enumerate(picture.axes)
    ]
    return " · ".join(parts) or "every cell it ran in"


def boundary_text(picture: Picture, track: Track | None = None) -> str:
    """``torch 2.10.0 ✗ → 2.11.0 ✓; …`` for a track's flips, or ``✓ fixed everywhere``; another device's also says where."""
    track = track or picture.tracks[0]
    device = picture.variant.device.upper() if picture.observed_on else ""
    old = f", {len(track.old)} of them under an old check" if track.old else ""
    if not track.flips:
        outcomes = {o for m in track.marks.values() for o in m.outcomes if o not in NOT_RUN}
        ran = sum(len(m.cells) for m in track.marks.values() if m.read is not None)
        if track.old and len(track.old) == ran:
            old = ", under an old check"
        if len(outcomes) == 1:
            text = f"{outcomes.pop().label} " + (f"at {_at(picture, track)}" if device else "everywhere") + old
        else:
            text = (track.unread or "no outcome to read") + old
        return f"{device}: {text} ({picture.observed_on})" if device else text
    parts = []
    for f in track.flips:
        text = f"{picture.short(f.axis)} {f.before} {symbol(f.was)} → {f.after} {symbol(f.now)}"
        if f.at:
            text += f" (at {picture.short(f.other_axis)} {', '.join(f.at[:2])}{' …' if len(f.at) > 2 else ''})"
        parts.append(text)
    text = "; ".join(parts) + old
    return f"{device}: {text} ({picture.observed_on})" if device else text


def flip_edges(
    marks: dict[tuple[str, ...], Mark], axes: tuple[str, ...], values: tuple[tuple[str, ...], ...]
) -> dict[tuple[str, ...], set[str]]:
    """Positions whose left ("l") or top ("t") neighbour holds another single outcome: drawn as a thick edge."""
    edges: dict[tuple[str, ...], set[str]] = {}
    for along, side in ((0, "l"), (1, "t"))[: len(axes)]:
        position = {v: i for i, v in enumerate(values[along])}
        for key, mark in marks.items():
            index = position[key[along]]
            if index == 0 or mark.read is None:
                continue
            neighbour = list(key)
            neighbour[along] = values[along][index - 1]
            if (other := marks.get(tuple(neighbour))) and other.read is not None and other.read is not mark.read:
                edges.setdefault(key, set()).add(side)
    return edges
