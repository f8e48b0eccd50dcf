"""The re-resolve lane: every cell's requirements resolved again against today's registry, and what moved below the pins.

A locked nightly cannot see the one drift that breaks pinned cells overnight:
a new release of an unpinned dependency (setuptools 81 removing
``pkg_resources`` from old Lightning; NumPy 2 under old torch). So each night
every cell of the profile that has a current committed lock is resolved again
exactly as ``nox -s lock`` would (:func:`bugmatrix.run.lock.create_lock`:
metadata only, no wheel is downloaded) and compared with its lock,
distribution by distribution:

* ``same``: nothing moved (a comment-only difference in uv's ``# via``
  annotations is the same environment and is not reported);
* ``moved``: the fresh lock is kept (``<out>/locks/<cell>.txt``) and the
  moved distributions named (``numpy 2.4.6 → 2.5.0``, ``+new 1.0``,
  ``-gone 2.0``, ``torch 2.10.0: files changed``); the cell's ``fresh(<id>)``
  session then runs it in that environment, beside the locked run;
* ``failed``: the requirements no longer resolve (a new release makes the
  cell unsatisfiable): the resolver's reason, a finding on the page;
* ``unlocked``: no current committed lock to compare with (the cell already
  installs today's resolution).

A lock made with ``--era`` (resolved as the registry stood when its pins were
new) is re-resolved at its own cutoff: it is old on purpose, and only what
moved below that cutoff (a yanked release) or its exempt harness tools can move.

Outputs, written all or nothing into ``<out>`` (default ``<reports>/fresh``):
``resolve.json`` (schema ``bugmatrix.reresolve/1``, every cell's status),
the fresh locks of the moved cells (whole: the ``fresh(<id>)`` sessions install
them), and ``locks.patch``: the moved locks as a patch a maintainer applies with
``git apply`` at the repository root, in the committed form (each cell's short
list of pins, its new pieces added and the pieces no lock uses any more removed:
:mod:`bugmatrix.run.lockpieces`).
``as_of`` / ``held`` resolve as the registry stood at a moment (``uv
--exclude-newer``, per distribution ``--exclude-newer-package``): a night
reproduced later, or the benchmark's simulated release.
"""

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

from packaging.utils import canonicalize_name

from bugmatrix.documents.lane import RERESOLVE_SCHEMA, STATUSES, LaneFile, Reresolved
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_files
from bugmatrix.run.lock import create_lock, lock_for, lock_path, read_header
from bugmatrix.run.lockpieces import PIECES, referenced_pieces, stored_lock_files, unused_pieces
from bugmatrix.versions import distribution_changes

if TYPE_CHECKING:
    from bugmatrix.plan.cells import Cell
    from bugmatrix.plan.matrix import Matrix

__all__ = [
    "lock_changes",
    "lock_entries",
    "patch_text",
    "reresolve_cells",
    "run_reresolve",
]

ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
HASH = re.compile(r"--hash=(?P<hash>\S+)")


def lock_entries(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Distribution (normalised) -> (version, hashes) of a lock's text (comments and ``# via`` lines ignored)."""
    entries: dict[str, tuple[str, frozenset[str]]] = {}
    current: str | None = None
    hashes: set[str] = set()
    for line in text.splitlines():
        match = ENTRY.match(line)
        if match:
            if current is not None:
                entries[current] = (entries[current][0], frozenset(hashes))
            current, hashes = canonicalize_name(match["name"]), set()
            entries[current] = (match["version"], frozenset())
        elif current is not None and line.startswith((" ", "\t")):
            hashes |= {m["hash"] for m in HASH.finditer(line)}
    if current is not None:
        entries[current] = (entries[current][0], frozenset(hashes))
    return entries


def lock_changes(committed: str, fresh: str) -> list[str]:
    """What moved from one lock's text to another's: ``name old → new``, ``+name v``, ``-name v``, ``name v: files changed``.

    The version lines are the environment diff's own (:func:`bugmatrix.versions.distribution_changes`), so the
    re-resolve lane and the report's environment changes say a move the same way; a lock adds what a version cannot
    show, a release whose wheels' hashes changed.
    """
    before, after = lock_entries(committed), lock_entries(fresh)
    moved = distribution_changes({n: v for n, (v, _) in before.items()}, {n: v for n, (v, _) in after.items()})
    rehashed = [
        f"{name} {before[name][0]}: files changed (another set of wheel hashes)"
        for name in before.keys() & after.keys()
        if before[name][0] == after[name][0] and before[name][1] != after[name][1]
    ]
    return sorted(moved + rehashed, key=lambda line: line.lstrip("+-").split(" ", 1)[0])


def patch_text(changes: Sequence[tuple[str, str | None, str | None]]) -> str:
    """A git-style patch turning each (path relative to the repository, committed text, fresh text) into the fresh one: ``git apply`` takes it.

    A committed text of None adds the file, a fresh text of None deletes it.
    """
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


def _committed_name(lock: Path) -> str:
    """The lock's path as the repository knows it, ``locks/<cell>.txt``: the patch refreshes the committed locks, wherever ``$BUGMATRIX_LOCKS`` pointed."""
    return f"locks/{lock.name}"


def _one(
    matrix: Matrix, cell: Cell, root: Path, scratch: Path, as_of: str | None, held: Mapping[str, str]
) -> tuple[Reresolved, str, str, str]:
    """(status, committed path, committed text, fresh text) for one CPU cell."""
    requirements = matrix.requirements_for(cell.pins, extra=cell.extra)
    lock, unlocked = lock_for(root, cell.id, requirements, cell.python)
    if lock is None:
        return Reresolved(cell.id, "unlocked", reason=unlocked or "no lock"), "", "", ""
    name = _committed_name(lock)
    header = read_header(lock)
    # An era lock (nox -s lock -- --era) is resolved as of its own cutoff on purpose: it stays there, its exempt tools float.
    era = str(header.get("exclude-newer", "none"))
    cutoff = as_of or (era if era != "none" else None)
    exempt = str(header.get("exempt", "none")).split() if not as_of and era != "none" else []
    exempt = [] if exempt == ["none"] else exempt
    try:
        fresh = create_lock(
            requirements, cell.python, scratch / f"{cell.id}.txt", exclude_newer=cutoff, exempt=exempt, exclude_newer_packages=held
        )
    except BugmatrixError as exc:
        return Reresolved(cell.id, "failed", reason=str(exc), committed=name), name, "", ""
    old, new = lock.read_text(encoding="utf-8"), fresh.read_text(encoding="utf-8")
    moved = lock_changes(old, new)
    return Reresolved(cell.id, "moved" if moved else "same", tuple(moved), committed=name), name, old, new


def _committed_changes(root: Path, fresh: Sequence[tuple[str, str]]) -> list[tuple[str, str | None, str | None]]:
    """(path in the repository, committed text, new text) turning the committed locks of these (cell, fresh lock text) into the fresh ones.

    In the committed form: each cell's stored text, the pieces it needs that are not there yet, and the
    pieces only the old locks used (removed, so applied patches leave no orphans behind).
    """
    stored: dict[Path, str] = {}
    old: dict[Path, str] = {}
    added: dict[Path, str] = {}
    for cell, text in fresh:
        path = lock_path(root, cell)
        files = stored_lock_files(text, path)
        stored[path], old[path] = files.pop(path), path.read_text(encoding="utf-8")
        added |= {piece: body for piece, body in files.items() if not piece.exists()}
    locks = lock_path(root, "any").parent
    was_used = referenced_pieces(old.values(), locks)
    gone = [p for p in unused_pieces(locks, stored) if p in was_used]
    changes: list[tuple[str, str | None, str | None]] = [(_committed_name(p), old[p], stored[p]) for p in stored]
    changes += [(f"locks/{PIECES}/{p.name}", None, body) for p, body in added.items()]
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
    log: Callable[[Reresolved], None] | None = None,
    profile: str | None = None,
) -> list[Reresolved]:
    """Resolve each CPU cell again (``jobs`` at once: the resolver waits on the registry), compare, write ``<out>`` all or nothing.

    A CUDA twin installs its CPU cell's lock, so the CPU cell's answer is the twin's.
    """
    cpu = [c for c in cells if c.device == "cpu"]
    with tempfile.TemporaryDirectory(prefix="bugmatrix-reresolve-") as tmp, ThreadPoolExecutor(max(1, jobs)) as pool:
        done = list(pool.map(lambda c: _one(matrix, c, root, Path(tmp), as_of, dict(held or {})), cpu))
    results = [r for r, *_ in done]
    for result in results:
        if log is not None:
            log(result)
    moved = [(r, name, old, new) for r, name, old, new in done if r.status == "moved"]
    document = LaneFile(
        RERESOLVE_SCHEMA,
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        results,
        as_of,
        dict(held or {}),
        profile,  # the report uses the lane only for a night of this profile
    )
    files: dict[Path, str | bytes] = {out / "resolve.json": json.dumps(document.to_json(), indent=1, sort_keys=True) + "\n"}
    files |= {out / "locks" / f"{r.cell}.txt": new for r, _, _, new in moved}
    patch = patch_text(_committed_changes(root, [(r.cell, new) for r, _, _, new in moved]))
    if patch:
        files[out / "locks.patch"] = patch
    stale = [p for p in (out / "locks").glob("*.txt") if p not in files] + ([] if patch else [out / "locks.patch"])
    write_files(files, remove=stale)
    return results


def run_reresolve(
    matrix: Matrix,
    cells: Sequence[Cell],
    root: Path,
    out: Path,
    *,
    as_of: str | None,
    held: Mapping[str, str],
    jobs: int,
    profile: str | None = None,
) -> int:
    """``nox -s reresolve``: one line per cell, then the totals; 0 (what moved or failed is the report's finding)."""

    def say(result: Reresolved) -> None:
        detail = {"moved": ", ".join(result.moved[:6]) + (" …" if len(result.moved) > 6 else ""), "failed": result.reason}.get(
            result.status, ""
        )
        print(f"{result.cell}: {result.status}" + (f": {detail}" if detail else ""), flush=True)

    results = reresolve_cells(matrix, cells, root, out, as_of=as_of, held=held, jobs=jobs, log=say, profile=profile)
    counts = {status: sum(r.status == status for r in results) for status in STATUSES}
    patch = out / "locks.patch"
    print(
        f"re-resolved {len(results)} cells"
        + (f" as of {as_of}" if as_of else " against today's registry")
        + ": "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + (f"; refreshed locks: {patch} (git apply {patch})" if patch.exists() else "; nothing to refresh")
    )
    return 0
