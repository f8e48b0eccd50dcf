"""The saved resolution (``resolution.json``): what each ``latest``/``latest-pre`` meant for one nightly's plan.

:mod:`bugmatrix.releases.registry` writes and reads it through :class:`ResolutionFile`.
"""

from __future__ import annotations

import msgspec

from bugmatrix.documents.run import TrackedPin

__all__ = ["ResolutionFile"]


class ResolutionFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Each axis's pick (a list only where an axis asks for both latest and latest-pre), when, and whether it is a stale fallback."""

    axes: dict[str, TrackedPin | list[TrackedPin]]
    resolved_at: str = ""
    stale: bool = False
