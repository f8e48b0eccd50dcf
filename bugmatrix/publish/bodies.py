"""The night's issue bodies as files: one ``<stem>.md`` per finding, its repro files in ``<stem>/`` beside it.

``report --issue-bodies DIR`` writes them with the report's other outputs; ``issues`` reads them back. A directory
holding anything else is refused, never emptied. A variant's finding gets :func:`~bugmatrix.tools.repro.export_repro` in
its first cell; a cell's finding its requirements, lock and command; when the cases cannot be loaded, the body says why.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import check_output_dir, read_text
from bugmatrix.paths import ROOT
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.matrix import Matrix
from bugmatrix.publish.issue_body import INLINE, Attachment, Links, render_issue
from bugmatrix.publish.markers import MARKER, Marker, State, file_stem, parse_markers
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.report.model import Compat
from bugmatrix.report.night import Finding, NightReport
from bugmatrix.report.outputs import Files, Night, Output
from bugmatrix.run.lock import lock_for
from bugmatrix.tools.repro import LOCKED, export_repro

__all__ = ["Body", "ReproExporter", "body_files", "check_bodies_dir", "issue_bodies_output", "read_bodies"]


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
            command, note = f'nox -s repro -- "{finding.subject}" --cell {cell.id}', ""
            run = "venv/bin/python repro.py   # prints OUTCOME: ... last"
        else:
            (out / "requirements.txt").write_text("\n".join(matrix.requirements_for(cell.pins, harness=False)) + "\n", encoding="utf-8")
            lock, why_not = lock_for(ROOT, cell.id, matrix.requirements_for(cell.pins), python)
            if lock is not None and finding.release is None:
                shutil.copyfile(lock, out / LOCKED)
            note = "" if lock is not None or finding.release is not None else f"no lock of cell {cell.id} ({why_not})"
            command, run = "", f'nox -s "cell({cell.id})"   # the whole cell, as the nightly runs it'
        inline = {name: (out / name).read_text(encoding="utf-8") for name in INLINE if (out / name).is_file()}
        return Attachment(out.name, inline, (out / LOCKED).exists(), python, command, run, note)


@dataclass(frozen=True)
class Body:
    """One finding's issue, as written: its file, its text (the marker first) and that marker."""

    path: Path
    text: str
    marker: Marker


def _ours(directory: Path, entry: Path) -> bool:
    if entry.is_file() and entry.suffix == ".md":
        try:
            return read_text(entry, "issue body").startswith(f"<!-- {MARKER} ")
        except BugmatrixError:  # not UTF-8, a FIFO, too large: not a body this command wrote
            return False
    return entry.is_dir() and (directory / f"{entry.name}.md").is_file()


def check_bodies_dir(directory: Path, option: str = "--issue-bodies") -> None:
    """Refuse, in one line, a path that is a file or a directory holding anything but issue bodies and their attachments."""
    foreign = sorted(entry.name for entry in directory.iterdir() if not _ours(directory, entry)) if directory.is_dir() else []
    if foreign:
        msg = f"{option} {directory}: holds {foreign[0]}, which report --issue-bodies did not write; choose an empty directory"
        raise BugmatrixError(msg)
    check_output_dir(directory, option, force=True, example="build/issues")


def body_files(
    report: NightReport, night: str, links: Links, directory: Path, exporter: ReproExporter | None = None
) -> tuple[dict[Path, str | bytes], list[Path]]:
    """Every file of tonight's bodies (path -> content) and what to remove: last night's findings that are gone."""
    files: dict[Path, str | bytes] = {}
    with tempfile.TemporaryDirectory(prefix="bugmatrix-issues-") as scratch:
        for finding in report.findings():
            stem = file_stem(finding.key)
            exported = Path(scratch) / stem
            attachment = exporter.export(finding, report.compat, exported) if exporter else Attachment(note="not exported")
            _, body = render_issue(finding, report, night, links, attachment)
            files[directory / f"{stem}.md"] = body
            for path in sorted(exported.rglob("*")) if exported.is_dir() else ():
                if path.is_file() and not path.name.startswith("."):  # repro's own manifest is no attachment
                    files[directory / stem / path.relative_to(exported)] = path.read_bytes()
    keep = {p.relative_to(directory).parts[0] for p in files}
    remove: list[Path] = []
    for entry in sorted(directory.iterdir()) if directory.is_dir() else ():
        if entry.name not in keep:
            remove.append(entry)  # a finding that is gone tonight: its body and its attachments
        elif entry.is_dir():
            remove += [p for p in entry.rglob("*") if p.is_file() and p not in files]
    return files, remove


def issue_bodies_output(directory: Path, *, site_url: str, run_url: str, matrix: Path, cases: Path) -> Output:
    """``report --issue-bodies DIR``: one body per finding (+ its repro files), an output the CLI adds to the report's (``extra``)."""

    def render(night: Night) -> Files:
        links = Links.for_site(site_url, night.report.compat.profile, night.date, run_url)
        return body_files(night.report, night.date, links, directory, ReproExporter(matrix, cases, night.options.reports / "runs"))

    def line(night: Night) -> str:
        return f"issues: {len(night.report.findings())} finding(s), one body each -> {directory} (filed by: nox -s issues)"

    return Output("issue-bodies", render, check=lambda options: check_bodies_dir(directory), locks=lambda options: (directory,), line=line)


def read_bodies(directory: Path) -> list[Body]:
    """The bodies a report wrote, each with its opening marker; anything else there is one line."""
    if not directory.is_dir():
        msg = f"--bodies {directory}: no such directory; write it with: nox -s report -- --issue-bodies {directory}"
        raise BugmatrixError(msg)
    bodies = []
    for path in sorted(directory.glob("*.md")):
        text = read_text(path, "issue body", fix="write the bodies again: nox -s report -- --issue-bodies DIR")
        markers = parse_markers(text)
        if not markers or markers[0].state is not State.OPENED or not markers[0].title:
            msg = f"{path}: not an issue body written by report --issue-bodies (no {MARKER} marker first); write it again"
            raise BugmatrixError(msg)
        bodies.append(Body(path, text, markers[0]))
    return bodies
