"""An interpreter holding only what the README installs (``pip install nox uv``), to run nox from as a new user would.

The tests' own venv has jinja2, pytest, PyYAML and the whole stack: a session that
imports any of them in nox's interpreter passes there and fails on a fresh
runner (issue 42: the nightly's first job died on ``import jinja2``). Tests that
prove a session works for users run nox from this venv instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["bare_env", "make_bare_nox"]


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        msg = "uv is not installed beside this interpreter (the tests session installs it)"
        raise RuntimeError(msg)
    return found


def make_bare_nox(where: Path) -> Path:
    """A venv at ``where`` with nox and uv from PyPI and nothing else (uv's cache makes it a second or two)."""
    uv = _uv()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"  # the interpreter the workflow's setup-python gives nox
    subprocess.run([uv, "venv", "-q", "--python", python, str(where)], check=True, timeout=120)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(where / "bin" / "python"), "nox", "uv"], check=True, timeout=600)
    return where


def bare_env(venv: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``venv`` first on PATH and the tests' venv (with everything in it) off it."""
    ours = str(Path(sys.prefix) / "bin")
    path = [str(venv / "bin"), *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours)]
    # NOX_SCRIPT_MODE=none is what a script-mode nox sets for the nox it re-executes (the one running the tests session):
    # a fresh runner has no such variable, and with it the noxfile would be loaded without its script dependencies.
    dropped = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "NOX_SCRIPT_MODE", "NOX_OUTER_PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "PATH": os.pathsep.join(path), **extra}
