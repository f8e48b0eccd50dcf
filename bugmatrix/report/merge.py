"""Merge run files into one compat document (schema ``bugmatrix.compat/1``).

The document is the single input of every renderer and of the baseline diff:
cells with their environment *as observed*, the variants, and a
``results[variant][cell]`` grid. For each reproduced entry it names the
workarounds of the same case and device that are ``fixed`` in that very cell,
which is what a maintainer wants next to a red box.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.runfile import RunRecord

__all__ = ["COMPAT_SCHEMA", "load_compat", "merge_runs"]

COMPAT_SCHEMA = "bugmatrix.compat/1"
KIND_ORDER = {"core": 0, "framework": 1, "workaround": 2, "": 3}
LOG_LIMIT = 2000


def _duration(run: RunRecord) -> float | None:
    import datetime as dt

    try:
        return (dt.datetime.fromisoformat(run.finished) - dt.datetime.fromisoformat(run.started)).total_seconds()
    except ValueError:
        return None


def merge_runs(runs: list[RunRecord], *, profile: str, commit: str, generated: str) -> dict[str, Any]:
    """One compat document from many run files (cells sorted as given)."""
    cells = [
        {
            "id": run.cell,
            "pins": dict(run.pins),
            "environment": {k: v for k, v in run.environment.items() if k != "executable"},
            "install": dict(run.install),
            "started": run.started,
            "finished": run.finished,
            "duration_s": _duration(run),
        }
        for run in runs
    ]
    variants: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for record in run.results:
            known = variants.setdefault(record.id, {
                "id": record.id, "case": record.case, "variant": record.variant, "device": record.device,
                "kind": record.kind, "workaround_for": record.workaround_for, "evidence": record.evidence,
            })  # fmt: skip
            if not known["kind"] and record.kind:  # a crashed record knows no kind; another cell does
                known.update(kind=record.kind, workaround_for=record.workaround_for, evidence=record.evidence)
            results.setdefault(record.id, {})[run.cell] = {
                "outcome": record.outcome,
                "verdict": record.verdict,
                "expected": record.expected,
                "message": record.message,
                "log": record.log[-LOG_LIMIT:],
                "duration_s": record.duration_s,
            }
    for run in runs:
        if run.install.get("status") == "failed":
            for variant_id in variants:
                results[variant_id][run.cell] = {
                    "outcome": "install-failed", "verdict": "not-run", "expected": None,
                    "message": run.install.get("reason", ""), "log": "", "duration_s": 0.0,
                }  # fmt: skip
    ordered = sorted(variants.values(), key=lambda v: (v["case"], KIND_ORDER.get(v["kind"], 3), v["variant"], v["device"]))
    _attach_workarounds(ordered, results)
    return {
        "schema": COMPAT_SCHEMA,
        "generated": generated,
        "commit": commit,
        "profile": profile,
        "cells": cells,
        "variants": ordered,
        "results": results,
    }


def _attach_workarounds(variants: list[dict[str, Any]], results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """For each reproduced entry: the workarounds fixed in the same cell."""
    for variant in variants:
        helpers = [
            w
            for w in variants
            if w["workaround_for"] == variant["variant"] and w["case"] == variant["case"] and w["device"] == variant["device"]
        ]
        for cell, entry in results.get(variant["id"], {}).items():
            entry["workarounds"] = [
                w["variant"] for w in helpers if results.get(w["id"], {}).get(cell, {}).get("outcome") == "fixed"
            ] if entry["outcome"] == "reproduced" else []  # fmt: skip


def load_compat(path: Path) -> dict[str, Any]:
    """Read a compat document (the baseline); any defect is one actionable line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        msg = f"{path}: unreadable compat file ({exc}); regenerate it with: nox -s report -- --update-baseline"
        raise BugmatrixError(msg) from exc
    if not isinstance(data, dict) or data.get("schema") != COMPAT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        msg = f"{path}: schema {found!r} is not {COMPAT_SCHEMA!r}; regenerate it with: nox -s report -- --update-baseline"
        raise BugmatrixError(msg)
    return data
