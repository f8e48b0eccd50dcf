"""Every version the matrix names is a release on the registry, checked when the plan is made (a typo would plan cells
that can only fail to install). Answers are cached: a version missing from the cache makes one fresh request. An
unreachable registry is a warning; ``offline`` (``nox -l``) checks against the cache alone.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, write_json_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.registry import Fetch, RegistryUnreachable, Resolution, fetch_project, warn
from bugmatrix.versions import parse_version

__all__ = ["CACHE_ENV", "cache_dir", "cached_versions", "check_case_versions", "check_resolved", "check_versions", "listed_versions"]

CACHE_ENV = "BUGMATRIX_REGISTRY_CACHE"


def cache_dir() -> Path:
    """``$BUGMATRIX_REGISTRY_CACHE`` or ``build/registry`` (git ignores build/)."""
    return Path(os.environ.get(CACHE_ENV) or ROOT / "build" / "registry")


def _as_versions(texts: Iterable[str]) -> set[Version]:
    return {v for v in map(parse_version, texts) if v is not None}


def _cache_file(cache: Path, distribution: str) -> Path:
    return cache / f"{canonicalize_name(distribution)}.json"


def cached_versions(distribution: str, *, cache: Path) -> set[Version]:
    """The releases of ``distribution`` the cache remembers (none when there is no cache or it is damaged: only a cache)."""
    try:
        return _as_versions(read_json(_cache_file(cache, distribution), "registry cache")["versions"])
    except (BugmatrixError, KeyError, TypeError):
        return set()


def listed_versions(distribution: str, *, cache: Path, fetch: Fetch | None = None) -> set[Version]:
    """The registry's releases of ``distribution`` (pre-releases too: a matrix may pin one), asked now and cached."""
    releases = dict((fetch or fetch_project)(distribution)).get("releases", {})
    versions = [v for v, files in releases.items() if files and not all(f.get("yanked") for f in files)]
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = _cache_file(cache, distribution)
    try:
        write_json_atomic(path, {"distribution": distribution, "fetched": now, "versions": sorted(versions)})
    except OSError as exc:
        warn(f"cannot cache the registry's answer in {path} ({exc.strerror}); the next plan asks again")
    return _as_versions(versions)


@dataclass(frozen=True)
class _Registry:
    """Where versions are looked up: the cache (None: :func:`cache_dir`), the registry, where a warning goes, or the cache only."""

    cache: Path | None
    fetch: Fetch | None
    warn: Callable[[str], None]
    offline: bool

    def check(self, matrix: Matrix, name: str, versions: Sequence[str], where: str, fix: str, *, indexed: bool = True) -> None:
        """Refuse, in one line naming ``where``, the first version no distribution of axis ``name`` lists with a file not
        yanked; unreachable: warn. ``offline``: only where every distribution has a cached answer without it."""
        folder, axis = self.cache or cache_dir(), matrix.axes[name]
        remembered = set().union(*(cached_versions(d, cache=folder) for d in axis.distributions))
        missing = [v for v in versions if Version(v) not in remembered]
        if self.offline and not all(_cache_file(folder, d).exists() for d in axis.distributions):
            missing = []
        unreachable = []
        for distribution in axis.distributions if missing and not self.offline else ():
            try:
                known = listed_versions(distribution, cache=folder, fetch=self.fetch)
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


def check_versions(
    matrix: Matrix, *, cache: Path | None = None, fetch: Fetch | None = None, warn: Callable[[str], None] = warn, offline: bool = False
) -> None:
    """Refuse a package-axis version no distribution of the axis has released (one line naming the key); unreachable: warn."""
    cached = f" (as cached in {cache or cache_dir()}; `nox -s plan` asks the registry again)" if offline else ""
    fix = f"{cached}; correct the version or remove it (and its uses in profiles, [base], [[include]], [gpu])"
    for name in matrix.package_axes:
        _Registry(cache, fetch, warn, offline).check(matrix, name, matrix.axes[name].versions, f"{matrix.path}: axes.{name}.versions", fix)


def check_case_versions(
    declared: Matrix,
    own: Iterable[tuple[str, str, tuple[str, ...]]],
    *,
    ask: bool = True,
    cache: Path | None = None,
    fetch: Fetch | None = None,
    offline: bool = False,
) -> None:
    """The cases' own releases ((file, axis, versions)) not listed already and, unless ``ask=False``, released."""
    registry = _Registry(cache, fetch, warn, offline)
    for source, axis, versions in own:
        listed = [v for v in versions if v in declared.axes[axis].versions]
        if listed:
            msg = (
                f"{source}: versions.{axis}: {listed[0]!r} is listed in axes.{axis}.versions of {declared.path} already, so the "
                f"profiles that list it plan it for every case; remove it from the case"
            )
            raise BugmatrixError(msg)
        if ask:
            registry.check(declared, axis, versions, f"{source}: versions.{axis}", "; correct the version or remove it")


def check_resolved(
    resolution: Resolution,
    matrix: Matrix,
    path: Path,
    *,
    cache: Path | None = None,
    fetch: Fetch | None = None,
    warn: Callable[[str], None] = warn,
    offline: bool = False,
) -> None:
    """Refuse a saved resolution (hand-edited, or from another registry) whose ``latest`` is no release of its axis."""
    fix, registry = f"; delete {path} and re-run `nox -s plan` (it resolves 'latest' again)", _Registry(cache, fetch, warn, offline)
    for entry in resolution.entries:
        if entry.axis in matrix.package_axes:
            registry.check(matrix, entry.axis, [entry.resolved], f"{path}: {entry.axis}.resolved", fix, indexed=False)
