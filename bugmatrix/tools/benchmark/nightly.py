"""``--nightly-reuse``: what a nightly costs when its cost follows what changed, against a full run.

Each night is ``nox -t <profile> fresh-<profile>`` with ``$BUGMATRIX_PREVIOUS`` and lean disk, after a setup night
(every cell run, kept in ``.nox/benchmark-nightly/``): (a) nothing moved (<= 5 % of the full run, nothing downloaded);
(b) a new release of one axis (exactly its cells run); (c) a new release of one transitive dependency (exactly the
cells whose locks hold it move, and their fresh siblings run)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bugmatrix.documents.lane import load_reresolved
from bugmatrix.documents.run import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json, write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.cells import Cell, plan_cells
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.releases.registry import Resolution, Resolved, fetch_project, load_resolution, release_versions
from bugmatrix.releases.tracking import apply_resolution, requests, resolve_matrix
from bugmatrix.report.history import reuse_facts
from bugmatrix.run.diskbudget import heavy_distributions
from bugmatrix.run.lock import LOCKS_ENV, create_lock, lock_path
from bugmatrix.run.reresolve import lock_entries, reresolve_cells
from bugmatrix.run.reuse import ReusePolicy, decide
from bugmatrix.run.runner import CellSpec, cell_key
from bugmatrix.tools.benchmark.cells import uv_cache_of
from bugmatrix.tools.benchmark.table import Measurement, Sampler, timed_nox

__all__ = ["DownloadWatch", "measure_nightly_reuse", "moved_candidates", "new_release", "stale_setup"]

#: At most this share of the full run's wall time for a night whose inputs are all unchanged (night (a)).
TARGET = 0.05


class DownloadWatch(Sampler):
    """Bytes of wheels that appear in uv's cache while entered (new ``archive-v*`` entries, sized when first seen)."""

    def __init__(self, cache: Path, every: float = 2.0) -> None:
        super().__init__(every, "download-watch")
        self.cache = cache
        self.seen = set(self._entries())
        self.added: dict[Path, int] = {}

    def _entries(self) -> list[Path]:
        return [p for archive in self.cache.glob("archive-v*") for p in archive.iterdir()] if self.cache.is_dir() else []

    def sample(self) -> None:
        for entry in self._entries():
            if entry not in self.seen and entry not in self.added:
                self.added[entry] = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file() and not f.is_symlink())

    @property
    def mib(self) -> float:
        return sum(self.added.values()) / 2**20


@dataclass(frozen=True)
class Night:
    """One measured night: its wall time, what ran and was reused, what its lane found, what it downloaded."""

    wall_min: float
    ran: frozenset[str]
    reused: frozenset[str]
    siblings: frozenset[str]
    moved: frozenset[str]
    downloaded_mib: float
    reports: Path

    def to_json(self) -> dict[str, object]:
        """nights.json's entry: every field but ``reports``, the sets sorted."""
        return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(self).items() if k != "reports"}

    def counts(self) -> str:
        return f"{len(self.ran)} run, {len(self.reused)} reused, {len(self.siblings)} fresh sibling(s) run; lane: {len(self.moved)} moved"


def _night(root: Path, profile: str, reports: Path, env: Mapping[str, str], *, lane: bool = True) -> Night:
    shutil.rmtree(reports, ignore_errors=True)
    env = {**os.environ, "BUGMATRIX_REPORTS": str(reports), "BUGMATRIX_DISK": "lean", **env}
    tags = [profile, f"fresh-{profile}"] if lane else [profile]
    with DownloadWatch(uv_cache_of(env)) as watch:
        wall = timed_nox(root, env, "-t", *tags)
    runs, siblings = (load_run_dir(d) if d.is_dir() else [] for d in (reports / "runs", reports / "fresh" / "runs"))
    lane = load_reresolved(reports / "fresh")
    moved = [c.cell for c in lane.cells if c.status == "moved"] if lane else []
    return Night(
        wall / 60,
        frozenset(r.cell for r in runs if r.reused_from is None),
        frozenset(r.cell for r in runs if r.reused_from),
        frozenset(r.cell for r in siblings if r.reused_from is None),
        frozenset(moved),
        watch.mib,
        reports,
    )


def _todays_locks(root: Path, matrix: Matrix, cells: Sequence[Cell], work: Path) -> None:
    """The committed locks with the lane's patch applied (today's resolution), in ``work/locks``: nothing has moved yet."""
    locks = work / "locks"
    shutil.rmtree(locks, ignore_errors=True)
    shutil.copytree(root / "locks", locks)
    reresolve_cells(matrix, cells, root, work / "lane")
    for fresh in (work / "lane" / "locks").glob("*.txt"):
        shutil.copy(fresh, locks / fresh.name)


def stale_setup(root: Path, matrix: Matrix, cells: Sequence[Cell], previous: Path, locks: Path) -> str:
    """Why a kept setup night cannot stand for last night ("" when every cell would be reused)."""
    policy = ReusePolicy(previous, matrix.file.reuse.max_age_days, *reuse_facts(previous / "history.jsonl"))
    for cell in cells:
        spec = replace(CellSpec.of(cell), locks=locks)
        key, why = cell_key(matrix, spec, root)  # a sibling: with its extra
        decision = decide(policy, spec, key, unkeyed=why)
        if decision.reused is None:
            return f"{cell.id} {decision.why}"
    return ""


def new_release(declared: Matrix, resolution: Resolution, catalog: Catalog, profile: str) -> tuple[str, str]:
    """(axis, version): of each ``latest`` package axis's newest unlisted release, the one bringing the fewest cells (> 0)."""
    found = []
    for axis in (a for a in requests(declared) if a in declared.package_axes):
        listed = set(declared.axes[axis].versions)
        released = release_versions(fetch_project(next(iter(declared.axes[axis].distributions))))
        unlisted = [str(v) for v in reversed(released) if str(v) not in listed]
        if unlisted and any(e.axis == axis and e.requested == "latest" for e in resolution.entries):
            planned = plan_cells(apply_resolution(declared, _with_release(resolution, axis, unlisted[0])), profile, catalog)
            found.append((sum(1 for c in planned if c.device == "cpu" and c.pins.get(axis) == unlisted[0]), axis, unlisted[0]))
    if not found:
        msg = "no package axis tracks latest with an unlisted release to stand in for a new one; pass --new-release AXIS=VERSION"
        raise BugmatrixError(msg)
    _, axis, version = min(found, key=lambda item: (item[0] == 0, item[0]))
    return axis, version


def _with_release(resolution: Resolution, axis: str, version: str) -> Resolution:
    entries = tuple(Resolved(e.axis, e.requested, version) if (e.axis, e.requested) == (axis, "latest") else e for e in resolution.entries)
    return Resolution(entries, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def moved_candidates(
    root: Path, locks: Path, cells: Sequence[Cell], matrix: Matrix, wanted: str | None
) -> list[tuple[str, str, list[str]]]:
    """(distribution, version, cells holding it) to hold back, best first: unpinned ones held by the fewest cells (at least
    two, to show "exactly those"), never the torch stack (holding one of its wheels back leaves torch unsatisfiable)."""
    pinned = {d for axis in matrix.package_axes for d in matrix.axes[axis].distributions}
    holders: dict[tuple[str, str], list[str]] = {}
    for cell in cells:
        for name, (version, _) in lock_entries(lock_path(root, cell.id, locks).read_text(encoding="utf-8")).items():
            holders.setdefault((name, version), []).append(cell.id)
    candidates = [
        (n, v, c)
        for (n, v), c in holders.items()
        if (n == wanted if wanted else n not in pinned and len(c) >= 2 and not heavy_distributions([n]))
    ]
    if not candidates:
        why = f"no cell's lock holds {wanted!r}" if wanted else "no distribution to hold back"
        msg = f"{why}; pass --moved" + (" with a distribution the locks list" if wanted else "")
        raise BugmatrixError(msg)
    return sorted(candidates, key=lambda item: (len(item[2]), item[0]))


def _yesterday(root: Path, matrix: Matrix, cells: Sequence[Cell], locks: Path, moved: str | None) -> tuple[Path, str, str, list[str], str]:
    """Locks as the registry stood just before the first :func:`moved_candidates` release that resolves, for the cells holding
    it: (locks, distribution, version, cells, cutoff)."""
    before = locks.with_name("locks-before")
    tried = []
    for name, version, held in moved_candidates(root, locks, cells, matrix, moved)[:5]:
        files = fetch_project(name).get("releases", {}).get(version, [])
        uploads = [f["upload_time_iso_8601"] for f in files if "upload_time_iso_8601" in f]
        if not uploads:
            msg = f"the registry lists no files for {name} {version}; pass --moved with another distribution"
            raise BugmatrixError(msg)
        first = min(dt.datetime.fromisoformat(u.replace("Z", "+00:00")) for u in uploads)
        cutoff = (first - dt.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")  # just before its first file's upload
        shutil.rmtree(before, ignore_errors=True)
        shutil.copytree(locks, before)
        try:
            for cell in (c for c in cells if c.id in held):
                requirements = matrix.requirements_for(cell.pins, extra=cell.extra)
                create_lock(requirements, cell.python, before / f"{cell.id}.txt", exclude_newer_packages={name: cutoff})
        except BugmatrixError as exc:
            tried.append(f"{name} {version}: {exc}")
            continue
        return before, name, version, held, cutoff
    msg = f"no candidate could be held back ({'; '.join(tried)}); pass --moved with another distribution"
    raise BugmatrixError(msg)


def measure_nightly_reuse(root: Path, catalog: Catalog, args: argparse.Namespace) -> list[Measurement]:
    """The setup night (a full run), then nights (a), (b) and (c) of ``args.nightly_profile``; one row each against the full run's
    wall time (``--fresh-setup``, ``--new-release``, ``--moved`` from ``args``)."""
    profile = args.nightly_profile
    declared = load_matrix(args.matrix)
    matrix, resolution = resolve_matrix(declared)
    cells = [c for c in plan_cells(matrix, profile, catalog) if c.device == "cpu"]
    work = root / ".nox" / "benchmark-nightly"
    out = output_dir() / "benchmark-nightly"
    previous, locks = work / "previous", work / "locks"
    recorded = read_json(work / "setup.json", "benchmark record") if (work / "setup.json").exists() else {}
    kept = not args.fresh_setup and recorded.get("profile") == profile and (previous / "runs").is_dir() and locks.is_dir()
    stale = stale_setup(root, matrix, cells, previous, locks) if kept else ""
    if stale:
        print(f"benchmark: the kept setup night cannot stand for last night ({stale}): running it again", flush=True)
    rows = []
    if kept and not stale:  # the full run to compare with: the setup night recorded with it
        full, source = float(recorded["wall_min"]), f"the setup night of {recorded['date']}"
    else:
        shutil.rmtree(work, ignore_errors=True)
        _todays_locks(root, matrix, cells, work)
        full = _night(root, profile, previous, {LOCKS_ENV: str(locks), "BUGMATRIX_NO_REUSE": "1"}, lane=False).wall_min
        source = "the setup night, measured now"
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_json_atomic(work / "setup.json", {"profile": profile, "wall_min": full, "date": now})
        name = f"nightly setup: {profile} profile, every cell run ({len(cells)} cells)"
        rows.append(Measurement(name, full, None, "min", note="the previous night"))

    def row(name: str, night: Night, note: str, *, bounded: bool = False) -> Measurement:
        text = f"{night.counts()}; {night.downloaded_mib:.0f} MiB of wheels downloaded; {note}; baseline: {source}; {night.reports}"
        return Measurement(name, night.wall_min, full, "min", "<=" if bounded else "", TARGET if bounded else 0.0, note=text)

    base_env = {LOCKS_ENV: str(locks), "BUGMATRIX_PREVIOUS": str(previous)}
    a = _night(root, profile, out / "a-nothing-moved", base_env)
    met = not a.ran and not a.moved and a.downloaded_mib == 0
    rows.append(row("nightly (a) every key unchanged vs full run", a, f"target: 0 run, 0 moved, 0 MiB (met: {met})", bounded=True))

    axis, version = args.new_release or new_release(declared, resolution, catalog, profile)
    if not any(e.axis == axis and e.requested == "latest" for e in resolution.entries):
        msg = f"--new-release {axis}={version}: no profile tracks latest for {axis!r}; name an axis matrix.toml lists latest for"
        raise BugmatrixError(msg)
    fixture = work / "resolution-new-release.json"
    write_json_atomic(fixture, _with_release(resolution, axis, version).to_json())
    planned = plan_cells(apply_resolution(declared, load_resolution(fixture)), profile, catalog)
    pinning = {c.id for c in planned if c.device == "cpu" and c.pins.get(axis) == version}
    b = _night(root, profile, out / "b-new-release", {**base_env, "BUGMATRIX_RESOLUTION": str(fixture)})
    note = f"runs exactly the {len(pinning)} cell(s) pinning it: {set(b.ran) == pinning}"
    rows.append(row(f"nightly (b) new release {axis} {version} vs full run", b, note))

    before, name, held_version, holders, cutoff = _yesterday(root, matrix, cells, locks, args.moved)
    prior = work / "previous-before"
    shutil.rmtree(prior, ignore_errors=True)
    shutil.copytree(previous, prior)
    # The holders run again as yesterday ran them, and yesterday's report records their run files' digests (reuse trusts no other).
    selected = [*(f"cell({c})" for c in holders), f"report-{profile}"]
    env_c = {**os.environ, "BUGMATRIX_REPORTS": str(prior), LOCKS_ENV: str(before), "BUGMATRIX_NO_REUSE": "1", "BUGMATRIX_DISK": "lean"}
    timed_nox(root, env_c, "-s", *selected)
    c = _night(root, profile, out / "c-transitive-release", {LOCKS_ENV: str(before), "BUGMATRIX_PREVIOUS": str(prior)})
    page = (c.reports / "index.html").read_text(encoding="utf-8") if (c.reports / "index.html").exists() else ""
    names = f"{name} " in page and f"→ {held_version}" in page
    note = (
        f"held back before {cutoff} in {len(holders)} cell(s); siblings run = cells whose resolution changed: {c.siblings == c.moved}"
        f" (= the cells holding it: {c.moved == set(holders)}); the page names {name}: {names}"
    )
    rows.append(row(f"nightly (c) new release of {name} {held_version} (transitive) vs full run", c, note))
    write_json_atomic(out / "nights.json", {"a": a.to_json(), "b": b.to_json(), "c": c.to_json()})
    return rows
