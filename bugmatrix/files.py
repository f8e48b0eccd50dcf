"""Files written so that a reader only ever sees the old or the new whole file.

Every output of the harness (run files, reports, locks, the history, the
plan) goes through here: a temporary file in the same directory, flushed and
fsynced, then moved into place with ``os.replace``. Imported inside cells too
(the run file), so it needs nothing beyond the standard library.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_json_atomic", "write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers only ever see the old or the new complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from a web server or a CI artifact reader
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomic JSON (sorted keys, stable diffs)."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
