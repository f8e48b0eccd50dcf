"""Where things are: the checkout, the local output directory (``build/reports``, or ``$BUGMATRIX_REPORTS``), the committed reference."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REFERENCE", "ROOT", "output_dir", "shown"]

ROOT = Path(__file__).resolve().parent.parent
#: The committed reference: compat.json/md, index.html, baseline.json, runs/, bisect/ results.
REFERENCE = ROOT / "reports"


def output_dir() -> Path:
    """Where run files and reports of this run go: ``$BUGMATRIX_REPORTS``, else ``build/reports``."""
    return Path(os.environ.get("BUGMATRIX_REPORTS") or ROOT / "build" / "reports")


def shown(path: Path, root: Path = ROOT) -> str:
    """``path`` relative to the checkout when inside it, so a committed page names no machine's path."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
