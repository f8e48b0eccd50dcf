"""Build one cell's environment with uv, or say exactly why it cannot be built.

The environment itself is created by nox's uv backend; this module installs
the cell's requirements into it with ``uv pip install`` (captured, so the
resolver's reason can be recorded as ``install-failed``), checks that the
packages import, and stamps the venv so an unchanged cell is reused without
even asking the resolver again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bugmatrix.runfile import RunRecord, write_json_atomic

__all__ = ["InstallFailed", "cell_venv", "prepare_environment", "record_install_failure", "uv_command"]

STAMP = ".bugmatrix-requirements"
REASON_LINES = 12  # the resolver's explanation is at the end of its output

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
    """The venv nox gives ``cell(<id>)``: ``.nox/cell-<id, non-alphanumerics as '-'>``.

    Bisect, stability and benchmark reuse these venvs, so the slug lives in one place.
    """
    return root / ".nox" / ("cell-" + re.sub(r"[^A-Za-z0-9]+", "-", cell_id).strip("-").lower())


def uv_command() -> list[str]:
    """uv on PATH, else the one installed beside this interpreter (``pip install uv``)."""
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-REASON_LINES:])


def prepare_environment(venv: Path, requirements: Sequence[str], modules: Sequence[str]) -> bool:
    """Install ``requirements`` into ``venv`` unless its stamp says they are there.

    ``modules`` must all import afterwards (see ``plan.import_modules``).
    Returns True when something was installed, False when the venv was reused.
    Raises InstallFailed with the resolver's or the importer's reason.
    """
    python = venv / "bin" / "python"
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    stamp = venv / STAMP
    if stamp.exists() and stamp.read_text().strip() == digest:
        return False
    install = subprocess.run(
        [*uv_command(), "pip", "install", "--python", str(python), *requirements],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if install.returncode != 0:
        raise InstallFailed(_tail(install.stderr or install.stdout) or f"uv exited {install.returncode}")
    imported = subprocess.run([str(python), "-c", IMPORT_CHECK, *modules], capture_output=True, text=True, check=False)
    if imported.returncode != 0:
        raise InstallFailed("installed, but does not import: " + _tail(imported.stderr))
    stamp.write_text(digest + "\n")
    return True


def record_install_failure(path: Path, cell: str, pins: Mapping[str, str], reason: str) -> None:
    """Write the run file of a cell that could not be built (no results, the reason kept)."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    run = RunRecord(
        cell=cell,
        pins=dict(pins),
        environment={},
        started=stamp,
        finished=stamp,
        install={"status": "failed", "reason": reason},
    )
    write_json_atomic(path, run.to_json())
