"""A lock stored as pieces: each distribution's hash block once under ``locks/pieces/``, each cell a short list of pins.

Seventy cells of one stack resolve to mostly the same distributions, and a hashed lock is mostly hash lines. Stored
here, every hash block of uv's output (``name==version \\`` and its ``--hash=`` lines) is one reference line,
``aiohttp==3.14.5 #piece 1f0c3b5e9a6d2c47``, and the block is ``locks/pieces/aiohttp-3.14.5-1f0c3b5e9a6d2c47.txt``,
named by its sha256. :func:`assemble_lock` gives back uv's output byte for byte: only that text is installed and hashed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_files

__all__ = [
    "PIECES",
    "added_size",
    "assemble_lock",
    "is_stored_as_pieces",
    "piece_path",
    "referenced_pieces",
    "split_lock",
    "stored_lock_files",
    "unused_pieces",
    "write_stored_lock",
]

#: The directory of pieces, inside a directory of locks.
PIECES = "pieces"
DIGEST_CHARS = 16
REFERENCE = re.compile(rf"^(?P<requirement>\S[^\n]*?) #piece (?P<digest>[0-9a-f]{{{DIGEST_CHARS}}})$")
PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9._+!-]+)")
#: A hash block: ``name==version \\`` and its ``--hash=`` lines (one that ends the text without a newline stays whole).
BLOCK = re.compile(r"^(?P<requirement>[^\s#][^\n]*) \\\n(?:    --hash=[^\n]*\\\n)*    --hash=[^\n]*\n", re.MULTILINE)


def _digest(piece: str) -> str:
    return hashlib.sha256(piece.encode()).hexdigest()[:DIGEST_CHARS]


def _file_name(requirement: str, digest: str) -> str:
    pinned = PINNED.match(requirement)
    return f"{pinned['name'].lower()}-{pinned['version']}-{digest}.txt" if pinned else f"{digest}.txt"


def piece_path(locks: Path, reference_line: str) -> Path | None:
    """Where the piece a reference line names is stored, or None for any other line."""
    match = REFERENCE.match(reference_line)
    return locks / PIECES / _file_name(match["requirement"], match["digest"]) if match else None


def split_lock(text: str) -> tuple[str, dict[str, str]]:
    """uv's lock text -> (the cell's stored text, {piece file name: piece text}); :func:`assemble_lock` inverts it exactly."""
    pieces: dict[str, str] = {}

    def reference(block: re.Match[str]) -> str:
        digest = _digest(block[0])
        pieces[_file_name(block["requirement"], digest)] = block[0]
        return f"{block['requirement']} #piece {digest}\n"

    return BLOCK.sub(reference, text), pieces


def is_stored_as_pieces(text: str) -> bool:
    """Whether a lock's text refers to pieces (else it is complete as it is)."""
    return any(REFERENCE.match(line) for line in text.splitlines())


def assemble_lock(lock: Path, text: str | None = None) -> str:
    """uv's output, byte for byte, of the stored lock ``lock``; a missing or altered piece is a BugmatrixError naming it."""
    if text is None:
        text = lock.read_text(encoding="utf-8")
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        path = piece_path(lock.parent, line.rstrip("\n"))
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
    """The files that store uv's lock ``text`` as ``lock``: the cell's short file and each piece."""
    stored, pieces = split_lock(text)
    return {lock: stored, **{lock.parent / PIECES / name: piece for name, piece in pieces.items()}}


def referenced_pieces(texts: Iterable[str], locks: Path) -> set[Path]:
    """The pieces the stored locks ``texts`` (of the directory ``locks``) refer to."""
    return {p for text in texts for p in (piece_path(locks, line) for line in text.splitlines()) if p is not None}


def unused_pieces(locks: Path, replaced: Mapping[Path, str] | None = None) -> list[Path]:
    """The pieces under ``locks/pieces`` that no lock in ``locks`` refers to (``replaced``: locks about to get this stored text)."""
    texts = {p: p.read_text(encoding="utf-8") for p in locks.glob("*.txt")} | dict(replaced or {})
    used = referenced_pieces(texts.values(), locks)
    return sorted(p for p in (locks / PIECES).glob("*.txt") if p not in used)


def write_stored_lock(text: str, lock: Path) -> None:
    """Store uv's lock ``text`` as ``lock`` and its pieces, all or nothing; pieces no lock uses any more are removed."""
    files = stored_lock_files(text, lock)
    write_files(files, remove=unused_pieces(lock.parent, {lock: files[lock]}))


def added_size(locks: Path, texts: Mapping[str, str]) -> tuple[int, int]:
    """(lines, bytes) that storing these new locks (cell id -> uv's lock text) adds to ``locks``; a piece stored already costs nothing."""
    lines = size = 0
    seen = {p.name for p in (locks / PIECES).glob("*.txt")}
    for cell, text in texts.items():
        files = stored_lock_files(text, locks / f"{cell}.txt")
        for path, body in files.items():
            if path.parent.name == PIECES and path.name in seen:
                continue
            seen.add(path.name)
            lines, size = lines + body.count("\n"), size + len(body.encode())
    return lines, size
