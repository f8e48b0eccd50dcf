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
the fresh locks of the moved cells, and ``locks.patch``: the moved locks as a
patch a maintainer applies with ``git apply`` at the repository root.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_files
from bugmatrix.report.envdiff import distribution_changes
from bugmatrix.run.lock import create_lock, lock_for, read_header

if TYPE_CHECKING:
    from bugmatrix.plan.cells import Cell
    from bugmatrix.plan.matrix import Matrix

__all__ = [
    "RERESOLVE_SCHEMA",
    "Lane",
    "Reresolved",
    "load_reresolved",
    "lock_changes",
    "lock_entries",
    "patch_text",
    "reresolve_cells",
    "run_reresolve",
]

RERESOLVE_SCHEMA = "bugmatrix.reresolve/1"
STATUSES = ("same", "moved", "failed", "unlocked")
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
HASH = re.compile(r"--hash=(?P<hash>\S+)")


@dataclass(frozen=True)
class Reresolved:
    """One cell's fresh resolution against its committed lock."""

    cell: str
    status: str  # one of STATUSES
    moved: tuple[str, ...] = ()
    reason: str = ""  # failed: the resolver's reason; unlocked: why there is no lock to compare with
    committed: str = ""  # the committed lock, relative to the repository (locks/<cell>.txt)

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "status": self.status, "moved": list(self.moved), "reason": self.reason, "committed": self.committed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reresolved:
        status = str(data["status"])
        if status not in STATUSES:
            msg = f"status {status!r} is not one of {', '.join(STATUSES)}"
            raise ValueError(msg)
        return cls(
            str(data["cell"]),
            status,
            tuple(str(m) for m in data.get("moved") or ()),
            str(data.get("reason", "")),
            str(data.get("committed", "")),
        )


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

    The version lines are the environment diff's own (:func:`bugmatrix.report.envdiff.distribution_changes`), so the
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


def patch_text(changes: Sequence[tuple[str, str, str]]) -> str:
    """A git-style patch turning each (path relative to the repository, committed text, fresh text) into the fresh one: ``git apply`` takes it."""
    out = []
    for path, old, new in changes:
        hunks = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3))
        if not hunks:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
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
        )  # fmt: skip
    except BugmatrixError as exc:
        return Reresolved(cell.id, "failed", reason=str(exc), committed=name), name, "", ""
    old, new = lock.read_text(encoding="utf-8"), fresh.read_text(encoding="utf-8")
    moved = lock_changes(old, new)
    return Reresolved(cell.id, "moved" if moved else "same", tuple(moved), committed=name), name, old, new


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
    document = {
        "schema": RERESOLVE_SCHEMA,
        "resolved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "as_of": as_of,
        "profile": profile,  # the report uses the lane only for a night of this profile
        "held": dict(sorted((held or {}).items())),
        "cells": [r.to_json() for r in results],
    }
    files: dict[Path, str | bytes] = {out / "resolve.json": json.dumps(document, indent=1, sort_keys=True) + "\n"}
    files |= {out / "locks" / f"{r.cell}.txt": new for r, _, _, new in moved}
    patch = patch_text([(name, old, new) for _, name, old, new in moved])
    if patch:
        files[out / "locks.patch"] = patch
    stale = [p for p in (out / "locks").glob("*.txt") if p not in files] + ([] if patch else [out / "locks.patch"])
    write_files(files, remove=stale)
    return results


@dataclass(frozen=True)
class Lane:
    """One night's lane as ``resolve.json`` holds it: when, as of when, what was held back, and each cell."""

    resolved_at: str
    as_of: str | None
    held: Mapping[str, str]
    cells: Mapping[str, Reresolved]
    profile: str | None = None  # None: written before lanes recorded their profile


def load_reresolved(out: Path) -> Lane | None:
    """``<out>/resolve.json`` (None when the lane did not run); a corrupt one is a one-line error naming the file."""
    path = out / "resolve.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != RERESOLVE_SCHEMA:
            msg = f"schema {data.get('schema')!r} is not {RERESOLVE_SCHEMA!r}"
            raise ValueError(msg)
        cells = {r.cell: r for r in (Reresolved.from_json(c) for c in data["cells"])}
        held = {str(k): str(v) for k, v in dict(data.get("held") or {}).items()}
        profile = data.get("profile")
        if profile is not None and not isinstance(profile, str):
            msg = f"profile {profile!r} is not a name"
            raise ValueError(msg)
        return Lane(str(data["resolved_at"]), data.get("as_of"), held, cells, profile)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{path}: not a re-resolve record ({exc}); run the lane again: nox -s reresolve -- --profile <profile>"
        raise BugmatrixError(msg) from exc


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
        f"re-resolved {len(results)} cells" + (f" as of {as_of}" if as_of else " against today's registry")
        + ": " + ", ".join(f"{n} {s}" for s, n in counts.items())
        + (f"; refreshed locks: {patch} (git apply {patch})" if patch.exists() else "; nothing to refresh")
    )  # fmt: skip
    return 0
