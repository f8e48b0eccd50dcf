"""The one client for the package registry (PyPI's JSON API, or ``$BUGMATRIX_INDEX_URL``), and ``latest`` resolved once
per nightly: the :class:`Resolution` is saved beside the plan, so every cell job sees the same versions (an unreachable
registry falls back to the last saved one, with a warning). Every version the matrix names is checked to be a release
when the plan is made (a typo would plan cells that can only fail to install); the answers are cached, a version missing
from the cache makes one fresh request, an unreachable registry is a warning, ``offline`` (``nox -l``) reads the cache alone."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from packaging.utils import canonicalize_name
from packaging.version import Version

from bugmatrix.documents.resolution import ResolutionFile
from bugmatrix.documents.run import TrackedPin
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, write_json_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import SYMBOLIC, Matrix
from bugmatrix.versions import parse_version

__all__ = [
    "CACHE_ENV",
    "INDEX_URL_ENV",
    "RegistryUnreachable",
    "Releases",
    "Resolution",
    "Resolved",
    "dedupe_versions",
    "fetch_project",
    "load_resolution",
    "release_time",
    "release_versions",
    "resolve_axes",
    "resolve_latest",
    "warn",
]

INDEX_URL_ENV = "BUGMATRIX_INDEX_URL"
CACHE_ENV = "BUGMATRIX_REGISTRY_CACHE"
DEFAULT_INDEX_URL = "https://pypi.org/pypi"
TIMEOUT_S = 30

Fetch = Callable[[str], Mapping[str, Any]]


class RegistryUnreachable(BugmatrixError):
    """The registry did not answer (network, DNS, HTTP error): the caller may fall back."""


def fetch_project(name: str) -> Mapping[str, Any]:
    """The registry's JSON document for one project (``<base>/<name>/json``)."""
    url = f"{os.environ.get(INDEX_URL_ENV, DEFAULT_INDEX_URL).rstrip('/')}/{name}/json"
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


def _released(project: Mapping[str, Any]) -> list[str]:
    return [text for text, files in project.get("releases", {}).items() if files and not all(f.get("yanked") for f in files)]


def release_versions(project: Mapping[str, Any], *, pre: bool = False) -> list[Version]:
    """The project's releases (not yanked, dev, post or local), oldest first."""
    listed = map(parse_version, _released(project))
    # A post release repackages a release: the behaviour is the same.
    return sorted(v for v in listed if v and not v.is_devrelease and not v.local and v.post is None and (pre or not v.is_prerelease))


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
    """One axis's symbolic version and the release it meant on the day."""

    axis: str
    requested: str
    resolved: str


@dataclass(frozen=True)
class Resolution:
    """Every ``latest``/``latest-pre`` of one nightly, resolved once (``stale``: the last saved one, the registry unreachable)."""

    entries: tuple[Resolved, ...] = ()
    resolved_at: str = ""
    stale: bool = False

    def version(self, axis: str, requested: str) -> str:
        """The concrete version for ``requested`` on ``axis`` (concrete versions pass through)."""
        found = next((e.resolved for e in self.entries if (e.axis, e.requested) == (axis, requested)), None)
        if found is None and requested in SYMBOLIC:
            msg = f"{axis} = {requested!r} has no resolution; re-run the plan so the registry is asked"
            raise BugmatrixError(msg)
        return found or requested

    def covers(self, axis: str, requested: str) -> bool:
        """Whether this resolution answers ``requested`` on ``axis``."""
        return any(e.axis == axis and e.requested == requested for e in self.entries)

    def apply(self, values: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
        """``values`` with symbolic versions replaced and duplicates merged."""
        return {axis: dedupe_versions([self.version(axis, v) for v in listed]) for axis, listed in values.items()}

    def to_json(self) -> dict[str, Any]:
        """The :class:`~bugmatrix.documents.resolution.ResolutionFile` as plain data."""
        axes: dict[str, list[TrackedPin]] = {}
        for e in self.entries:
            axes.setdefault(e.axis, []).append(TrackedPin(e.requested, e.resolved))
        picks = {axis: items[0] if len(items) == 1 else items for axis, items in axes.items()}
        return msgspec.to_builtins(ResolutionFile(picks, self.resolved_at, self.stale))

    @classmethod
    def from_json(cls, data: Any) -> Resolution:
        """Raises msgspec.ValidationError (naming the key) where ``data`` is not a resolution."""
        document = msgspec.convert(data, ResolutionFile)
        return cls(tuple(Resolved(axis, p.requested, p.resolved) for axis, p in document.picks), document.resolved_at, document.stale)


def dedupe_versions(values: Iterable[str]) -> list[str]:
    """One value per release (``2.15`` is ``2.15.0``), the first spelling and the order kept."""
    first: dict[Version, str] = {}
    for text in values:
        first.setdefault(Version(text), text)
    return list(first.values())


def load_resolution(path: Path) -> Resolution:
    """Read a saved resolution; a defect is one line naming the file and the fix."""
    fix = "delete it and re-run the plan with the registry reachable"
    data = read_json(path, "saved resolution", fix=fix)
    try:
        return Resolution.from_json(data)
    except msgspec.ValidationError as exc:
        msg = f"{path}: unreadable resolution ({type(exc).__name__}: {exc}); {fix}"
        raise BugmatrixError(msg) from exc


def warn(message: str) -> None:
    """One warning line on stderr (an annotation on GitHub Actions): the run goes on."""
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
    """Resolve each ``latest``/``latest-pre`` in ``values`` once; unreachable: the ``saved`` resolution when it covers
    every request (``stale``, with a warning), else the error."""
    wanted = sorted({(axis, v) for axis, listed in values.items() for v in listed if v in SYMBOLIC})
    cache: dict[tuple[str, bool], str] = {}
    entries = []
    try:
        for axis, requested in wanted:
            if axis not in distributions:
                msg = f"axis {axis!r} lists {requested!r} but has no distribution to ask the registry about; pin a version"
                raise BugmatrixError(msg)
            key = (distributions[axis], SYMBOLIC[requested])
            if key not in cache:
                cache[key] = resolve_latest(key[0], pre=key[1], fetch=fetch)
            entries.append(Resolved(axis, requested, cache[key]))
    except RegistryUnreachable as exc:
        previous = load_resolution(saved) if saved is not None and saved.exists() else None
        if previous is None or not all(previous.covers(axis, requested) for axis, requested in wanted):
            msg = f"{exc} (and no saved resolution{f' at {saved}' if saved else ''} covers it to fall back on)"
            raise BugmatrixError(msg) from exc
        warn(f"registry unreachable; using the resolution saved {previous.resolved_at or 'earlier'} in {saved}: {exc}")
        return Resolution(previous.entries, previous.resolved_at, stale=True)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return Resolution(tuple(entries), now)


def _as_versions(texts: Iterable[str]) -> set[Version]:
    return {v for v in map(parse_version, texts) if v is not None}


@dataclass(frozen=True)
class Releases:
    """Where the matrix's versions are checked to be releases: the cache (None: :attr:`folder`), the registry, where
    a warning goes, or (``offline``) the cache alone."""

    cache: Path | None = None
    fetch: Fetch | None = None
    warn: Callable[[str], None] = warn
    offline: bool = False

    @property
    def folder(self) -> Path:
        """``cache``, else ``$BUGMATRIX_REGISTRY_CACHE`` or ``build/registry`` (git ignores build/)."""
        return self.cache or Path(os.environ.get(CACHE_ENV) or ROOT / "build" / "registry")

    def cache_file(self, distribution: str) -> Path:
        """Where the registry's answer for ``distribution`` is cached."""
        return self.folder / f"{canonicalize_name(distribution)}.json"

    def versions(self, distribution: str, *, ask: bool) -> set[Version]:
        """The releases of ``distribution`` (pre-releases too: a matrix may pin one): the cache's (none when it is missing or
        damaged: only a cache), else (``ask``) the registry's, asked now and cached."""
        path = self.cache_file(distribution)
        if not ask:
            try:
                return _as_versions(read_json(path, "registry cache")["versions"])
            except (BugmatrixError, KeyError, TypeError):
                return set()
        versions = _released((self.fetch or fetch_project)(distribution))
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        try:
            write_json_atomic(path, {"distribution": distribution, "fetched": now, "versions": sorted(versions)})
        except OSError as exc:
            warn(f"cannot cache the registry's answer in {path} ({exc.strerror}); the next plan asks again")
        return _as_versions(versions)

    def check(self, matrix: Matrix, name: str, versions: Sequence[str], where: str, fix: str, *, indexed: bool = True) -> None:
        """Refuse, in one line naming ``where``, the first version no distribution of axis ``name`` lists with a file not
        yanked; unreachable: warn. ``offline``: only where every distribution has a cached answer without it."""
        axis = matrix.axes[name]
        remembered = set().union(*(self.versions(d, ask=False) for d in axis.distributions))
        missing = [v for v in versions if Version(v) not in remembered]
        if self.offline and not all(self.cache_file(d).exists() for d in axis.distributions):
            missing = []
        unreachable = []
        for distribution in axis.distributions if missing and not self.offline else ():
            try:
                known = self.versions(distribution, ask=True)
            except RegistryUnreachable as exc:
                unreachable.append(str(exc))
                continue
            except BugmatrixError as exc:  # the registry answered: no such project
                msg = f"{matrix.path}: axes.{name}.distributions.{distribution}: {exc}"
                raise BugmatrixError(msg) from exc
            missing = [v for v in missing if Version(v) not in known]
            if not missing:
                break
        if missing and unreachable:
            self.warn(f"{where} not checked against the registry ({unreachable[0]})")
        elif missing:
            at = f"[{versions.index(missing[0])}]" if indexed else ""
            msg = f"{where}{at}: {missing[0]!r} is not a release of {' or '.join(axis.distributions)} on the registry{fix}"
            raise BugmatrixError(msg)

    def check_versions(self, matrix: Matrix) -> None:
        """Refuse a package-axis version no distribution of the axis has released (one line naming the key); unreachable: warn."""
        cached = f" (as cached in {self.folder}; `nox -s plan` asks the registry again)" if self.offline else ""
        fix = f"{cached}; correct the version or remove it (and its uses in profiles, [base], [[include]], [gpu])"
        for name in matrix.package_axes:
            self.check(matrix, name, matrix.axes[name].versions, f"{matrix.path}: axes.{name}.versions", fix)

    def check_case_versions(self, declared: Matrix, own: Iterable[tuple[str, str, tuple[str, ...]]], *, ask: bool = True) -> None:
        """The cases' own releases ((file, axis, versions)) not listed already and, unless ``ask=False``, released."""
        for source, axis, versions in own:
            listed = [v for v in versions if v in declared.axes[axis].versions]
            if listed:
                msg = (
                    f"{source}: versions.{axis}: {listed[0]!r} is listed in axes.{axis}.versions of {declared.path} already, so the "
                    f"profiles that list it plan it for every case; remove it from the case"
                )
                raise BugmatrixError(msg)
            if ask:
                self.check(declared, axis, versions, f"{source}: versions.{axis}", "; correct the version or remove it")

    def check_resolved(self, resolution: Resolution, matrix: Matrix, path: Path) -> None:
        """Refuse a saved resolution (hand-edited, or from another registry) whose ``latest`` is no release of its axis."""
        fix = f"; delete {path} and re-run `nox -s plan` (it resolves 'latest' again)"
        for entry in resolution.entries:
            if entry.axis in matrix.package_axes:
                self.check(matrix, entry.axis, [entry.resolved], f"{path}: {entry.axis}.resolved", fix, indexed=False)
