"""Every version the matrix names is a release on the registry, checked when the plan is made (a typo would plan cells
that can only fail to install).

A version is known when any distribution of its axis lists it with a file that is not yanked. Answers are cached
(``build/registry/<distribution>.json`` or ``$BUGMATRIX_REGISTRY_CACHE``): a version missing from the cache makes one
fresh request. An unreachable registry is a warning; ``offline`` (``nox -l``) checks against the cache alone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, write_json_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.registry import Fetch, RegistryUnreachable, Resolution, fetch_project, warn

__all__ = ["CACHE_ENV", "cache_dir", "cached_versions", "check_case_versions", "check_resolved", "check_versions", "listed_versions"]

CACHE_ENV = "BUGMATRIX_REGISTRY_CACHE"


def cache_dir() -> Path:
    """Where the registry's answers are kept: ``$BUGMATRIX_REGISTRY_CACHE`` or ``build/registry`` (git ignores build/)."""
    return Path(os.environ.get(CACHE_ENV) or ROOT / "build" / "registry")


def _released(project: dict) -> list[str]:
    """Every version with at least one file that is not yanked (pre-releases too: a matrix may pin one)."""
    return [v for v, files in project.get("releases", {}).items() if files and not all(f.get("yanked") for f in files)]


def _as_versions(texts: Iterable[str]) -> set[Version]:
    found = set()
    for text in texts:
        with contextlib.suppress(InvalidVersion):
            found.add(Version(text))
    return found


def _cache_file(cache: Path, distribution: str) -> Path:
    return cache / f"{canonicalize_name(distribution)}.json"


def cached_versions(distribution: str, *, cache: Path) -> set[Version]:
    """The releases of ``distribution`` the cache remembers (none when there is no cache or it is damaged: only a cache)."""
    try:
        return _as_versions(read_json(_cache_file(cache, distribution), "registry cache")["versions"])
    except (BugmatrixError, KeyError, TypeError):
        return set()


def listed_versions(distribution: str, *, cache: Path, fetch: Fetch | None = None) -> set[Version]:
    """The registry's releases of ``distribution``, asked now and saved to the cache."""
    versions = _released(dict((fetch or fetch_project)(distribution)))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = _cache_file(cache, distribution)
    try:
        write_json_atomic(path, {"distribution": distribution, "fetched": now, "versions": sorted(versions)})
    except OSError as exc:
        warn(f"cannot cache the registry's answer in {path} ({exc.strerror}); the next plan asks again")
    return _as_versions(versions)


def _unreleased(
    matrix: Matrix, name: str, versions: Iterable[str], *, folder: Path, fetch: Fetch | None, offline: bool
) -> tuple[list[str], str]:
    """The versions no distribution of axis ``name`` has released, and why some could not be checked ("" when all were);
    ``offline``: reported only when every distribution of the axis has a cached answer without it.
    """
    axis = matrix.axes[name]
    remembered = set().union(*(cached_versions(d, cache=folder) for d in axis.distributions))
    missing = [v for v in versions if Version(v) not in remembered]
    if offline:
        every = all(_cache_file(folder, d).exists() for d in axis.distributions)
        return (missing if every else []), ""
    unreachable = []
    for distribution in axis.distributions if missing else ():
        try:
            known = listed_versions(distribution, cache=folder, fetch=fetch)
        except RegistryUnreachable as exc:
            unreachable.append(str(exc))
            continue
        except BugmatrixError as exc:  # the registry answered: no such project
            msg = f"{matrix.path}: axes.{name}.distributions.{distribution}: {exc}"
            raise BugmatrixError(msg) from exc
        missing = [v for v in missing if Version(v) not in known]
        if not missing:
            break
    return missing, (unreachable[0] if missing and unreachable else "")


def check_versions(
    matrix: Matrix, *, cache: Path | None = None, fetch: Fetch | None = None, warn: Callable[[str], None] = warn, offline: bool = False
) -> None:
    """Refuse a package-axis version no distribution of the axis has released (one line naming the key); unreachable: warn."""
    folder = cache or cache_dir()
    for name in matrix.package_axes:
        missing, unreachable = _unreleased(matrix, name, matrix.axes[name].versions, folder=folder, fetch=fetch, offline=offline)
        if unreachable:
            warn(f"{matrix.path}: axes.{name}.versions not checked against the registry ({unreachable})")
        elif missing:
            cached = f" (as cached in {folder}; `nox -s plan` asks the registry again)" if offline else ""
            axis = matrix.axes[name]
            msg = (
                f"{matrix.path}: axes.{name}.versions[{axis.versions.index(missing[0])}]: {missing[0]!r} is not a release of "
                f"{' or '.join(axis.distributions)} on the registry{cached}; correct the version or remove it "
                "(and its uses in profiles, [base], [[include]], [gpu])"
            )
            raise BugmatrixError(msg)


def check_case_versions(
    declared: Matrix,
    own: Iterable[tuple[str, str, tuple[str, ...]]],
    *,
    ask: bool = True,
    cache: Path | None = None,
    fetch: Fetch | None = None,
    warn: Callable[[str], None] = warn,
    offline: bool = False,
) -> None:
    """The cases' own releases ((file, axis, versions)) not listed already and, unless ``ask=False``, released."""
    folder = cache or cache_dir()
    for source, axis, versions in own:
        listed = [v for v in versions if v in declared.axes[axis].versions]
        if listed:
            msg = (
                f"{source}: versions.{axis}: {listed[0]!r} is listed in axes.{axis}.versions of {declared.path} already, so the "
                f"profiles that list it plan it for every case; remove it from the case"
            )
            raise BugmatrixError(msg)
        if not ask:
            continue
        missing, unreachable = _unreleased(declared, axis, versions, folder=folder, fetch=fetch, offline=offline)
        if unreachable:
            warn(f"{source}: versions.{axis} not checked against the registry ({unreachable})")
        elif missing:
            where = " or ".join(declared.axes[axis].distributions)
            msg = (
                f"{source}: versions.{axis}[{versions.index(missing[0])}]: {missing[0]!r} is not a release of {where} on the "
                "registry; correct the version or remove it"
            )
            raise BugmatrixError(msg)


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
    folder = cache or cache_dir()
    for entry in resolution.entries:
        if entry.axis not in matrix.package_axes:
            continue
        missing, unreachable = _unreleased(matrix, entry.axis, [entry.resolved], folder=folder, fetch=fetch, offline=offline)
        if unreachable:
            warn(f"{path}: {entry.axis}.resolved not checked against the registry ({unreachable})")
        elif missing:
            where = " or ".join(matrix.axes[entry.axis].distributions)
            msg = (
                f"{path}: {entry.axis}.resolved: {entry.resolved!r} is not a release of {where} on the registry; "
                f"delete {path} and re-run `nox -s plan` (it resolves 'latest' again)"
            )
            raise BugmatrixError(msg)
