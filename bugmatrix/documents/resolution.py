"""The saved resolution (``resolution.json``): what each ``latest``/``latest-pre`` meant for one nightly's plan."""

from __future__ import annotations

import msgspec

from bugmatrix.documents.run import TrackedPin

__all__ = ["ResolutionFile"]


class ResolutionFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Each axis's pick (a list only where an axis asks for both latest and latest-pre), when, and whether it is a stale fallback."""

    axes: dict[str, TrackedPin | list[TrackedPin]]
    resolved_at: str = ""
    stale: bool = False

    @property
    def picks(self) -> list[tuple[str, TrackedPin]]:
        """(axis, pick) for every pick, in order (an axis with a list gives each of its picks)."""
        return [(axis, pick) for axis, value in self.axes.items() for pick in (value if isinstance(value, list) else [value])]
