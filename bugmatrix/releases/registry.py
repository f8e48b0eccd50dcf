"""The one client for the package registry (PyPI's JSON API), and release tracking.

Every pin in ``matrix.toml`` is a fixed release, so a new torch, Lightning or
transformers release would never run until someone edits the file. An axis may
therefore list ``"latest"`` (the newest final release) or ``"latest-pre"``
(pre-releases too); :func:`resolve_axes` asks the registry once per nightly
and returns a :class:`Resolution`, a small frozen value saved beside the plan
(``save_resolution``) so every cell job of that nightly sees the same versions
and each run file can record what was requested and what it resolved to.

What counts as a release: not yanked, not a dev release, not a post release
(it repackages a release; behaviour is the same) and not a local version; a
pre-release only when asked. Versions are compared with ``packaging.version``.

The registry is ``https://pypi.org/pypi/<name>/json`` unless
``BUGMATRIX_INDEX_URL`` names another base (tests point it at a stand-in on
127.0.0.1; a mirror works the same way).

When the registry cannot be reached, the choice made here is: **fall back to
the last saved resolution, with a visible warning**, when one exists and
covers every axis asked for, because a nightly that tests yesterday's
"latest" still tests everything else and says so, whereas failing would lose
the whole night's results over one HTTP request. With no saved resolution
there is nothing honest to run, so it is a one-line :class:`BugmatrixError`
(the CLI prints it and exits 2).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, write_json_atomic
from bugmatrix.plan.matrix import SYMBOLIC

__all__ = [
    "INDEX_URL_ENV",
    "LATEST",
    "RegistryUnreachable",
    "Resolution",
    "Resolved",
    "dedupe_versions",
    "fetch_project",
    "index_url",
    "load_resolution",
    "release_time",
    "release_versions",
    "resolve_axes",
    "resolve_latest",
    "save_resolution",
    "warn",
]

INDEX_URL_ENV = "BUGMATRIX_INDEX_URL"
DEFAULT_INDEX_URL = "https://pypi.org/pypi"
#: The symbolic versions a profile may list, and whether each admits pre-releases (matrix.toml's rule).
LATEST = SYMBOLIC
TIMEOUT_S = 30

Fetch = Callable[[str], Mapping[str, Any]]


class RegistryUnreachable(BugmatrixError):
    """The registry did not answer (network, DNS, HTTP error): the caller may fall back."""


def index_url() -> str:
    """The JSON API's base URL: ``$BUGMATRIX_INDEX_URL`` or PyPI's."""
    return os.environ.get(INDEX_URL_ENV, DEFAULT_INDEX_URL).rstrip("/")


def fetch_project(name: str) -> Mapping[str, Any]:
    """The registry's JSON document for one project (``<base>/<name>/json``)."""
    url = f"{index_url()}/{name}/json"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 - http(s) base from the env or PyPI
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            msg = f"{name!r} is not on the registry ({url} answered 404); check the distribution name"
            raise BugmatrixError(msg) from exc
        msg = f"the registry answered HTTP {exc.code} for {url}; retry later or set {INDEX_URL_ENV} to a mirror"
        raise RegistryUnreachable(msg) from exc
    except (OSError, json.JSONDecodeError) as exc:  # URLError, timeouts and resets are OSErrors
        msg = f"cannot read {name}'s release list from {url} ({exc}); check the network or set {INDEX_URL_ENV}"
        raise RegistryUnreachable(msg) from exc


def _is_release(version: Version, files: Iterable[Mapping[str, Any]], *, pre: bool) -> bool:
    files = list(files)
    if not files or all(f.get("yanked") for f in files):
        return False
    if version.is_devrelease or version.local or version.post is not None:
        return False
    return pre or not version.is_prerelease


def release_versions(project: Mapping[str, Any], *, pre: bool = False) -> list[Version]:
    """The project's releases, oldest first (yanked, dev, post and local left out)."""
    found = []
    for text, files in project.get("releases", {}).items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue  # ancient non-PEP 440 releases cannot be pinned sensibly anyway
        if _is_release(version, files, pre=pre):
            found.append(version)
    return sorted(found)


def release_time(project: Mapping[str, Any], version: str) -> dt.datetime:
    """When a release's last file was uploaded (for ``uv pip compile --exclude-newer``)."""
    files = project.get("releases", {}).get(version) or []
    times = [dt.datetime.fromisoformat(f["upload_time_iso_8601"].replace("Z", "+00:00")) for f in files if "upload_time_iso_8601" in f]
    if not times:
        msg = f"the registry lists no files for {project.get('info', {}).get('name', '?')} {version}; check the version"
        raise BugmatrixError(msg)
    return max(times)


def resolve_latest(distribution: str, *, pre: bool, fetch: Fetch | None = None) -> str:
    """The newest release of ``distribution`` (pre-releases only when ``pre``)."""
    versions = release_versions((fetch or fetch_project)(distribution), pre=pre)
    if not versions:
        kind, hint = ("release", "") if pre else ("final release", "use latest-pre to admit pre-releases, or ")
        msg = f"the registry lists no {kind} of {distribution!r}; {hint}pin a version in matrix.toml"
        raise BugmatrixError(msg)
    return str(versions[-1])


@dataclass(frozen=True)
class Resolved:
    """One axis's symbolic version and what it meant on the day."""

    axis: str
    requested: str
    resolved: str


@dataclass(frozen=True)
class Resolution:
    """Every ``latest``/``latest-pre`` of one nightly, resolved once.

    ``stale`` is set when the registry was unreachable and this is the last
    saved resolution instead; ``resolved_at`` says from when.
    """

    entries: tuple[Resolved, ...] = ()
    resolved_at: str = ""
    stale: bool = False

    def version(self, axis: str, requested: str) -> str:
        """The concrete version for ``requested`` on ``axis`` (concrete versions pass through)."""
        for entry in self.entries:
            if entry.axis == axis and entry.requested == requested:
                return entry.resolved
        if requested in LATEST:
            msg = f"{axis} = {requested!r} has no resolution; re-run the plan so the registry is asked"
            raise BugmatrixError(msg)
        return requested

    def apply(self, values: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
        """``values`` with symbolic versions replaced and duplicates merged (see dedupe_versions)."""
        return {axis: dedupe_versions([self.version(axis, v) for v in listed]) for axis, listed in values.items()}

    def to_json(self) -> dict[str, Any]:
        """``{"torch": {"requested": "latest", "resolved": "2.15.0"}, ...}`` plus when, and whether stale."""
        axes: dict[str, list[dict[str, str]]] = {}
        for e in self.entries:
            axes.setdefault(e.axis, []).append({"requested": e.requested, "resolved": e.resolved})
        # One object per axis in the usual case; a list only where an axis asks for both latest and latest-pre.
        data = {axis: items[0] if len(items) == 1 else items for axis, items in axes.items()}
        return {"axes": data, "resolved_at": self.resolved_at, "stale": self.stale}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Resolution:
        entries = []
        for axis, value in data["axes"].items():
            for item in value if isinstance(value, list) else [value]:
                entries.append(Resolved(axis, str(item["requested"]), str(item["resolved"])))
        return cls(tuple(entries), str(data.get("resolved_at", "")), bool(data.get("stale", False)))


def dedupe_versions(values: Iterable[str]) -> list[str]:
    """One value per release: a ``latest`` that resolved to a listed version is that version, once.

    Compared as versions (``2.15`` is ``2.15.0``); the first spelling and the order are kept.
    """
    seen: set[Version] = set()
    kept = []
    for text in values:
        version = Version(text)
        if version not in seen:
            seen.add(version)
            kept.append(text)
    return kept


def save_resolution(path: Path, resolution: Resolution) -> None:
    """Write the resolution beside the plan, atomically, so every cell job reads the same one."""
    write_json_atomic(path, resolution.to_json())


def load_resolution(path: Path) -> Resolution:
    """Read a saved resolution; a defect is one line naming the file and the fix."""
    fix = "delete it and re-run the plan with the registry reachable"
    data = read_json(path, "saved resolution", fix=fix)
    try:
        return Resolution.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{path}: unreadable resolution ({type(exc).__name__}: {exc}); {fix}"
        raise BugmatrixError(msg) from exc


def warn(message: str) -> None:
    """One warning line on stderr (an annotation on GitHub Actions): the run goes on."""
    # GitHub Actions turns this prefix into an annotation on the run page; elsewhere it is a plain line.
    prefix = "::warning::" if os.environ.get("GITHUB_ACTIONS") == "true" else "bugmatrix: warning: "
    print(prefix + message, file=sys.stderr)


def resolve_axes(
    values: Mapping[str, Iterable[str]],
    distributions: Mapping[str, str],
    *,
    saved: Path | None = None,
    fetch: Fetch | None = None,
    warn: Callable[[str], None] = warn,
) -> Resolution:
    """Resolve each ``latest``/``latest-pre`` in ``values`` (axis -> versions) once.

    ``distributions`` maps an axis to the distribution asked about
    (``{"lightning": "lightning"}``). When the registry is unreachable and
    ``saved`` holds a resolution covering every request, that one is returned
    with ``stale=True`` and a warning; otherwise the error is raised.
    """
    wanted = sorted({(axis, v) for axis, listed in values.items() for v in listed if v in LATEST})
    cache: dict[tuple[str, bool], str] = {}
    entries = []
    try:
        for axis, requested in wanted:
            if axis not in distributions:
                msg = f"axis {axis!r} lists {requested!r} but has no distribution to ask the registry about; pin a version"
                raise BugmatrixError(msg)
            key = (distributions[axis], LATEST[requested])
            if key not in cache:
                cache[key] = resolve_latest(key[0], pre=key[1], fetch=fetch)
            entries.append(Resolved(axis, requested, cache[key]))
    except RegistryUnreachable as exc:
        previous = load_resolution(saved) if saved is not None and saved.exists() else None
        if previous is None or not all(_covers(previous, axis, requested) for axis, requested in wanted):
            msg = f"{exc} (and no saved resolution{f' at {saved}' if saved else ''} covers it to fall back on)"
            raise BugmatrixError(msg) from exc
        warn(f"registry unreachable; using the resolution saved {previous.resolved_at or 'earlier'} in {saved}: {exc}")
        return Resolution(previous.entries, previous.resolved_at, stale=True)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return Resolution(tuple(entries), now)


def _covers(resolution: Resolution, axis: str, requested: str) -> bool:
    return any(e.axis == axis and e.requested == requested for e in resolution.entries)
