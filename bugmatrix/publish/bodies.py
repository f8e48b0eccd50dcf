"""The night's issue bodies as files: one ``<stem>.md`` per finding, its repro files in ``<stem>/`` beside it.

``report --issue-bodies DIR`` writes them with the report's other outputs; ``issues`` reads them back. A directory
holding anything else is refused, never emptied.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import check_output_dir, read_text
from bugmatrix.publish.attachments import Attachment, ReproExporter
from bugmatrix.publish.issue_body import Links, render_issue
from bugmatrix.publish.markers import MARKER, Marker, State, file_stem, parse_markers
from bugmatrix.report.night import NightReport
from bugmatrix.report.outputs import Files, Night, Output

__all__ = ["Body", "body_files", "check_bodies_dir", "issue_bodies_output", "read_bodies"]


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
