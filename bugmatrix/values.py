"""Values from the command line and from files, checked where they are parsed: one rule per kind of value.

The functions are argparse ``type=`` callables, so an option is refused before anything is read or written.
Imported inside cells: stdlib and ``packaging`` only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from bugmatrix.errors import BugmatrixError

__all__ = [
    "PROFILE_NAME",
    "PROFILE_RULE",
    "count",
    "existing_dir",
    "held",
    "iso_date",
    "moment",
    "name",
    "profile",
    "profile_name",
    "seconds",
    "seconds_or_zero",
    "version",
]

#: A profile's name: a nox tag, a session name (``report-<name>``), a file name (``plan-<name>.json``), a site path.
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_RESERVED_PREFIX = "gpu-"  # ``gpu-<profile>`` is the tag of a profile's CUDA cells
PROFILE_RULE = "lowercase letters, digits, - and _, not starting with gpu-"


def profile_name(value: object, where: str, error: type[Exception] = BugmatrixError) -> str:
    """``value`` when it is a profile name; else a one-line ``error`` naming ``where``."""
    if not isinstance(value, str) or not PROFILE_NAME.fullmatch(value) or value.startswith(_RESERVED_PREFIX):
        msg = " ".join(f"{where} {value!r}: not a profile name ({PROFILE_RULE})".split())
        raise error(msg)
    return value


def name(text: str) -> str:
    """A non-empty name (a cell, a variant); ``''`` would quietly mean "the default" or nothing."""
    if not text.strip():
        msg = "an empty name; give one (plan --list prints the profiles and cells)"
        raise argparse.ArgumentTypeError(msg)
    return text


def profile(text: str) -> str:
    """A profile name (:func:`profile_name`'s rule)."""
    return profile_name(name(text), "profile", argparse.ArgumentTypeError)


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``-1`` or ``nan`` would time out everything, ``inf`` nothing)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        msg = f"{text!r} is not a positive number of seconds, e.g. 900"
        raise argparse.ArgumentTypeError(msg)
    return value


def seconds_or_zero(text: str) -> float:
    """A finite number of seconds, 0 meaning none."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    try:
        return seconds(text)
    except argparse.ArgumentTypeError:
        msg = f"{text!r} is not a number of seconds (0: none), e.g. 1800"
        raise argparse.ArgumentTypeError(msg) from None


def count(text: str) -> int:
    """A whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        msg = f"{text!r} is not a whole number of at least 1"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def version(text: str) -> str:
    """A release version (``--from 2.4``)."""
    try:
        return str(Version(text))
    except InvalidVersion:
        msg = f"{text!r} is not a version; write a release such as 2.4.1"
        raise argparse.ArgumentTypeError(msg) from None


def moment(text: str) -> str:
    """An RFC 3339 timestamp or a date (``2026-11-23T11:35:00Z``), as uv's ``--exclude-newer`` takes it."""
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        msg = f"{text!r} is not a timestamp; write e.g. 2026-11-23T11:35:00Z or 2026-11-23"
        raise argparse.ArgumentTypeError(msg) from None
    return text


def iso_date(value: str, where: str, fix: str = " (YYYY-MM-DD)") -> str:
    """``value`` as a date (``2026-11-23``); else a one-line BugmatrixError."""
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        msg = f"{where} {value!r} is not a date{fix}"
        raise BugmatrixError(msg) from None


def held(text: str) -> tuple[str, str]:
    """``DIST=TIMESTAMP`` (resolve that distribution as the registry stood then)."""
    dist, sep, when = text.partition("=")
    if not sep or not dist:
        msg = f"{text!r} is not DIST=TIMESTAMP, e.g. tokenizers=2026-11-01T00:00:00Z"
        raise argparse.ArgumentTypeError(msg)
    return dist, moment(when)


def existing_dir(text: str) -> Path:
    """A directory that exists: a mistyped input directory is an error, never "nothing there"."""
    path = Path(name(text))
    if not path.is_dir():
        msg = f"{text}: {'not a directory' if path.exists() else 'no such directory'}; pass an existing one"
        raise argparse.ArgumentTypeError(msg)
    return path
