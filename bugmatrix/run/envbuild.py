"""Build one cell's environment with uv, or say exactly why it cannot be built. A venv is built whole beside the target
(``<venv>.new``), stamped with a digest of its inputs and only then swapped in, so a killed build never leaves a
half-installed venv that looks current; a matching stamp is reused as is."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from bugmatrix.cell.environment import SOURCE_BUILDS
from bugmatrix.versions import version_key

__all__ = ["STAMP", "InstallFailed", "cell_venv", "ensure_environment", "find_interpreter", "flocked", "fresh_venv", "run_uv", "uv_command"]

STAMP = ".bugmatrix-requirements"
REASON_LINES = 12  # the resolver's explanation is at the end of its output
BUILT = re.compile(r"^\s*Built (?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)\s*$", re.MULTILINE)
NO_WHEEL = re.compile(r"Because (?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s,]+) has no usable wheels")

IMPORT_CHECK = """
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        sys.exit(f"import {name}: {type(exc).__name__}: {exc}")
"""


class InstallFailed(Exception):
    """The cell's environment could not be built; the message is the reason."""


def cell_venv(root: Path, cell_id: str) -> Path:
    """``.nox/cell-<id, non-alphanumerics as '-'>``: nox's own name for ``cell(<id>)``."""
    return root / ".nox" / ("cell-" + re.sub(r"[^A-Za-z0-9]+", "-", cell_id).strip("-").lower())


def fresh_venv(root: Path, cell_id: str) -> Path:
    """The venv of ``fresh(<id>)`` (tonight's fresh resolution), beside its locked venv."""
    locked = cell_venv(root, cell_id)
    return locked.with_name("fresh-" + locked.name.removeprefix("cell-"))


def uv_command() -> list[str]:
    """uv on PATH, else the one installed beside this interpreter (``pip install uv``)."""
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def run_uv(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``uv <args>``, its output captured as text; the caller reads the exit code."""
    return subprocess.run([*uv_command(), *args], input=input, capture_output=True, text=True, check=False)


def find_interpreter(version: str) -> str:
    """An interpreter for ``version`` ("3.10"): what ``uv python find`` sees, else a pyenv install (uv finds only the
    one pyenv has active); never a download. Raises InstallFailed naming both places."""
    found = run_uv("python", "find", "--no-python-downloads", version)
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.strip().splitlines()[-1]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = sorted(pyenv.glob(f"{version}.*/bin/python{version}"), key=lambda p: version_key(p.parent.parent.name), reverse=True)
    if runnable := [c for c in candidates if os.access(c, os.X_OK)]:
        return str(runnable[0])
    msg = f"no Python {version} interpreter: `uv python find {version}` finds none, nor does {pyenv}/{version}.*; install one or exclude it"
    raise InstallFailed(msg)


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-REASON_LINES:])


def _build(
    target: Path, python: str, requirements: Sequence[str], modules: Sequence[str], lock: Path | None, no_build: bool, absent: Sequence[str]
) -> None:
    made = run_uv("venv", "-q", "--no-python-downloads", "-p", find_interpreter(python), str(target))
    if made.returncode != 0:
        raise InstallFailed(f"uv venv -p {python}: " + (_tail(made.stderr) or f"exit {made.returncode}"))
    interpreter = target / "bin" / "python"
    if lock is None:
        command = ["pip", "install", "--python", str(interpreter), *requirements]
    else:
        command = ["pip", "sync", "--require-hashes", "--python", str(interpreter), str(lock)]
    install = run_uv(*command, *(["--no-build"] if no_build else []))
    if install.returncode != 0:
        where = f"installing {lock.name}: " if lock is not None else ""
        wheel = NO_WHEEL.search(install.stderr + install.stdout)  # uv's refusal to build, said as the missing wheel
        refused = wheel and (
            f"{wheel['name']}=={wheel['version']} has no wheel for Python {python} on this platform and source builds are refused "
            '([harness] source_builds = "refuse" in matrix.toml); pin a release that has one, or allow source builds'
        )
        raise InstallFailed(where + (refused or _tail(install.stderr or install.stdout) or f"uv exited {install.returncode}"))
    # uv says what it built from an sdist (``Built numpy==1.26.4``): kept in the venv, where the cell records it in its run file.
    built = sorted({f"{m['name']}=={m['version']}" for m in BUILT.finditer(install.stderr + install.stdout)})
    if built:
        (target / SOURCE_BUILDS).write_text("".join(f"{line}\n" for line in built), encoding="utf-8")
    if absent:  # after the install, whatever brought them (uv says, and goes on, where one was not installed)
        removed = run_uv("pip", "uninstall", "--python", str(interpreter), *absent)
        if removed.returncode != 0:
            raise InstallFailed(f"removing {', '.join(absent)}: " + (_tail(removed.stderr) or f"uv exited {removed.returncode}"))
    if modules:
        imported = subprocess.run([str(interpreter), "-c", IMPORT_CHECK, *modules], capture_output=True, text=True, check=False)
        if imported.returncode != 0:
            raise InstallFailed("installed, but does not import: " + _tail(imported.stderr))


def ensure_environment(
    venv: Path,
    python: str,
    requirements: Sequence[str],
    modules: Sequence[str],
    *,
    lock: Path | None = None,
    no_build: bool = False,
    absent: Sequence[str] = (),
) -> bool:
    """Reuse ``venv`` if it is current, else build it fresh and swap it in; True when it was built. ``modules`` must import
    (empty: the caller checks); ``absent``: removed after the install. Raises InstallFailed, the old venv left as it was."""
    locked = [f"lock {lock.read_text(encoding='utf-8')}"] if lock is not None else []  # a re-created lock is a new environment
    refused = ["no source builds"] if no_build else []  # only when set: venvs built before the setting keep their stamp
    inputs = [f"python {python}", *requirements, *locked, *refused, *(f"absent {name}" for name in absent)]
    digest = hashlib.sha256("\n".join(inputs).encode()).hexdigest()
    fresh, old = venv.with_name(venv.name + ".new"), venv.with_name(venv.name + ".old")
    with flocked(venv.with_name(f".{venv.name}.lock")):  # one process at a time (two would delete each other's ``.new``)
        # What a killed run left behind, cleared even when ``venv`` is current (a kill during the last rmtree).
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        stamp = venv / STAMP  # the digest, written once the venv was completely built from these inputs
        if (venv / "bin" / "python").exists() and stamp.exists() and stamp.read_text().strip() == digest:
            return False
        try:
            _build(fresh, python, requirements, modules, lock, no_build, absent)
            (fresh / STAMP).write_text(digest + "\n")
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise
        if venv.exists():
            venv.rename(old)
        fresh.rename(venv)  # between the two renames there is no venv: the next run builds one
        shutil.rmtree(old, ignore_errors=True)
        return True


@contextlib.contextmanager
def flocked(path: Path, *, exclusive: bool = True) -> Iterator[None]:
    """A ``flock`` on the file ``path`` (created, with its folder) for the block; shared unless ``exclusive``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:  # closing it releases the lock, also when the process dies
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
