"""Do upstream's own reproductions agree with this suite's variants?

An ``upstream`` variant runs an upstream issue's snippet or a fixing PR's
regression test, adapted to a tiny CPU/CUDA program; it names the case's own
variant it should agree with (its ``counterpart``). Curated bug databases take
ground truth from the fixing commit's own test; this is the check that the
suite's reading of its citations holds: in every cell where both ran, the two
outcomes should be the same. A cell where they differ is either a finding
(written into the case docstring) or a wrong citation (fixed there).

Pure: reads the compat document (``bugmatrix.compat/2``, see ``merge.py``),
returns plain data for the renderers; :func:`per_case` words it once for
both (``agrees in 19/19 cells``), so the page and compat.md say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Outcome

__all__ = ["DIFFER_SHOWN", "NOT_RUN", "AgreementLine", "agreement", "per_case", "sentence"]

#: Outcomes that say the variant did not run in that cell (skipped, install-failed, missing): nothing to compare.
NOT_RUN = frozenset(o.value for o in Outcome if not o.ran)
#: Differing cells named in a sentence; the rest are counted (the per-cell table has them all).
DIFFER_SHOWN = 10


def _ran(entry: dict[str, Any] | None) -> str | None:
    """The outcome of an entry that actually ran, else None."""
    if not entry:
        return None
    outcome = entry.get("outcome")
    return None if outcome is None or str(outcome) in NOT_RUN else str(outcome)


def agreement(compat: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per upstream variant with a counterpart: how many shared cells agree, and which differ.

    A row is ``{"upstream": id, "counterpart": id, "agree": n, "total": m,
    "differ": [cell ids]}``; ``counterpart`` is None (and the counts 0) when
    the named variant never appeared on the same device, which is itself
    worth showing. Rows keep the document's variant order; ``differ`` keeps
    the document's cell order (torch 2.2.2 before 2.13.0), sorted for cells it does not list.
    """
    variants = compat.get("variants", [])
    results = compat.get("results", {})
    by_name = {(v["case"], v["variant"], v["device"]): v["id"] for v in variants}
    order = [c["id"] for c in compat.get("cells", [])]  # differing cells in plan (release) order, not string order
    rows: list[dict[str, Any]] = []
    for variant in variants:
        if variant.get("kind") != "upstream" or not variant.get("counterpart"):
            continue
        other = by_name.get((variant["case"], variant["counterpart"], variant["device"]))
        row: dict[str, Any] = {"upstream": variant["id"], "counterpart": other, "agree": 0, "total": 0, "differ": []}
        if other is not None:
            mine, theirs = results.get(variant["id"], {}), results.get(other, {})
            shared = set(mine) & set(theirs)
            for cell in [c for c in order if c in shared] + sorted(shared.difference(order)):
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


def _name(variant_id: str) -> str:
    """``upstream_pr165068_test[cpu]``: the id without its case, which the heading already says."""
    return VariantId.parse(variant_id).short


def sentence(row: dict[str, Any]) -> str:
    """``agrees in 17/19 cells; differs in: a, b`` for one :func:`agreement` row."""
    if row["counterpart"] is None:
        return "its counterpart is not in this report on the same device: nothing to compare"
    if row["agree"] == row["total"]:
        return f"agrees in {row['agree']}/{row['total']} cells"
    shown = ", ".join(row["differ"][:DIFFER_SHOWN])
    more = f" +{len(row['differ']) - DIFFER_SHOWN} more" if len(row["differ"]) > DIFFER_SHOWN else ""
    return f"agrees in {row['agree']}/{row['total']} cells; differs in: {shown}{more}"


@dataclass(frozen=True)
class AgreementLine:
    """One rendered agreement row: which upstream variant, against which of the case's own, and the sentence."""

    upstream: str  # variant name with device, e.g. upstream_pr165068_test[cpu]
    counterpart: str
    text: str  # the whole sentence (compat.md)
    agrees: bool  # every shared cell agrees (and there was at least one)

    @property
    def count(self) -> str:
        """``agrees in 17/19 cells``: the part the page sets in bold."""
        return self.text.partition("; ")[0]

    @property
    def rest(self) -> str:
        """``differs in: a, b`` (empty when it agrees everywhere): the page's plain part."""
        return self.text.partition("; ")[2]


def per_case(compat: dict[str, Any]) -> dict[str, tuple[list[AgreementLine], list[str]]]:
    """Per case: its agreement lines, and the upstream variants never compared (no cell where both ran).

    The second list keeps a CPU-only night from printing one "0/0 cells" line
    per CUDA upstream variant; they are named once instead.
    """
    cases: dict[str, tuple[list[AgreementLine], list[str]]] = {}
    for row in agreement(compat):
        lines, idle = cases.setdefault(VariantId.parse(row["upstream"]).case, ([], []))
        if row["counterpart"] is not None and row["total"] == 0:
            idle.append(_name(row["upstream"]))
            continue
        counterpart = _name(row["counterpart"]) if row["counterpart"] else "—"
        agrees = row["total"] > 0 and row["agree"] == row["total"]
        lines.append(AgreementLine(_name(row["upstream"]), counterpart, sentence(row), agrees))
    return cases
