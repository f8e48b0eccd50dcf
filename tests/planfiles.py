"""A plan document of exactly the cells a test's run files hold.

``report --profile P`` without ``--plan`` holds a night against P's plan as
matrix.toml makes it today; a test whose run files are fixtures of other cells
passes this plan instead, so its expectation is its own cells and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

from bugmatrix.documents.plan import PLAN_SCHEMA
from bugmatrix.files import write_json_atomic


def plan_of_runs(reports: Path, profile: str = "smoke", out: Path | None = None) -> str:
    """Write ``out`` (default ``<reports>/../plan-<profile>.json``) listing each of ``<reports>/runs``' cells, pins and
    variants; return its path."""
    cells = []
    for path in sorted((reports / "runs").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        variants = data.get("selected") or [r["id"] for r in data.get("results") or ()]
        cells.append({"id": data["cell"], "pins": data["pins"], "variants": variants})
    out = out or reports.parent / f"plan-{profile}.json"
    write_json_atomic(out, {"schema": PLAN_SCHEMA, "profile": profile, "cells": cells})
    return str(out)
