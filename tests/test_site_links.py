"""The morning page (issue 47): the grid shows the flip first, and every page links where a maintainer goes next.

Three real nights of the fixture cells, each rendered by the report as it is
published (index.html, compat.md, compat.json, and the issue bodies with their
real repro export): a clean night, a night whose ``core[cpu]`` regresses in one
cell, and a night where it stays regressed. The site is built night by night
from the previous one, as the nightly does, and the links are followed in the
built files: every relative link of every page resolves to a file of the site.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import msgspec
import pytest

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cli import main
from bugmatrix.files import write_json_atomic
from bugmatrix.publish.bodies import ReproExporter, body_files
from bugmatrix.publish.issue_body import Links
from bugmatrix.publish.site import build_site
from bugmatrix.report.history import append_night, night_from_compat
from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from bugmatrix.report.render_md import render_markdown
from tests.planfiles import plan_of_runs
from tests.test_report import CORE, FIXED, FIXTURES, fixture_compat

ROOT = Path(__file__).resolve().parents[1]
DATES = ("2026-11-21", "2026-11-22", "2026-11-23")
MESSAGE = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"


class Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value for name, value in attrs if name in ("href", "src") and value]


def local_links(page: Path) -> list[Path]:
    """Every relative link of ``page`` (its anchors within the page and web links left out), resolved to a path."""
    parser = Hrefs()
    parser.feed(page.read_text(encoding="utf-8"))
    found = []
    for href in parser.hrefs:
        parts = urlsplit(href)
        if parts.scheme or not parts.path:
            continue
        found.append((page.parent / unquote(parts.path)).resolve())
    return found


def three_nights(tmp_path: Path) -> Path:
    """The published site after the third night (the middle night flips ``core[cpu]`` in one cell)."""
    baseline = msgspec.structs.replace(fixture_compat(), profile="nightly")
    regressed = baseline.with_entry(CORE, FIXED, outcome=Outcome.REPRODUCED, verdict="regression", message=MESSAGE)
    kept: list = []
    previous = None
    for date, compat in zip(DATES, (baseline, regressed, regressed), strict=True):
        kept = append_night(kept, night_from_compat(compat, date))
        report = analyse(compat, baseline, kept)
        reports, bodies = tmp_path / f"reports-{date}", tmp_path / f"issues-{date}"
        reports.mkdir()
        (reports / "index.html").write_text(render_html(report), encoding="utf-8")
        (reports / "compat.md").write_text(render_markdown(report), encoding="utf-8")
        write_json_atomic(reports / "compat.json", report.to_json())
        files, _ = body_files(report, date, Links(), bodies, ReproExporter(ROOT / "matrix.toml", ROOT / "cases", FIXTURES))
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        bodies.mkdir(exist_ok=True)
        out = tmp_path / f"site-{date}"
        build_site(reports, out, date=date, profile="nightly", previous=previous, issues=bodies)
        previous = out
    assert previous is not None
    return previous


def test_the_grid_shows_the_flipped_variant_first_with_the_flip_on_its_night(tmp_path: Path) -> None:
    site = three_nights(tmp_path)
    page = (site / "nights.html").read_text(encoding="utf-8")
    grid = page[page.index('<table class="grid">') : page.index("</table>", page.index('<table class="grid">'))]
    rows = re.findall(r'<tr data-variant="([^"]+)"[^>]*>(.*?)</tr>', grid, re.S)
    assert rows[0][0] == CORE, [v for v, _ in rows[:3]]
    first = rows[0][1]
    assert "since 2026-11-22" in first
    entries = dict(re.findall(r'<td[^>]*data-night="([\d-]+)"[^>]*>(.*?)</td>', first))
    assert entries["2026-11-21"].startswith("✗✓") and entries["2026-11-22"].startswith("✗"), entries
    flipped = re.findall(r'<td class="([^"]*)" data-night="([\d-]+)"', first)
    assert [night for cls, night in flipped if "flip" in cls.split()] == ["2026-11-22"], "the flip is marked on its night only"
    assert f"{FIXED} fixed → reproduced" in first, "the entry says which cell flipped, and how"
    others = [body for _, body in rows[1:]]
    assert not any("since" in body for body in others), "nothing else flipped"
    assert re.search(r"\d+ variant\(s\) ran nowhere on these nights", page), "the CUDA variants, folded into one line"


def test_the_regression_night_links_its_issue_its_files_and_every_night(tmp_path: Path) -> None:
    site = three_nights(tmp_path)
    night = site / "2026-11-22" / "index.html"
    links = local_links(night)
    issue_pages = [p for p in links if p.parent == (site / "2026-11-22" / "issues").resolve() and p.suffix == ".html"]
    assert len(issue_pages) == 1 and issue_pages[0].is_file(), links
    assert "regression: autocast_cache::core[cpu] reproduces where it was fixed" in issue_pages[0].read_text(encoding="utf-8")
    files = [p for p in links if p.parent == issue_pages[0].with_suffix("").resolve()]
    assert {p.name for p in files} >= {"repro.py", "requirements.txt"} and all(p.is_file() for p in files), files
    assert (site / "nights.html").resolve() in links
    box = night.read_text(encoding="utf-8")
    assert box.index('id="changes"') < box.index("issues/") < box.index('id="compat-table"'), "the links sit in the findings box"
    issue = local_links(issue_pages[0])
    assert night.resolve() in issue and (site / "nights.html").resolve() in issue, "the issue page links its night and every night"
    assert {p.name for p in issue} >= {"repro.py", "requirements.txt"}, "and its attached files"


def test_every_relative_link_of_every_page_resolves(tmp_path: Path) -> None:
    """Relative links work locally and on Pages alike: the root's copy of a night's page links from where it sits."""
    site = three_nights(tmp_path)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 5
    for page in pages:
        for target in local_links(page):
            assert target.is_file() and site.resolve() in target.parents, f"{page.relative_to(site)} links {target}"
    root = local_links(site / "index.html")
    assert (site / "2026-11-23" / "issues").resolve() in [p.parent for p in root], "the front page's issue links go into its night"


def test_a_smoke_site_from_the_main_jobs_output_names_its_profile_night_and_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42: ``nox`` (its report-smoke: --profile smoke --plan …), then ``site --profile smoke`` without --root-profile."""
    reports = tmp_path / "build" / "reports"
    (reports / "runs").mkdir(parents=True)
    for run in FIXTURES.glob("*.json"):
        (reports / "runs" / run.name).write_bytes(run.read_bytes())
    plan = plan_of_runs(reports, "smoke")
    argv = ["report", "--reports", str(reports), "--profile", "smoke", "--plan", plan, "--date", "2026-11-23"]
    assert main([*argv, "--history", str(reports / "history.jsonl")]) == 0
    capsys.readouterr()
    out = tmp_path / "build" / "site"
    assert main(["site", "--reports", str(reports), "--out", str(out), "--date", "2026-11-23", "--profile", "smoke"]) == 0
    said = capsys.readouterr().out
    badge = json.loads((out / "badge.json").read_text(encoding="utf-8"))
    findings = re.fullmatch(r"2026-11-23 · (\d+) findings?", str(badge["message"]))
    assert badge["label"] == "bugmatrix smoke" and findings, badge
    front = (out / "index.html").read_text(encoding="utf-8")
    assert f"Night <b>2026-11-23</b> of profile <b>smoke</b>: <b>{findings.group(1)} finding" in front
    assert "nightly" not in (out / "nights.html").read_text(encoding="utf-8"), "nothing files a smoke night as nightly"
    assert "root profile: smoke" in said
