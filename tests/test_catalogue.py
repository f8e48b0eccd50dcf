"""The live catalogue keeps this project's policies: ``python -m bugmatrix check`` (``nox -s check``), run by the tests session.

The one test here that reads what ``cases/`` holds. A failure lists the
command's one-line messages, each naming the case file and what to add; every
other harness test passes for any valid catalogue.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_catalogue_keeps_the_project_policies() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "check"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    gaps = [line for line in run.stdout.splitlines() if line.startswith("bugmatrix: check: ")]
    assert run.returncode == 0 and not gaps, "\n".join([*gaps, run.stderr.strip(), "(see docs/cases.md, How to add a case)"])
