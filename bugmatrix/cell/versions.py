"""Installed versions, compared as versions (never as strings).

Local tags are dropped before comparing (``2.6.0+cu124`` is ``2.6.0``), as
Lightning's ``RunIf`` does, so a CUDA wheel and a CPU wheel of one release
satisfy the same specifier.
"""

from __future__ import annotations

from importlib import metadata

from packaging.version import InvalidVersion, Version

__all__ = ["base_version", "installed_version"]


def base_version(text: str) -> Version:
    """``2.6.0+cu124`` -> ``Version("2.6.0")``; raises ValueError on garbage."""
    try:
        return Version(Version(text).base_version)
    except InvalidVersion as exc:
        msg = f"not a version: {text!r}"
        raise ValueError(msg) from exc


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
