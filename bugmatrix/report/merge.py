"""Merge run files into one compat document (schema ``bugmatrix.compat/1``).

The document is the single input of every renderer and of the baseline diff,
so it is also what ``reports/baseline.json`` holds::

    {
      "schema": "bugmatrix.compat/2",
      "generated": ISO-8601, "commit": "abc1234-dirty", "profile": "smoke",
      "environments": [{"platform", "gpu", "cuda": [...], "python": [...], "cells": [...]}],
      "axes": [{"name", "prefix"}],        # display order (from the plan, else the run files)
      "cells": [{"id", "pins" (as requested), "environment" (as observed),
                 "install": {"status", "reason"}, "started", "finished", "duration_s",
                 "complete", "deselected_by"}],
      "stale": [variant ids recorded by a run but not planned (a renamed or removed variant)],
      "variants": [{"id", "case", "variant", "device", "kind", "workaround_for", "evidence"}],
      "results": {variant id: {cell id: {"outcome", "verdict", "expected", "message",
                                         "log", "duration_s", "workarounds": [...]}}}
    }

``workarounds`` names, for a reproduced entry, the workaround variants of the
same case and device that are ``fixed`` in that very cell: what a maintainer
wants next to a red box. A cell whose install failed ran nothing, so every
known variant gets an ``install-failed`` entry carrying the install reason;
the table then says why the column is empty instead of showing holes.

Given the plan, every planned (variant, cell) pair that no run recorded is an
entry with outcome ``missing`` saying why (no run file; the run stopped after
n of m), except variants the run's own ``-k``/``-m`` deselected on purpose.
A run whose pins disagree with the plan's for its cell is refused.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.errors import BugmatrixError

__all__ = ["COMPAT_SCHEMA", "load_compat", "merge_runs", "version_order"]

COMPAT_SCHEMA = "bugmatrix.compat/2"
OLD_COMPAT_SCHEMAS = ("bugmatrix.compat/1",)
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
        "complete": run.complete,
        "deselected_by": run.deselected_by,
        "tracked": dict(run.tracked),
    }


def _tracking(runs: list[RunRecord], plan: dict[str, Any] | None) -> dict[str, Any]:
    """What ``latest`` meant for this report: the plan's resolution when given, else what the run files recorded.

    ``{"axes": {axis: {"requested": "latest", "resolved": "2.15.0"}}, "resolved_at": ..., "stale": bool}``;
    empty axes when nothing tracked a release.
    """
    resolution = (plan or {}).get("resolution") or {}
    if resolution.get("axes"):
        return {"axes": dict(resolution["axes"]), "resolved_at": resolution.get("resolved_at"), "stale": bool(resolution.get("stale"))}
    axes: dict[str, dict[str, str]] = {}
    for run in runs:
        for axis, tracked in run.tracked.items():
            axes.setdefault(axis, dict(tracked))
    return {"axes": axes, "resolved_at": None, "stale": False}


def tracking_text(compat: dict[str, Any]) -> str:
    """``torch latest = 2.15.0 · lightning latest = 2.6.6`` (+ when, and a warning if it was a saved answer); "" if none."""
    tracking = compat.get("tracking") or {}
    tracked = tracking.get("axes") or {}
    order = [a["name"] for a in compat.get("axes", [])]
    axes = sorted(tracked, key=lambda a: order.index(a) if a in order else len(order))
    parts = [f"{axis} {tracked[axis]['requested']} = {tracked[axis]['resolved']}" for axis in axes]
    if not parts:
        return ""
    when = f" (resolved {tracking['resolved_at']})" if tracking.get("resolved_at") else ""
    stale = "; registry unreachable: the last saved resolution" if tracking.get("stale") else ""
    return " · ".join(parts) + when + stale


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


def _plain(value: Any) -> Any:
    """An enum member's value (the string JSON holds anyway); anything else as it is."""
    return getattr(value, "value", value)


def _entry(record: VariantRecord) -> dict[str, Any]:
    """One result as plain data (enum values as their strings: the document is JSON, and renderers format them ~10^5 times)."""
    return {
        "outcome": _plain(record.outcome),
        "verdict": _plain(record.verdict),
        "expected": _plain(record.expected),
        "message": record.message,
        "log": record.log[-LOG_LIMIT:],
        "leaked": list(record.leaked),
        "duration_s": record.duration_s,
        "workarounds": [],
    }


def _parse_id(variant_id: str) -> dict[str, Any]:
    """What a variant id alone says (``case::name[tag]``), for a planned variant no run recorded."""
    parsed = VariantId.parse(variant_id)
    return {"id": variant_id, "case": parsed.case, "variant": parsed.name, "device": parsed.device, "kind": None,
            "workaround_for": None, "counterpart": None, "evidence": ""}  # fmt: skip


def _check_against_plan(runs: list[RunRecord], plan: dict[str, Any]) -> None:
    planned = {c["id"]: c for c in plan["cells"]}
    for run in runs:
        cell = planned.get(run.cell)
        if cell is not None and {k: str(v) for k, v in cell["pins"].items()} != run.pins:
            msg = f"run file of {run.cell}: pins {run.pins} differ from the plan's {cell['pins']}; re-run the cell with this plan"
            raise BugmatrixError(msg)


def _missing(runs: list[RunRecord], plan: dict[str, Any], results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Add a ``missing`` entry for each planned result no run holds; returns the variant ids involved."""
    by_cell = {run.cell: run for run in runs}
    involved = []
    for cell in plan["cells"]:
        run = by_cell.get(cell["id"])
        if run is not None and run.install.get("status") == "failed":
            continue  # install-failed entries already stand for every variant
        for variant_id in cell["variants"]:
            if cell["id"] in results.get(variant_id, {}):
                continue
            if run is not None and run.deselected_by and variant_id not in run.selected:
                continue  # the user narrowed this run on purpose (-k/-m); the run file says so
            if run is None:
                why = "no run file for this cell: its job did not run, or its run file was lost"
            else:
                why = f"the run recorded {len(run.results)} of {len(cell['variants'])} planned variants" + (
                    "" if run.complete else " and never completed (killed or crashed mid-run)"
                )
            results.setdefault(variant_id, {})[cell["id"]] = {
                "outcome": Outcome.MISSING.value, "verdict": Verdict.NOT_RUN.value, "expected": None, "message": why,
                "log": "", "duration_s": 0.0, "workarounds": [], "leaked": [],
            }  # fmt: skip
            involved.append(variant_id)
    return involved


def _axes(runs: list[RunRecord], plan: dict[str, Any] | None) -> list[dict[str, str]]:
    """Axis names, order and short names: the plan's; else read back from the cell ids, which are built from them.

    ``py311-torch2.5.1-pl2.0.3`` says the order (python, torch, lightning) and
    the prefixes (py, torch, pl) of its pins, so no table of axes is needed here.
    """
    if plan is not None:
        return list(plan["axes"])
    found: dict[str, tuple[int, str]] = {}
    for run in runs:
        parts = run.cell.split("-")
        for axis, version in run.pins.items():
            for position, part in enumerate(parts):
                for text in (version, version.replace(".", "")):
                    if part.endswith(text) and len(part) > len(text):
                        found.setdefault(axis, (position, part[: -len(text)]))
                        break
                else:
                    continue
                break
            found.setdefault(axis, (len(parts), axis))
    return [{"name": a, "prefix": prefix} for a, (_, prefix) in sorted(found.items(), key=lambda item: (item[1][0], item[0]))]


def merge_runs(runs: list[RunRecord], *, profile: str, commit: str, generated: str, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """One compat document from many run files; cells in the plan's order, else in the order given."""
    seen: set[str] = set()
    for run in runs:
        if run.cell in seen:
            # Two files claiming one cell would silently overwrite each other's results.
            msg = f"cell {run.cell!r} appears in two run files; delete the stale one from the runs directory and re-run the report"
            raise BugmatrixError(msg)
        seen.add(run.cell)
    if plan is not None:
        _check_against_plan(runs, plan)
        order = {"system": -1} | {c["id"]: i for i, c in enumerate(plan["cells"])}
        runs = sorted(runs, key=lambda r: (order.get(r.cell, len(order)), r.cell))

    variants: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for record in run.results:
            known = variants.setdefault(record.id, {
                "id": record.id, "case": record.case, "variant": record.variant, "device": record.device,
                "kind": record.kind, "workaround_for": record.workaround_for, "counterpart": record.counterpart,
                "evidence": record.evidence,
            })  # fmt: skip
            if not known["kind"] and record.kind:  # a crashed record knows no kind; another cell does
                known.update(kind=record.kind, workaround_for=record.workaround_for, evidence=record.evidence)
            results.setdefault(record.id, {})[run.cell] = _entry(record)
    for run in runs:
        if run.install.get("status") == "failed":
            reason = run.install.get("reason", "")
            planned = next((c["variants"] for c in (plan or {}).get("cells", []) if c["id"] == run.cell), variants)
            for variant_id in planned:
                variants.setdefault(variant_id, _parse_id(variant_id))
                results.setdefault(variant_id, {})[run.cell] = {
                    "outcome": Outcome.INSTALL_FAILED.value, "verdict": Verdict.NOT_RUN.value, "expected": None,
                    "message": reason, "log": "", "duration_s": 0.0, "workarounds": [], "leaked": [],
                }  # fmt: skip
    stale: list[str] = []
    cells = [_cell(run) for run in runs]
    if plan is not None:
        for variant_id in _missing(runs, plan, results):
            variants.setdefault(variant_id, _parse_id(variant_id))
        planned_ids = {v for c in plan["cells"] for v in c["variants"]}
        stale = sorted(v for v in variants if v not in planned_ids and any(c != "system" for c in results.get(v, {})))
        ran = {run.cell for run in runs}
        cells += [_unrun_cell(c) for c in plan["cells"] if c["id"] not in ran]
    ordered = sorted(variants.values(), key=lambda v: (v["case"], Kind(v["kind"]).order if v["kind"] else 9, v["variant"], v["device"]))
    _attach_workarounds(ordered, results)
    return {
        "schema": COMPAT_SCHEMA,
        "generated": generated,
        "commit": commit,
        "profile": profile,
        "axes": _axes(runs, plan),
        "environments": _environments(runs),
        "tracking": _tracking(runs, plan),
        "cells": cells,
        "variants": ordered,
        "results": results,
        "stale": stale,
    }


def _unrun_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """A planned cell without a run file: a column that says so."""
    return {
        "id": cell["id"], "pins": dict(cell["pins"]), "environment": {}, "install": {"status": "missing", "reason": "no run file"},
        "started": "", "finished": "", "duration_s": None, "complete": False, "deselected_by": "",
    }  # fmt: skip


def version_order(run: RunRecord) -> tuple:
    """Sort key without a plan: the system cell first, then by the pins' versions (2.5.1 before 2.10.0)."""
    from packaging.version import InvalidVersion, Version

    key = []
    for axis in run.axes or sorted(run.pins):
        try:
            key.append(Version(run.pins.get(axis, "0")))
        except InvalidVersion:
            key.append(Version("0"))
    return (run.cell != "system", tuple(key), run.cell)


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
            if entry["outcome"] == Outcome.REPRODUCED:
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
    if not isinstance(data, dict) or data.get("schema") not in (COMPAT_SCHEMA, *OLD_COMPAT_SCHEMAS):
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
