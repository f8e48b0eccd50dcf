"""Files written so that a reader only ever sees the old or the new whole file, files read with limits, and output paths
checked before anything is written. Imported inside cells too (the run file): the standard library only."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError, OutputError

__all__ = [
    "LIMITS",
    "READ_SECONDS",
    "check_output_dir",
    "check_output_file",
    "check_writable_dir",
    "decode_json",
    "digest_of",
    "file_digest",
    "locked_directories",
    "read_bytes",
    "read_json",
    "read_text",
    "write_files",
    "write_json_atomic",
    "write_text_atomic",
]


_MIB = 1024 * 1024
#: The most bytes read from a file of each kind (a full night's, several times over): a planted /dev/zero is refused.
LIMITS = {
    "run file": 64 * _MIB,  # a 47-variant cell with its log excerpts: ~60 kB
    "compat document": 256 * _MIB,  # the full profile's compat.json: ~2 MB
    "history": 256 * _MIB,  # 90 nights of 1,000 cells x 20 variants, with each run file's digest: ~10 MB
    "lane record": 16 * _MIB,
    "plan document": 16 * _MIB,
    "saved resolution": _MIB,
    "site index": 16 * _MIB,  # nights.json
    "site file": 32 * _MIB,  # a page, an issue body, a lock of a previous site (publish.site.MAX_FILE_BYTES)
    "cell spec": 16 * _MIB,
    "registry cache": 16 * _MIB,
    "step summary": 16 * _MIB,  # $GITHUB_STEP_SUMMARY, appended to (GitHub shows its first MiB)
    "README": 4 * _MIB,
    "issue body": 4 * _MIB,
    "manifest": _MIB,
    "benchmark record": _MIB,  # a benchmark's kept setup night (tools/benchmark)
    "hashed file": 64 * _MIB,  # a lock, a case or harness file named in an input key
}
#: How long one read may take: a file on a wedged mount is an error naming it, not a night that never ends.
READ_SECONDS = 60.0
_CHUNK = _MIB


_KINDS = {stat.S_ISLNK: "a symlink", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a character device"}
_KINDS |= {stat.S_ISBLK: "a block device", stat.S_ISDIR: "a directory"}


def _kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS.items() if test(mode)), "not a regular file")


def read_bytes(path: Path, kind: str, *, fix: str = "", seconds: float = READ_SECONDS) -> bytes:
    """The bytes of ``path``, a regular file of at most ``LIMITS[kind]`` bytes read within ``seconds``; else one-line BugmatrixError
    (``lstat`` first, so a FIFO or a device is never opened; the read stops at the cap whatever the size said)."""
    limit = LIMITS[kind]

    def refuse(problem: str) -> BugmatrixError:
        return BugmatrixError(f"{path}: {problem}{f'; {fix}' if fix else ''}")

    regular_only = f"(a {kind} is read from a regular file only)"
    try:
        before = os.lstat(path)
        if not stat.S_ISREG(before.st_mode):
            raise refuse(f"{_kind_of(before.st_mode)} {regular_only}")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise refuse("no such file") from None
    except OSError as exc:
        raise refuse(f"cannot open the {kind} ({exc.strerror or exc})") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise refuse(f"{_kind_of(opened.st_mode)} once opened, or replaced while it was opened {regular_only}")
        if opened.st_size > limit:
            raise refuse(f"{opened.st_size:,} bytes, over the cap of {limit:,} bytes for a {kind} (refused)")
        chunks, size, deadline = [], 0, time.monotonic() + seconds
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise refuse(f"grew past the cap of {limit:,} bytes for a {kind} while it was read (refused)")
            if time.monotonic() > deadline:
                raise refuse(f"reading the {kind} took longer than {seconds:g} s (refused)")
        return b"".join(chunks)
    except OSError as exc:
        raise refuse(f"cannot read the {kind} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _decoded(data: bytes, path: Path, fix: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}){f'; {fix}' if fix else ''}"
        raise BugmatrixError(msg) from None


def read_text(path: Path, kind: str, *, fix: str = "", seconds: float = READ_SECONDS) -> str:
    """:func:`read_bytes`, decoded as strict UTF-8 (a stray byte is an error naming its offset, never a replacement character)."""
    return _decoded(read_bytes(path, kind, fix=fix, seconds=seconds), path, fix)


def _no_constant(name: str) -> Any:
    msg = f"{name} is not a JSON value"  # json.loads accepts NaN and Infinity
    raise ValueError(msg)


def decode_json(data: bytes, path: Path, kind: str, *, fix: str = "") -> Any:
    """Bytes :func:`read_bytes` returned, as strict UTF-8 JSON; a defect is one line naming the file (and the line and column)."""
    try:
        return json.loads(_decoded(data, path, fix), parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); the {kind} is truncated or corrupt"
    except ValueError as exc:
        msg = f"{path}: not valid JSON ({exc}); the {kind} is corrupt"
    raise BugmatrixError(msg + (f"; {fix}" if fix else ""))


def read_json(path: Path, kind: str, *, fix: str = "", seconds: float = READ_SECONDS) -> Any:
    """:func:`read_bytes`, parsed by :func:`decode_json`: the one way a JSON file from outside is read."""
    return decode_json(read_bytes(path, kind, fix=fix, seconds=seconds), path, kind, fix=fix)


def digest_of(data: bytes) -> str:
    """``sha256:<hex>``: how an input key, the re-resolve lane and the history name a file's content."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers only ever see the old or the new complete file."""
    tmp = _write_temporary(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomic JSON (sorted keys, stable diffs)."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _write_temporary(path: Path, content: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from a web server or a CI artifact reader
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_files(contents: Mapping[Path, str | bytes], *, remove: Iterable[Path] = ()) -> None:
    """Write every file, or none: all temporaries first (a full disk fails there: :class:`OutputError`), then every rename
    (which needs no space), then ``remove`` (files, or directories whole)."""
    written: list[tuple[str, Path]] = []
    current = None
    try:
        for current, content in contents.items():
            written.append((_write_temporary(current, content), current))
    except BaseException as exc:
        for tmp, _ in written:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            msg = f"cannot write {current} ({exc.strerror or exc}); nothing was replaced: every previous output is as it was"
            raise OutputError(msg) from exc
        raise
    for tmp, path in written:
        os.replace(tmp, path)
    for path in remove:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def check_writable_dir(path: Path, option: str, *, shown: Path | None = None) -> None:
    """Refuse, in one line, a directory that cannot be created or written into (a read-only mount, ``/proc``, a file above it)."""
    shown, existing = shown or path, path
    while not existing.exists() and existing != existing.parent:  # the nearest directory that exists, to be created under
        existing = existing.parent
    if not existing.is_dir():
        msg = f"{option} {shown}: {existing} is a file, not a directory; pass a path under a directory"
        raise BugmatrixError(msg)
    # Tried, not asked: access() answers for the permission bits only, and a read-only mount says so only on a write.
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".bugmatrix-probe-"):
            pass
    except OSError as exc:
        msg = f"{option} {shown}: cannot write into {existing} ({exc.strerror or exc}); pass a path you can write to"
        raise BugmatrixError(msg) from None


def _check_not_inside(path: Path, option: str, forbidden: Iterable[Path]) -> None:
    for directory in forbidden:
        if directory.resolve() in (path.resolve(), *path.resolve().parents):
            msg = f"{option} {path}: inside {directory}, which only holds the catalogue; pass a path outside it (e.g. under build/)"
            raise BugmatrixError(msg)


def check_output_file(path: Path, option: str, *, create_parent: bool = True, forbidden: Iterable[Path] = ()) -> None:
    """Refuse, in one line naming the option and the path, a directory, a path under a file or inside ``forbidden`` (the
    cases), an unwritable directory, and (``create_parent`` False) a parent directory that does not exist."""
    if path.is_dir():
        msg = f"{option} {path}: is a directory; pass a file path, e.g. {path / 'out.json'}"
        raise BugmatrixError(msg)
    _check_not_inside(path, option, forbidden)
    if not create_parent and not path.parent.is_dir():
        msg = f"{option} {path}: no such directory {path.parent}; create it first or pass a path in an existing directory"
        raise BugmatrixError(msg)
    check_writable_dir(path.parent, option, shown=path)


def check_output_dir(
    path: Path, option: str, *, manifest: str | None = None, forbidden: Iterable[Path] = (), force: bool = False, example: str = "build/out"
) -> None:
    """Refuse an output directory that is a file, lies inside ``forbidden``, or (unless ``force``) holds files not in its ``manifest``."""
    if path.exists() and not path.is_dir():
        msg = f"{option} {path}: is a file, not a directory; pass a directory (e.g. {example})"
        raise BugmatrixError(msg)
    _check_not_inside(path, option, forbidden)
    if path.is_dir() and not force:
        listed = path / manifest if manifest else None
        ours = set(read_text(listed, "manifest").split()) | {manifest} if listed is not None and listed.is_file() else set()
        foreign = sorted(p.name for p in path.iterdir() if p.name not in ours)
        if foreign:
            msg = f"{option} {path}: holds {foreign[0]}, which this command did not write; choose an empty directory or pass --force"
            raise BugmatrixError(msg)
    check_writable_dir(path, option)


@contextlib.contextmanager
def locked_directories(directories: Iterable[Path], on_wait: Callable[[Path], None] | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on each directory (created if needed) for the block; a second process waits (after
    ``on_wait(directory)``). Locked in one order, so no deadlock."""
    held: list[int] = []
    try:
        for directory in sorted({d.resolve() for d in directories}):
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory, os.O_RDONLY)
            held.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait(directory)
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in held:
            os.close(fd)  # closing the descriptor releases its lock


def file_digest(path: Path) -> str:
    """:func:`digest_of` a file's bytes, read as any file from outside is."""
    return digest_of(read_bytes(path, "hashed file"))
