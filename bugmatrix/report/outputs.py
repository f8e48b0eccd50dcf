"""Everything a report writes, as a registry: one :class:`Output` per output, with its check, its locks and its files.

An upper stage adds its own through ``ReportOptions.extra`` (the issue bodies); all are written at once, all or nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import check_output_file, read_bytes, read_json, read_text
from bugmatrix.report.night import NightReport
from bugmatrix.report.options import ReportOptions
from bugmatrix.report.readme import check_readme, readme_text
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown, render_step_summary

__all__ = ["BUILTIN_OUTPUTS", "PAGES", "Files", "Night", "Output", "kept_by_publish", "wanted_outputs"]

#: The report's own pages, in ``<reports>/`` (and in ``reports/`` with ``--publish``).
PAGES = ("compat.json", "compat.md", "index.html")

#: What an output writes (path -> content) and what it removes, applied with every other output's at once.
Files = tuple[dict[Path, str | bytes], list[Path]]


@dataclass(frozen=True)
class Night:
    """What the renderers get: the analysed night, its date, its run files, the new history, and the GPU runs ``kept``."""

    options: ReportOptions
    report: NightReport
    date: str
    runs: tuple[str, ...]
    history: str
    kept: tuple[str, ...] = ()

    def page(self, name: str) -> str:
        """One of :data:`PAGES`, rendered (the same text wherever it is written)."""
        if name == "compat.json":
            return json.dumps(self.report.to_json(), indent=1, sort_keys=True) + "\n"
        return render_markdown(self.report) if name == "compat.md" else render_html(self.report)

    def pages(self, directory: Path) -> dict[Path, str | bytes]:
        """Every one of :data:`PAGES` in ``directory``."""
        return {directory / name: self.page(name) for name in PAGES}


@dataclass(frozen=True)
class Output:
    """One output: whether it is asked for, its checks (before anything is read), the directories it locks, its files."""

    name: str
    render: Callable[[Night], Files]
    wanted: Callable[[ReportOptions], bool] = lambda options: True
    check: Callable[[ReportOptions], None] = lambda options: None
    locks: Callable[[ReportOptions], Sequence[Path]] = lambda options: ()
    line: Callable[[Night], str | None] = lambda night: None  # printed after the report's own lines


def _check_pages(options: ReportOptions) -> None:
    if not (options.reports / "runs").is_dir():
        msg = f"--reports {options.reports}: no run directory {options.reports / 'runs'}; run a cell first (nox -s system, or nox -t smoke)"
        raise BugmatrixError(msg)
    for name in PAGES:
        check_output_file(options.reports / name, f"--reports {options.reports}:")


def _step_summary(night: Night) -> Files:
    path = night.options.step_summary
    assert path is not None  # wanted() guarantees it
    # Appended to, as $GITHUB_STEP_SUMMARY is meant to be (a FIFO or a device there is refused, never waited on).
    before = read_text(path, "step summary", fix="pass a regular file") if os.path.lexists(path) else ""
    return {path: before + render_step_summary(night.report)}, []


def _check_publish(options: ReportOptions) -> None:
    reference = options.reference
    for name in PAGES:
        check_output_file(reference / name, "--publish")
    if (reference / "runs").exists() and not (reference / "runs").is_dir():
        msg = f"--publish: {reference / 'runs'} is a file, not a directory; move it aside"
        raise BugmatrixError(msg)


def _publish(night: Night) -> Files:
    """The committed reference: tonight's pages and run files; run files of cells no longer run are removed."""
    options, reference = night.options, night.options.reference
    if options.reports.resolve() == reference.resolve():
        return {}, []
    files = night.pages(reference)
    for cell in night.runs:
        files[reference / "runs" / f"{cell}.json"] = read_bytes(options.reports / "runs" / f"{cell}.json", "run file")
    kept = set(kept_by_publish(reference))
    return files, [p for p in (reference / "runs").glob("*.json") if p.stem not in night.runs and p not in kept]


def kept_by_publish(reference: Path) -> list[Path]:
    """The committed runs recorded on a GPU: a CPU night's ``--publish`` cannot re-observe them, so it keeps and reads them."""
    return sorted(p for p in (reference / "runs").glob("*.json") if _observed_on_a_gpu(p))


def _observed_on_a_gpu(path: Path) -> bool:
    """A run recorded on a GPU (``cuda_available``); an unreadable one is not kept (the publish replaces it)."""
    try:
        environment = read_json(path, "run file").get("environment") or {}
    except (BugmatrixError, AttributeError):
        return False
    return isinstance(environment, dict) and environment.get("cuda_available") is True


def _readme(night: Night) -> Files:
    assert night.options.readme is not None  # wanted() guarantees it
    return {night.options.readme: readme_text(night.options.readme, night.report)}, []


#: The report's own outputs, in the order they are checked and written.
BUILTIN_OUTPUTS = (
    Output("pages", lambda night: (night.pages(night.options.reports), []), check=_check_pages, locks=lambda o: (o.reports,)),
    Output(
        "history",
        lambda night: ({night.options.history_path: night.history}, []),
        check=lambda o: check_output_file(o.history_path, "--history"),
        locks=lambda o: (o.history_path.parent,),
    ),
    Output(
        "step-summary",
        _step_summary,
        wanted=lambda o: o.step_summary is not None,
        check=lambda o: check_output_file(o.step_summary, "--step-summary", create_parent=False),  # type: ignore[arg-type]
    ),
    Output("publish", _publish, wanted=lambda o: o.publish, check=_check_publish, locks=lambda o: (o.reference,)),
    Output("readme", _readme, wanted=lambda o: o.readme is not None, check=lambda o: check_readme(o.readme)),  # type: ignore[arg-type]
    Output(
        "baseline",
        lambda night: ({night.options.baseline_path: night.page("compat.json")}, []),
        wanted=lambda o: o.update_baseline,
        check=lambda o: check_output_file(o.baseline_path, "--update-baseline"),
        locks=lambda o: (o.reference,) if o.baseline is None else (),
    ),
)


def wanted_outputs(options: ReportOptions) -> list[Output]:
    """The built-in outputs this report is asked for, then the ones an upper stage added."""
    return [output for output in (*BUILTIN_OUTPUTS, *options.extra) if output.wanted(options)]
