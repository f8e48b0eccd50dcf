"""What an issue offers to reproduce its finding: the ``repro`` export, written beside the issue body.

A variant's finding gets :func:`bugmatrix.tools.repro.export_repro` in its first cell; a cell's finding its
requirements, lock and command. When the cases cannot be loaded, the attachment says why.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.paths import ROOT
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.report.model import Compat
from bugmatrix.report.night import Finding
from bugmatrix.run.lock import lock_for
from bugmatrix.tools.repro import LOCKED, export_repro

__all__ = ["Attachment", "ReproExporter"]

#: Files an issue body shows inline (when short enough), in this order; the lock is always a link.
INLINE = ("requirements.txt", "repro.py")


@dataclass(frozen=True)
class Attachment:
    """Files written for one finding (``directory`` under the bodies' directory) and how to use them."""

    directory: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # name -> text, for the files a body may inline
    locked: bool = False  # requirements.lock.txt is among the files written
    python: str = ""
    command: str = ""  # the export command that wrote them, to run again by hand
    run: str = ""  # what runs the reproduction once installed
    note: str = ""  # why something is absent


class ReproExporter:
    """Exports attachments for a night's findings; the matrix and cases are loaded on first use, once."""

    def __init__(self, matrix: Path, cases: Path, run_dir: Path) -> None:
        self.matrix_path, self.cases_path, self.run_dir = matrix, cases, run_dir

    @cached_property
    def _loaded(self) -> tuple[Matrix, Catalog] | str:
        try:
            matrix = load_resolved_matrix(self.matrix_path)
            return matrix, load_catalog(self.cases_path, matrix)
        except BugmatrixError as exc:
            return f"the cases could not be loaded here ({exc})"

    def export(self, finding: Finding, compat: Compat, out: Path) -> Attachment:
        """Write the finding's files into ``out`` (replaced whole) and say what they are."""
        loaded = self._loaded
        if isinstance(loaded, str):
            return Attachment(note=loaded)
        matrix, catalog = loaded
        cell = compat.cell_by_id.get(finding.cells[0]) if finding.cells else None
        if cell is None:
            return Attachment(note="no cell to export from")
        python = cell.pins.get(compat.interpreter or "", "3")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        if finding.of_variant:
            try:
                variant = catalog.find(finding.subject)
            except BugmatrixError as exc:
                return Attachment(note=f"no repro.py: {exc}")
            export_repro(matrix, variant, cell.pins, out, self.run_dir, force=True, fresh=False)
            return Attachment(
                out.name,
                {name: (out / name).read_text(encoding="utf-8") for name in INLINE},
                (out / LOCKED).exists(),
                python,
                f'nox -s repro -- "{finding.subject}" --cell {cell.id}',
                "venv/bin/python repro.py   # prints OUTCOME: ... last",
            )
        requirements = matrix.requirements_for(cell.pins, harness=False)
        (out / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
        lock, why_not = lock_for(ROOT, cell.id, matrix.requirements_for(cell.pins), python)
        if lock is not None and finding.release is None:
            shutil.copyfile(lock, out / LOCKED)
        note = "" if lock is not None or finding.release is not None else f"no lock of cell {cell.id} ({why_not})"
        return Attachment(
            out.name,
            {"requirements.txt": (out / "requirements.txt").read_text(encoding="utf-8")},
            (out / LOCKED).exists(),
            python,
            "",
            f'nox -s "cell({cell.id})"   # the whole cell, as the nightly runs it',
            note,
        )
