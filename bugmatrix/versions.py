"""Versions, parsed and compared in one place (never as strings). Imported inside cells too: stdlib and ``packaging`` only."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = ["base_version", "distribution_changes", "installed_version", "parse_version", "version_key"]


def parse_version(text: object) -> Version | None:
    """``Version(text)``, or None where ``text`` is not a version."""
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def base_version(text: str) -> Version:
    """``2.6.0+cu124`` -> ``Version("2.6.0")``; raises ValueError (InvalidVersion) on garbage."""
    return Version(Version(text).base_version)


def version_key(value: object) -> tuple[int, Any]:
    """Release order (2.5.1 before 2.10.0); an empty value (an unpinned axis) first, non-versions last, by text."""
    text = str(value)
    if not text:
        return (0, "")
    parsed = parse_version(text)
    return (1, parsed) if parsed is not None else (2, text)


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def distribution_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What moved between two sets of installed distributions: ``name old → new``, ``+name version``, ``-name version``."""
    lines = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None or new is None:  # in one of them only
            lines.append(f"+{name} {new}" if old is None else f"-{name} {old}")
        elif old != new:
            lines.append(f"{name} {old} → {new}")
    return lines
