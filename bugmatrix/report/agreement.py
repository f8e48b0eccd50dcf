"""Do upstream's own reproductions agree with this suite's variants?

An ``upstream`` variant runs an upstream issue's snippet or a fixing PR's
regression test, adapted to a tiny CPU/CUDA program; it names the case's own
variant it should agree with (its ``counterpart``). Curated bug databases take
ground truth from the fixing commit's own test; this is the check that the
suite's reading of its citations holds: in every cell where both ran, the two
outcomes should be the same. A cell where they differ is either a finding
(written into the case docstring) or a wrong citation (fixed there).

Pure: reads the compat document (``bugmatrix.compat/1``, see ``merge.py``),
returns plain data for the renderers.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOT_RUN", "agreement"]

#: Outcomes that say the variant did not run in that cell, so there is nothing to compare.
NOT_RUN = frozenset({"skipped", "install-failed"})


def _ran(entry: dict[str, Any] | None) -> str | None:
    """The outcome of an entry that actually ran, else None."""
    if not entry:
        return None
    outcome = entry.get("outcome")
    return None if outcome is None or outcome in NOT_RUN else str(outcome)


def agreement(compat: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per upstream variant with a counterpart: how many shared cells agree, and which differ.

    A row is ``{"upstream": id, "counterpart": id, "agree": n, "total": m,
    "differ": [cell ids]}``; ``counterpart`` is None (and the counts 0) when
    the named variant never appeared on the same device, which is itself
    worth showing. Rows keep the document's variant order; ``differ`` is sorted.
    """
    variants = compat.get("variants", [])
    results = compat.get("results", {})
    by_name = {(v["case"], v["variant"], v["device"]): v["id"] for v in variants}
    rows: list[dict[str, Any]] = []
    for variant in variants:
        if variant.get("kind") != "upstream" or not variant.get("counterpart"):
            continue
        other = by_name.get((variant["case"], variant["counterpart"], variant["device"]))
        row: dict[str, Any] = {"upstream": variant["id"], "counterpart": other, "agree": 0, "total": 0, "differ": []}
        if other is not None:
            mine, theirs = results.get(variant["id"], {}), results.get(other, {})
            for cell in sorted(set(mine) & set(theirs)):
                a, b = _ran(mine[cell]), _ran(theirs[cell])
                if a is None or b is None:
                    continue
                row["total"] += 1
                if a == b:
                    row["agree"] += 1
                else:
                    row["differ"].append(cell)
        rows.append(row)
    return rows
