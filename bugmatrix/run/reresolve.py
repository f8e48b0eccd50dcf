"""The re-resolve lane: a locked nightly cannot see a new release of an unpinned dependency (setuptools 81 removing
``pkg_resources``), so each cell is resolved as ``nox -s lock`` would against today's registry and compared with its lock.
Written all or nothing into ``<out>``: ``resolve.json``, the moved cells' fresh locks, ``locks.patch`` (for ``git apply``)."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from packaging.utils import canonicalize_name

from bugmatrix.documents.lane import RERESOLVE_SCHEMA, STATUSES, LaneFile, Reresolved
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_files
from bugmatrix.run.lock import PIECES, create_lock, lock_for, lock_path, new_lock_files, read_header, referenced_pieces, unused_pieces
from bugmatrix.versions import distribution_changes

if TYPE_CHECKING:
    from bugmatrix.plan.cells import Cell
    from bugmatrix.plan.matrix import Matrix

__all__ = ["lock_changes", "lock_entries", "patch_text", "reresolve_cells"]

ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
HASH = re.compile(r"--hash=(?P<hash>\S+)")


def lock_entries(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Distribution (normalised) -> (version, hashes) of a lock's text (comments and ``# via`` lines ignored)."""
    entries: dict[str, tuple[str, set[str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        if match := ENTRY.match(line):
            current = canonicalize_name(match["name"])
            entries[current] = (match["version"], set())
        elif current is not None and line.startswith((" ", "\t")):
            entries[current][1].update(m["hash"] for m in HASH.finditer(line))
    return {name: (version, frozenset(hashes)) for name, (version, hashes) in entries.items()}


def lock_changes(committed: str, fresh: str) -> list[str]:
    """What moved from one lock's text to another's, as the report's environment diff says it, plus ``name v: files changed``."""
    before, after = lock_entries(committed), lock_entries(fresh)
    moved = distribution_changes({n: v for n, (v, _) in before.items()}, {n: v for n, (v, _) in after.items()})
    rehashed = [
        f"{name} {before[name][0]}: files changed (another set of wheel hashes)"
        for name in before.keys() & after.keys()
        if before[name][0] == after[name][0] and before[name][1] != after[name][1]
    ]
    return sorted(moved + rehashed, key=lambda line: line.lstrip("+-").split(" ", 1)[0])


def patch_text(changes: Sequence[tuple[str, str | None, str | None]]) -> str:
    """A patch for ``git apply`` from (path in the repository, committed text, fresh text); None adds or deletes the file."""
    out = []
    for path, old, new in changes:
        before, after = ("/dev/null" if old is None else f"a/{path}"), ("/dev/null" if new is None else f"b/{path}")
        hunks = list(difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True), before, after, n=3))
        if not hunks:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        out += ["new file mode 100644\n"] if old is None else ["deleted file mode 100644\n"] if new is None else []
        for line in hunks:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _one(matrix: Matrix, cell: Cell, root: Path, scratch: Path, as_of: str | None, held: Mapping[str, str]) -> tuple[Reresolved, str]:
    requirements = matrix.requirements_for(cell.pins, extra=cell.extra)
    lock, unlocked = lock_for(root, cell.id, requirements, cell.python)
    if lock is None:
        return Reresolved(cell.id, "unlocked", reason=unlocked or "no lock"), ""
    name = f"locks/{lock.name}"  # as the repository knows it, wherever $BUGMATRIX_LOCKS pointed
    header = read_header(lock)
    # An era lock stays at its own cutoff; its exempt tools float.
    era = None if header.get("exclude-newer", "none") == "none" else str(header["exclude-newer"])
    exempt = [] if as_of or era is None else [n for n in str(header.get("exempt", "none")).split() if n != "none"]
    try:
        out = scratch / f"{cell.id}.txt"
        fresh = create_lock(requirements, cell.python, out, exclude_newer=as_of or era, exempt=exempt, exclude_newer_packages=held)
    except BugmatrixError as exc:
        return Reresolved(cell.id, "failed", reason=str(exc), committed=name), ""
    new = fresh.read_text(encoding="utf-8")
    moved = lock_changes(lock.read_text(encoding="utf-8"), new)
    return Reresolved(cell.id, "moved" if moved else "same", tuple(moved), committed=name), new


def _committed_changes(root: Path, fresh: Sequence[tuple[str, str]]) -> list[tuple[str, str | None, str | None]]:
    """(path, committed text, new text) storing these (cell, fresh lock text): each cell's stored text, its new pieces,
    and the pieces only the old locks used (removed)."""
    locks, texts = lock_path(root, "any").parent, {lock_path(root, cell): text for cell, text in fresh}
    old, files = {p: p.read_text(encoding="utf-8") for p in texts}, new_lock_files(texts)
    gone = [p for p in unused_pieces(locks, {p: files[p] for p in texts}) if p in referenced_pieces(old.values(), locks)]
    changes: list[tuple[str, str | None, str | None]] = [(f"locks/{p.name}", old[p], files[p]) for p in texts]
    changes += [(f"locks/{PIECES}/{p.name}", None, body) for p, body in files.items() if p not in texts]
    changes += [(f"locks/{PIECES}/{p.name}", p.read_text(encoding="utf-8"), None) for p in gone]
    return sorted(changes)


def reresolve_cells(
    matrix: Matrix,
    cells: Sequence[Cell],
    root: Path,
    out: Path,
    *,
    as_of: str | None = None,
    held: Mapping[str, str] | None = None,
    jobs: int = 4,
    say: Callable[[str], None] | None = None,
    profile: str | None = None,
) -> list[Reresolved]:
    """Resolve each CPU cell again (``jobs`` at once), compare, write ``<out>`` all or nothing (a CUDA twin shares its CPU
    cell's lock). ``say`` (``nox -s reresolve``): one line per cell, then the totals."""
    cpu = [c for c in cells if c.device == "cpu"]
    with tempfile.TemporaryDirectory(prefix="bugmatrix-reresolve-") as tmp, ThreadPoolExecutor(max(1, jobs)) as pool:
        done = list(pool.map(lambda c: _one(matrix, c, root, Path(tmp), as_of, dict(held or {})), cpu))
    results = [r for r, _ in done]
    for result in results if say is not None else ():
        moved = ", ".join(result.moved[:6]) + (" …" if len(result.moved) > 6 else "")
        detail = {"moved": moved, "failed": result.reason}.get(result.status, "")
        say(f"{result.cell}: {result.status}" + (f": {detail}" if detail else ""))
    moved = [(r.cell, new) for r, new in done if r.status == "moved"]
    document = LaneFile(RERESOLVE_SCHEMA, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), results, as_of, dict(held or {}), profile)
    files: dict[Path, str | bytes] = {out / "resolve.json": json.dumps(msgspec.to_builtins(document), indent=1, sort_keys=True) + "\n"}
    files |= {out / "locks" / f"{cell}.txt": new for cell, new in moved}
    patch = patch_text(_committed_changes(root, moved))
    if patch:
        files[out / "locks.patch"] = patch
    stale = [p for p in (out / "locks").glob("*.txt") if p not in files] + ([] if patch else [out / "locks.patch"])
    write_files(files, remove=stale)
    if say is not None:
        counts = ", ".join(f"{sum(r.status == s for r in results)} {s}" for s in STATUSES)
        against = f"as of {as_of}" if as_of else "against today's registry"
        refreshed = f"refreshed locks: {out / 'locks.patch'} (git apply {out / 'locks.patch'})" if patch else "nothing to refresh"
        say(f"re-resolved {len(results)} cells {against}: {counts}; {refreshed}")
    return results
