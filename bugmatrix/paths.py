"""Where things are: the checkout, the local output directory, the committed reference.

One place resolves them, so no module hard-codes ``reports/``. A local run
(the README's main job, a bisect, a stability run) writes under ``build/``,
which git ignores, so running the suite never dirties the checkout; the
committed reference table in ``reports/`` changes only through the explicit
``report --publish`` step. ``BUGMATRIX_REPORTS`` moves the output directory
(CI and the tests point it elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REFERENCE", "ROOT", "output_dir"]

ROOT = Path(__file__).resolve().parent.parent
#: The committed reference: compat.json/md, index.html, baseline.json, runs/, bisect/ results.
REFERENCE = ROOT / "reports"


def output_dir() -> Path:
    """Where run files and reports of this run go: ``$BUGMATRIX_REPORTS``, else ``build/reports``."""
    return Path(os.environ.get("BUGMATRIX_REPORTS") or ROOT / "build" / "reports")
