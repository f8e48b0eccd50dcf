"""One committed lock per cell, ``locks/<cell-id>.txt`` (a CUDA twin installs its CPU cell's): ``uv pip compile --generate-hashes``.

Its header records the requirements' digest, so a changed pin makes it stale. Each hash block is stored once, as
``locks/pieces/<name>-<version>-<sha256>.txt``, referenced by a ``name==version #piece <digest>`` line; :func:`assemble_lock`
gives uv's text back byte for byte.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_files, write_text_atomic
from bugmatrix.releases.registry import Fetch, fetch_project, release_time
from bugmatrix.run.envbuild import run_uv

if TYPE_CHECKING:
    from bugmatrix.plan.cells import Cell
    from bugmatrix.plan.matrix import Matrix

__all__ = [
    "DEFAULT_PLATFORM",
    "LOCKS_ENV",
    "PIECES",
    "added_size",
    "assemble_lock",
    "assembled_lock",
    "create_lock",
    "exclude_newer_for",
    "is_stored_as_pieces",
    "lock_for",
    "lock_path",
    "lock_status",
    "new_lock_files",
    "pinned_distributions",
    "read_header",
    "referenced_pieces",
    "requirements_digest",
    "run_lock",
    "stored_lock_files",
    "unused_pieces",
    "write_stored_lock",
]

#: The nightly's runners (ubuntu-latest, the GPU runner): a lock made on a laptop still resolves for them.
DEFAULT_PLATFORM = "x86_64-unknown-linux-gnu"
HEADER_KEY = re.compile(r"^# (?P<key>[a-z0-9-]+): (?P<value>.*)$")
#: Another directory of locks in place of the committed ``locks/`` (try a lock patch before applying it; the benchmark).
LOCKS_ENV = "BUGMATRIX_LOCKS"
#: The harness's tools and their dependencies: resolved as of today even in an era-locked cell.
_HARNESS_EXEMPT = ("pytest", "pytest-xdist", "pluggy", "iniconfig", "execnet")
#: The directory of pieces, inside a directory of locks.
PIECES = "pieces"
DIGEST_CHARS = 16
REFERENCE = re.compile(rf"^(?P<requirement>\S[^\n]*?) #piece (?P<digest>[0-9a-f]{{{DIGEST_CHARS}}})$")
PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9._+!-]+)")
#: A hash block: ``name==version \\`` and its ``--hash=`` lines (one that ends the text without a newline stays whole).
BLOCK = re.compile(r"^(?P<requirement>[^\s#][^\n]*) \\\n(?:    --hash=[^\n]*\\\n)*    --hash=[^\n]*\n", re.MULTILINE)


def _locks_dir(root: Path) -> Path:
    """``$BUGMATRIX_LOCKS``, else ``<root>/locks``."""
    return Path(os.environ.get(LOCKS_ENV) or root / "locks")


def lock_path(root: Path, cell_id: str, directory: Path | None = None) -> Path:
    """``<locks>/<cell-id>.txt``; a CUDA twin uses its CPU cell's."""
    return (directory or _locks_dir(root)) / f"{cell_id.removesuffix('-cuda')}.txt"


def requirements_digest(requirements: Sequence[str]) -> str:
    """sha256 of the requirement list; order does not matter to a resolver, so neither here."""
    return hashlib.sha256("\n".join(sorted(r.strip() for r in requirements)).encode()).hexdigest()


def exclude_newer_for(pinned: Mapping[str, str], *, slack: dt.timedelta = dt.timedelta(days=1), fetch: Fetch | None = None) -> str:
    """A cutoff just after the newest pin's *last* upload (torch uploads its wheels over minutes)."""
    newest = max(release_time((fetch or fetch_project)(name), version) for name, version in pinned.items())
    return (newest + slack).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def create_lock(
    requirements: Sequence[str],
    python: str,
    out: Path,
    *,
    exclude_newer: str | None = None,
    exempt: Sequence[str] = (),
    platform: str = DEFAULT_PLATFORM,
    exclude_newer_packages: Mapping[str, str] | None = None,
    pieces: bool = False,
) -> Path:
    """Resolve ``requirements`` for ``python`` on ``platform`` into ``out`` (``pieces``: in the stored form); no solution
    is a BugmatrixError with the resolver's reason. ``exclude_newer`` holds all but ``exempt`` back."""
    command = ["pip", "compile", "-", "--quiet", "--no-header", "--generate-hashes"]
    command += ["--python-version", python, "--python-platform", platform]
    if exclude_newer:
        command += ["--exclude-newer", exclude_newer]
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        command += [arg for name in exempt for arg in ("--exclude-newer-package", f"{name}={now}")]
    held = dict(exclude_newer_packages or {})
    command += [arg for name, cutoff in sorted(held.items()) for arg in ("--exclude-newer-package", f"{name}={cutoff}")]
    result = run_uv(*command, input="\n".join(requirements) + "\n")
    if result.returncode != 0:
        reason = (
            " ".join([line.strip() for line in result.stderr.splitlines() if line.strip()][-3:]) or "no output"
        )  # uv's cause/hint lines
        msg = f"cannot lock {out.name} for python {python}: {reason}; fix the pins or constraints in matrix.toml"
        raise BugmatrixError(msg)
    header = [
        "# bugmatrix lock: every distribution of one cell, exact versions and hashes. Do not edit; re-create it.",
        f"# requirements-sha256: {requirements_digest(requirements)}",
        f"# python: {python}",
        f"# platform: {platform}",
        f"# exclude-newer: {exclude_newer or 'none'}",
        f"# exempt: {' '.join(exempt) if exclude_newer and exempt else 'none'}",
        *([f"# exclude-newer-package: {', '.join(f'{n}={c}' for n, c in sorted(held.items()))}"] if held else []),
        *(f"# requirement: {r}" for r in requirements),
    ]
    text = "\n".join(header) + "\n" + result.stdout
    if pieces:
        write_stored_lock(text, out)
    else:
        write_text_atomic(out, text)
    return out


def read_header(lock: Path) -> dict[str, str | list[str]]:
    """The lock's header comments as key -> value; ``requirement`` is a list."""
    try:
        text = lock.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{lock}: cannot read the lock ({exc.strerror}); create it with bugmatrix.run.lock.create_lock"
        raise BugmatrixError(msg) from exc
    comments = itertools.takewhile(lambda line: line.startswith("#"), text.splitlines())
    found = [(m["key"], m["value"]) for line in comments if (m := HEADER_KEY.match(line))]
    return {"requirement": [value for key, value in found if key == "requirement"]} | {k: v for k, v in found if k != "requirement"}


def lock_status(lock: Path, requirements: Sequence[str], *, python: str | None = None) -> str | None:
    """None when ``lock`` was made from exactly these requirements (and Python); else why not, in one line."""
    if not lock.exists():
        return f"{lock.name}: no lock for this cell; create it with: nox -s lock"
    header = read_header(lock)
    if header.get("requirements-sha256") != requirements_digest(requirements):
        before = set(header["requirement"])
        now = set(requirements)
        changed = ", ".join([*(f"-{r}" for r in sorted(before - now)), *(f"+{r}" for r in sorted(now - before))]) or "unknown"
        return f"{lock.name}: stale, the cell's requirements changed ({changed}); re-create it with: nox -s lock"
    if python is not None and header.get("python") != python:
        return f"{lock.name}: made for python {header.get('python')}, the cell runs {python}; re-create it with: nox -s lock"
    try:
        assemble_lock(lock)
    except BugmatrixError as exc:
        return str(exc)
    return None


def lock_for(
    root: Path, cell_id: str, requirements: Sequence[str], python: str, *, directory: Path | None = None
) -> tuple[Path | None, str | None]:
    """The lock a cell installs from (complete), or None and why (no lock, a stale one: never installed silently)."""
    path = lock_path(root, cell_id, directory)
    reason = lock_status(path, requirements, python=python)
    return (assembled_lock(root, path), None) if reason is None else (None, reason)


def assembled_lock(root: Path, lock: Path) -> Path:
    """A file holding ``lock``'s complete text: ``lock`` itself when stored whole, else ``<root>/build/locks/<digest>/<name>``."""
    text = lock.read_text(encoding="utf-8")
    if not is_stored_as_pieces(text):
        return lock
    complete = assemble_lock(lock, text)
    out = root / "build" / "locks" / hashlib.sha256(complete.encode()).hexdigest()[:16] / lock.name
    if not out.exists() or out.read_text(encoding="utf-8") != complete:
        write_text_atomic(out, complete)
    return out


def pinned_distributions(requirements: Sequence[str]) -> dict[str, str]:
    """``{"torch": "2.0.1"}`` from the ``name==version`` entries of a requirement list."""
    pinned = {}
    for text in requirements:
        requirement = Requirement(text)
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact:
            pinned[requirement.name] = exact[0]
    return pinned


def run_lock(matrix: Matrix, cells: Sequence[Cell], root: Path, *, check: bool, era: bool) -> int:
    """``nox -s lock``: write the missing or stale locks of these cells (--check: only say which; 1 if any)."""
    stale = 0
    for cell in cells:
        if cell.device != "cpu":
            continue  # a CUDA twin installs from its CPU cell's lock
        requirements, path = matrix.requirements_for(cell.pins, extra=cell.extra), lock_path(root, cell.id)
        reason = lock_status(path, requirements, python=cell.python)
        whole = reason is None and not is_stored_as_pieces(path.read_text(encoding="utf-8"))
        if check:
            stale += reason is not None or whole
            said = f"{path.name}: current, but stored whole; store it as pieces (nothing is resolved again) with: nox -s lock"
            print(f"locks/{reason}" if reason else f"locks/{said}" if whole else f"locks/{path.name}: current")
        elif reason is not None:
            cutoff = exclude_newer_for(pinned_distributions(requirements)) if era else None
            create_lock(requirements, cell.python, path, exclude_newer=cutoff, exempt=_HARNESS_EXEMPT if era else (), pieces=True)
            print(f"locks/{path.name}: written" + (f" (exclude-newer {cutoff})" if cutoff else ""))
        elif whole:
            write_stored_lock(path.read_text(encoding="utf-8"), path)
            print(f"locks/{path.name}: current, now stored as pieces (the same text)")
        else:
            print(f"locks/{path.name}: current")
    for piece in unused_pieces(_locks_dir(root)) if cells else ():
        print(f"locks/pieces/{piece.name}: no lock uses it; remove it (or run: nox -s lock)")
    return 1 if stale else 0


def _digest(piece: str) -> str:
    return hashlib.sha256(piece.encode()).hexdigest()[:DIGEST_CHARS]


def _file_name(requirement: str, digest: str) -> str:
    pinned = PINNED.match(requirement)
    return f"{pinned['name'].lower()}-{pinned['version']}-{digest}.txt" if pinned else f"{digest}.txt"


def _piece_path(locks: Path, reference_line: str) -> Path | None:
    match = REFERENCE.match(reference_line)
    return locks / PIECES / _file_name(match["requirement"], match["digest"]) if match else None


def is_stored_as_pieces(text: str) -> bool:
    """Whether a lock's text refers to pieces (else it is complete as it is)."""
    return any(REFERENCE.match(line) for line in text.splitlines())


def assemble_lock(lock: Path, text: str | None = None) -> str:
    """uv's output, byte for byte, of the stored lock ``lock``; a missing or altered piece is a BugmatrixError naming it."""
    if text is None:
        text = lock.read_text(encoding="utf-8")
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        path = _piece_path(lock.parent, line.rstrip("\n"))
        if path is None:
            out.append(line)
            continue
        fix = f"restore it (git checkout -- {lock.parent.name}/{PIECES}) or re-create the lock with: nox -s lock"
        try:
            piece = path.read_text(encoding="utf-8")
        except OSError as exc:
            msg = f"{lock.name}: its piece {lock.parent.name}/{PIECES}/{path.name} is missing ({exc.strerror}); {fix}"
            raise BugmatrixError(msg) from exc
        requirement = line.rstrip("\n").rsplit(" #piece ", 1)[0]
        if _digest(piece) != path.stem.rsplit("-", 1)[-1] or piece.splitlines()[0] != f"{requirement} \\":
            msg = f"{lock.name}: its piece {lock.parent.name}/{PIECES}/{path.name} does not match its name (edited or corrupt); {fix}"
            raise BugmatrixError(msg)
        out.append(piece)
    return "".join(out)


def stored_lock_files(text: str, lock: Path) -> dict[Path, str]:
    """The files that store uv's lock ``text`` as ``lock``: the cell's short file and each piece (:func:`assemble_lock`
    gives ``text`` back exactly)."""
    pieces: dict[Path, str] = {}

    def reference(block: re.Match[str]) -> str:
        digest = _digest(block[0])
        pieces[lock.parent / PIECES / _file_name(block["requirement"], digest)] = block[0]
        return f"{block['requirement']} #piece {digest}\n"

    return {lock: BLOCK.sub(reference, text), **pieces}


def new_lock_files(texts: Mapping[Path, str]) -> dict[Path, str]:
    """The files storing uv's lock texts (lock path -> text): each lock's short file and the pieces not stored yet."""
    files: dict[Path, str] = {}
    for lock, text in texts.items():
        files |= {p: body for p, body in stored_lock_files(text, lock).items() if p == lock or not p.exists()}
    return files


def referenced_pieces(texts: Iterable[str], locks: Path) -> set[Path]:
    """The pieces the stored locks ``texts`` (of the directory ``locks``) refer to."""
    return {p for text in texts for p in (_piece_path(locks, line) for line in text.splitlines()) if p is not None}


def unused_pieces(locks: Path, replaced: Mapping[Path, str] | None = None) -> list[Path]:
    """The pieces no lock in ``locks`` refers to (``replaced``: locks about to get this stored text)."""
    texts = {p: p.read_text(encoding="utf-8") for p in locks.glob("*.txt")} | dict(replaced or {})
    used = referenced_pieces(texts.values(), locks)
    return sorted(p for p in (locks / PIECES).glob("*.txt") if p not in used)


def write_stored_lock(text: str, lock: Path) -> None:
    """Store uv's lock ``text`` as ``lock`` and its pieces, all or nothing; pieces no lock uses any more are removed."""
    files = stored_lock_files(text, lock)
    write_files(files, remove=unused_pieces(lock.parent, {lock: files[lock]}))


def added_size(locks: Path, texts: Mapping[str, str]) -> tuple[int, int]:
    """(lines, bytes) that storing these new locks (cell id -> uv's lock text) adds to ``locks``; a stored piece costs nothing."""
    bodies = new_lock_files({locks / f"{cell}.txt": text for cell, text in texts.items()}).values()
    return sum(body.count("\n") for body in bodies), sum(len(body.encode()) for body in bodies)
