"""Do upstream's own reproductions agree with this suite's variants?

An ``upstream`` variant's outcomes should match its ``counterpart``'s in every cell where both ran; an outcome that is
no reading of the bug, declared as such, is named apart.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bugmatrix.cell.outcomes import Kind, Outcome
from bugmatrix.report.model import REUSED, Compat

__all__ = ["DIFFER_SHOWN", "AgreementRow", "agreement", "per_case"]

#: Differing cells named in a sentence; the rest are counted (the per-cell table has them all).
DIFFER_SHOWN = 10


@dataclass(frozen=True)
class AgreementRow:
    """An upstream variant against its counterpart (None, counts 0: never on the same device): shared cells, agreeing, differing."""

    upstream: str
    counterpart: str | None
    agree: int = 0
    total: int = 0
    differ: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()  # compared cells whose results were reused from an earlier run
    apart: tuple[str, ...] = ()  # either failed another way, as declared: no reading, no disagreement

    @property
    def text(self) -> str:
        """``agrees in 17/19 cells; differs in: a, b``."""
        if self.counterpart is None:
            return "its counterpart is not in this report on the same device: nothing to compare"
        reused = f"{REUSED} {_cells(self.reused)} reused from an earlier run (see Reused)" if self.reused else ""
        why = "where one of them fails another way, as declared (no evidence for or against the bug)"
        apart = f"not compared in {len(self.apart)} cell(s) {why}: {_cells(self.apart)}" if self.apart else ""
        count = f"agrees in {self.agree}/{self.total} cells" if self.total else ""
        differ = f"differs in: {_cells(self.differ)}" if self.differ else ""
        return "; ".join(p for p in (count, differ, apart, reused) if p)

    @property
    def agrees(self) -> bool:
        """No compared cell differs (a cell where either failed another way is not compared)."""
        return not self.differ and (self.total > 0 or bool(self.apart))

    @property
    def mark(self) -> str:
        """✓ agrees, ≠ differs somewhere, – nothing compared (each failed another way where they met)."""
        return "≠" if not self.agrees else "✓" if self.total else "–"


#: The outcomes that read the bug.
READINGS = frozenset({Outcome.REPRODUCED, Outcome.FIXED})


def agreement(compat: Compat) -> list[AgreementRow]:
    """One row per upstream variant with a counterpart, in the document's variant order (``differ`` in its cell order)."""
    by_name = {(v.case, v.name, v.device): v.id for v in compat.variants}
    order = [c.id for c in compat.cells]  # differing cells in plan (release) order, not string order
    rows: list[AgreementRow] = []
    for variant in compat.variants:
        if variant.kind is not Kind.UPSTREAM or not variant.counterpart:
            continue
        other = by_name.get((variant.case, variant.counterpart, variant.device))
        if other is None:
            rows.append(AgreementRow(variant.id, None))
            continue
        mine, theirs = compat.entries(variant.id), compat.entries(other)
        shared = set(mine) & set(theirs)
        compared, differ, apart = [], [], []
        for cell in [c for c in order if c in shared] + sorted(shared.difference(order)):
            pair = (mine[cell], theirs[cell])
            if not all(e.outcome.ran for e in pair):
                continue
            if any(e.outcome not in READINGS and e.as_declared for e in pair):  # either is no reading of the bug, as declared
                apart.append(cell)
                continue
            compared.append(cell)
            if pair[0].outcome is not pair[1].outcome:
                differ.append(cell)
        reused = tuple(c for c in compared if c in compat.reused_origins)
        rows.append(AgreementRow(variant.id, other, len(compared) - len(differ), len(compared), tuple(differ), reused, tuple(apart)))
    return rows


def _cells(cells: tuple[str, ...]) -> str:
    """``a, b`` (the first :data:`DIFFER_SHOWN`, the rest counted)."""
    more = f" +{len(cells) - DIFFER_SHOWN} more" if len(cells) > DIFFER_SHOWN else ""
    return ", ".join(cells[:DIFFER_SHOWN]) + more


def per_case(compat: Compat) -> dict[str, tuple[list[AgreementRow], list[str]]]:
    """Per case: its rows by short names, and the upstream variants never compared (named once, not as "0/0 cells" lines)."""
    cases: dict[str, tuple[list[AgreementRow], list[str]]] = {}
    by_id = compat.variant_by_id
    for row in agreement(compat):
        lines, idle = cases.setdefault(by_id[row.upstream].case, ([], []))
        if row.counterpart is not None and row.total == 0 and not row.apart:
            idle.append(by_id[row.upstream].short)
            continue
        lines.append(replace(row, upstream=by_id[row.upstream].short, counterpart=row.counterpart and by_id[row.counterpart].short))
    return cases
