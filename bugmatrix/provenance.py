"""Where a result came from: the checkout's commit and the run (a CI run's URL, else this machine). Host side only."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["ci_run", "git_commit", "origin_now"]


def git_commit(root: Path | str) -> str:
    """The checkout's short commit (-dirty if code changed; reports/ are outputs), or "unknown" outside git."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def ci_run(environ: dict[str, str] | None = None) -> str:
    """The run that is executing: a GitHub Actions run's URL (with its attempt), else ``local <host>``."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        attempt = env.get("GITHUB_RUN_ATTEMPT", "1")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}/attempts/{attempt}"
    return f"local {socket.gethostname()}"


def origin_now(root: Path | str, now: dt.datetime | None = None) -> dict[str, Any]:
    """``{"date", "commit", "run"}`` for results observed now, by this checkout, in this run."""
    moment = now or dt.datetime.now(dt.UTC)
    return {"date": moment.isoformat(timespec="seconds"), "commit": git_commit(root), "run": ci_run()}
