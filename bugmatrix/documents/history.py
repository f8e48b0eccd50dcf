"""One line of the history (``history.jsonl``, ``bugmatrix.history/1``): one report run, its cells and each variant's outcome letters."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["HISTORY_SCHEMA", "NightLine"]

HISTORY_SCHEMA = "bugmatrix.history/1"


class NightLine(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One night: its date, commit and profile, its cells in order, and per variant one outcome letter per cell."""

    schema: Literal["bugmatrix.history/1"]
    date: str
    commit: str = ""
    profile: str = ""
    cells: tuple[str, ...]
    outcomes: dict[str, str]
    #: The run files the night's report read, relative to its reports directory (``runs/<cell>.json``,
    #: ``fresh/runs/<cell>.json``) -> ``sha256:<hex>`` of their bytes: what reuse may trust of them later.
    files: dict[str, str] = {}

    def __post_init__(self) -> None:
        if any(len(letters) != len(self.cells) for letters in self.outcomes.values()):
            msg = "an outcome string's length differs from the number of cells"
            raise ValueError(msg)
