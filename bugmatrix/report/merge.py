"""Merge run files into one compat document (schema ``bugmatrix.compat/1``).

The document is the single input of every renderer and of the baseline diff,
so it is also what ``reports/baseline.json`` holds::

    {
      "schema": "bugmatrix.compat/1",
      "generated": ISO-8601, "commit": "abc1234-dirty", "profile": "smoke",
      "environments": [{"platform", "gpu", "cuda": [...], "python": [...], "cells": [...]}],
      "cells": [{"id", "pins" (as requested), "environment" (as observed),
                 "install": {"status", "reason"}, "started", "finished", "duration_s"}],
      "variants": [{"id", "case", "variant", "device", "kind", "workaround_for", "evidence", "counterpart"}],
      "results": {variant id: {cell id: {"outcome", "verdict", "expected", "message",
                                         "log", "duration_s", "workarounds": [...]}}}
    }

``workarounds`` names, for a reproduced entry, the workaround variants of the
same case and device that are ``fixed`` in that very cell: what a maintainer
wants next to a red box. A cell whose install failed ran nothing, so every
known variant gets an ``install-failed`` entry carrying the install reason;
the table then says why the column is empty instead of showing holes.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from bugmatrix.errors import BugmatrixError
from bugmatrix.runfile import RunRecord, VariantRecord

__all__ = ["COMPAT_SCHEMA", "load_compat", "merge_runs"]

COMPAT_SCHEMA = "bugmatrix.compat/1"
#: Core and framework rows come first: the bug before the ways around it.
KIND_ORDER = {"core": 0, "framework": 1, "workaround": 2, "": 3}
#: The tail of a log is where the error is; 2 kB per entry keeps a 1,000-cell report small.
LOG_LIMIT = 2000
#: Interpreter paths differ per machine and say nothing about compatibility.
PRIVATE_ENVIRONMENT_KEYS = frozenset({"executable"})


def _duration(run: RunRecord) -> float | None:
    """Wall time of the cell, or None when the run file's timestamps cannot say."""
    try:
        return (dt.datetime.fromisoformat(run.finished) - dt.datetime.fromisoformat(run.started)).total_seconds()
    except (TypeError, ValueError):  # empty, malformed, or one naive and one aware timestamp
        return None


def _cell(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.cell,
        "pins": dict(run.pins),
        "environment": {k: v for k, v in run.environment.items() if k not in PRIVATE_ENVIRONMENT_KEYS},
        "install": {"status": run.install.get("status", "ok"), "reason": run.install.get("reason", "")},
        "started": run.started,
        "finished": run.finished,
        "duration_s": _duration(run),
    }


def _environments(runs: list[RunRecord]) -> list[dict[str, Any]]:
    """The machines the cells ran on, for the report header.

    Cells differ by design in torch/lightning/transformers, so those stay per
    cell; what a reader needs up front is *where* it ran: platform and GPU,
    with the CUDA builds and Pythons seen there.
    """
    hosts: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        env = run.environment
        if run.install.get("status") == "failed" and not env:
            continue  # nothing was observed in a cell that never installed
        key = (str(env.get("platform") or "unknown platform"), str(env.get("gpu") or ""))
        host = hosts.setdefault(key, {"platform": key[0], "gpu": env.get("gpu") or None, "cuda": [], "python": [], "cells": []})
        for axis in ("cuda", "python"):
            if env.get(axis) and str(env[axis]) not in host[axis]:
                host[axis].append(str(env[axis]))
        host["cells"].append(run.cell)
    return list(hosts.values())


def _entry(record: VariantRecord) -> dict[str, Any]:
    return {
        "outcome": record.outcome,
        "verdict": record.verdict,
        "expected": record.expected,
        "message": record.message,
        "log": record.log[-LOG_LIMIT:],
        "duration_s": record.duration_s,
        "workarounds": [],
    }


def merge_runs(runs: list[RunRecord], *, profile: str, commit: str, generated: str) -> dict[str, Any]:
    """One compat document from many run files; cells keep the order given (the plan's)."""
    seen: set[str] = set()
    for run in runs:
        if run.cell in seen:
            # Two files claiming one cell would silently overwrite each other's results.
            msg = f"cell {run.cell!r} appears in two run files; delete the stale one from the runs directory and re-run the report"
            raise BugmatrixError(msg)
        seen.add(run.cell)

    variants: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for record in run.results:
            known = variants.setdefault(record.id, {
                "id": record.id, "case": record.case, "variant": record.variant, "device": record.device,
                "kind": record.kind, "workaround_for": record.workaround_for, "evidence": record.evidence,
                "counterpart": record.counterpart,
            })  # fmt: skip
            if not known["kind"] and record.kind:  # a crashed record knows no kind; another cell does
                known.update(
                    kind=record.kind, workaround_for=record.workaround_for, evidence=record.evidence, counterpart=record.counterpart
                )
            results.setdefault(record.id, {})[run.cell] = _entry(record)
    for run in runs:
        if run.install.get("status") == "failed":
            reason = run.install.get("reason", "")
            for variant_id in variants:
                results[variant_id][run.cell] = {
                    "outcome": "install-failed", "verdict": "not-run", "expected": None,
                    "message": reason, "log": "", "duration_s": 0.0, "workarounds": [],
                }  # fmt: skip
    ordered = sorted(variants.values(), key=lambda v: (v["case"], KIND_ORDER.get(v["kind"], 3), v["variant"], v["device"]))
    _attach_workarounds(ordered, results)
    return {
        "schema": COMPAT_SCHEMA,
        "generated": generated,
        "commit": commit,
        "profile": profile,
        "environments": _environments(runs),
        "cells": [_cell(run) for run in runs],
        "variants": ordered,
        "results": results,
    }


def _attach_workarounds(variants: list[dict[str, Any]], results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """For each reproduced entry: the workarounds of its case and device fixed in the same cell."""
    helpers: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for w in variants:
        if w["workaround_for"]:
            helpers.setdefault((w["case"], w["device"], w["workaround_for"]), []).append(w)
    for variant in variants:
        candidates = helpers.get((variant["case"], variant["device"], variant["variant"]), [])
        if not candidates:
            continue
        for cell, entry in results.get(variant["id"], {}).items():
            if entry["outcome"] == "reproduced":
                entry["workarounds"] = [
                    w["variant"] for w in candidates if results.get(w["id"], {}).get(cell, {}).get("outcome") == "fixed"
                ]


def load_compat(path: Path) -> dict[str, Any]:
    """Read a compat document (the baseline); any defect is one actionable line."""
    fix = "regenerate it with: nox -s report -- --update-baseline"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"{path}: unreadable compat file ({exc}); {fix}"
        raise BugmatrixError(msg) from exc
    if not isinstance(data, dict) or data.get("schema") != COMPAT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        msg = f"{path}: schema {found!r} is not {COMPAT_SCHEMA!r}; {fix}"
        raise BugmatrixError(msg)
    # The diff walks these without further checks; a hand-edited file fails here, by name.
    shapes = {"cells": list, "variants": list, "results": dict}
    for key, kind in shapes.items():
        if not isinstance(data.get(key), kind):
            msg = f"{path}: key {key!r} must be a JSON {'array' if kind is list else 'object'}; {fix}"
            raise BugmatrixError(msg)
        if kind is list and not all(isinstance(item, dict) and "id" in item for item in data[key]):
            msg = f"{path}: every item of {key!r} must be an object with an 'id'; {fix}"
            raise BugmatrixError(msg)
    for variant_id, per_cell in data["results"].items():
        if not isinstance(per_cell, dict) or not all(isinstance(e, dict) and "outcome" in e for e in per_cell.values()):
            msg = f"{path}: results[{variant_id!r}] must map cell ids to entries with an 'outcome'; {fix}"
            raise BugmatrixError(msg)
    return data
