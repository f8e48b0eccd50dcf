"""Installed versions, compared as versions (never as strings).

Local tags are dropped before comparing (``2.6.0+cu124`` is ``2.6.0``), as
Lightning's ``RunIf`` does, so a CUDA wheel and a CPU wheel of one release
satisfy the same specifier.
"""

from __future__ import annotations

from importlib import metadata

from packaging.version import InvalidVersion, Version

__all__ = ["AXIS_DISTRIBUTIONS", "base_version", "installed_axis_versions", "installed_version"]

#: Which distributions provide an axis. Lightning is ``lightning`` from 2.0 on,
#: but before 2.1 it has to be installed as ``pytorch-lightning`` (the old
#: ``lightning`` 2.0.x wheels no longer import); either counts as the axis.
AXIS_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "lightning": ("lightning", "pytorch-lightning"),
    "transformers": ("transformers",),
}


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


def installed_axis_versions() -> dict[str, tuple[str, str]]:
    """axis -> (distribution, version) for every axis package installed here."""
    found: dict[str, tuple[str, str]] = {}
    for axis, dists in AXIS_DISTRIBUTIONS.items():
        for dist in dists:
            version = installed_version(dist)
            if version is not None:
                found[axis] = (dist, version)
                break
    return found
