"""The cases as the host sees them (the same Variant objects pytest runs, read once), checked against the matrix's axes."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.cell.case import Case, Variant
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.loader import case_files, load_case
from bugmatrix.plan.matrix import Matrix
from bugmatrix.plan.slices import Slice, case_slice, source_of

__all__ = ["Catalog", "load_catalog"]


@dataclass(frozen=True)
class Catalog:
    """Every case and variant of a case directory."""

    cases: tuple[Case, ...]
    directory: Path | None = None  # where the case files are: errors name them

    @property
    def variants(self) -> tuple[Variant, ...]:
        return tuple(v for case in self.cases for v in case.variants)

    def slices(self, matrix: Matrix) -> list[Slice]:
        """Each case's slice (:mod:`bugmatrix.plan.slices`): the axes it crosses, its narrowing, its variants and where they run."""
        return [case_slice(matrix, case, source_of(self.directory, case)) for case in self.cases]

    def own_versions(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """Every case's own releases (``Case(versions=...)``) as (its file, axis, versions): what the registry check reads."""
        return [(source_of(self.directory, case), axis, listed) for case in self.cases for axis, listed in case.versions.items()]

    def find(self, variant_id: str) -> Variant:
        """A variant by id, with close matches named when there is none."""
        if found := next((v for v in self.variants if v.id == variant_id), None):
            return found
        close = difflib.get_close_matches(variant_id, [v.id for v in self.variants], n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "list them with: python -m bugmatrix plan --variants"
        msg = f"unknown variant {variant_id!r}; {hint}"
        raise BugmatrixError(msg)


def load_catalog(cases_dir: Path, matrix: Matrix | None = None) -> Catalog:
    """Import the cases once (the matrix's axis modules deferred); every axis a variant spans or requires must be the matrix's."""
    axes = [] if matrix is None else [module for axis in matrix.package_axes for module in matrix.axes[axis].distributions.values()]
    defer = frozenset(m.partition(".")[0] for m in axes)
    catalog = Catalog(tuple(load_case(path, defer) for path in case_files(cases_dir)), cases_dir)
    if matrix is not None:
        for variant in catalog.variants:
            for verb, named in (("spans", variant.axes), ("requires", tuple(variant.requires.versions))):
                unknown = [a for a in named if a not in matrix.package_axes]
                if unknown:
                    msg = (
                        f"{cases_dir / variant.case_id}.py: variant {variant.name!r} {verb} axis {unknown[0]!r}, "
                        f"which {matrix.path} does not declare; add [axes.{unknown[0]}] there or use one of {', '.join(matrix.package_axes)}"
                    )
                    raise BugmatrixError(msg)
        catalog.slices(matrix)  # a case's cross or environment that cannot hold: one line naming its file, now
    return catalog
