"""The site's index (``nights.json``, ``bugmatrix.site/1``): every night the Pages site keeps, newest first, and its root profile.
A file written before the site recorded its root (or a night's path) leaves them out: the site derives them."""

from __future__ import annotations

from typing import Literal

import msgspec

from bugmatrix.errors import BugmatrixError
from bugmatrix.values import iso_date, profile_name

__all__ = ["SITE_SCHEMA", "NightsFile", "SiteNight"]

SITE_SCHEMA = "bugmatrix.site/1"


class SiteNight(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One published night: where its page is (``path``), relative to the site's root."""

    date: str
    profile: str
    commit: str = ""
    path: str = ""

    def __post_init__(self) -> None:
        try:
            iso_date(self.date, "")
        except BugmatrixError as exc:
            raise ValueError(str(exc).lstrip()) from None
        profile_name(self.profile, "profile", ValueError)


class NightsFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``nights.json``: the nights kept, newest first, and the profile whose newest night is the root."""

    schema: Literal["bugmatrix.site/1"]
    nights: list[SiteNight]
    root: str | None = None
