"""The site's history: nights.html counts each night from its own report, the badge follows the newest night, every issue page is linked."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jsonschema

from bugmatrix.publish import nights
from bugmatrix.publish.markers import Marker, State, file_stem
from bugmatrix.publish.site import build_site
from bugmatrix.report.diff import ChangeKind
from tests.test_issue_bodies import CORE, body_of, finding, regression_night

#: shields.io's endpoint badge (https://shields.io/badges/endpoint-badge), as data.
SHIELDS_ENDPOINT = {
    "type": "object",
    "required": ["schemaVersion", "label", "message"],
    "properties": {
        "schemaVersion": {"const": 1},
        "label": {"type": "string"},
        "message": {"type": "string", "minLength": 1},
        "color": {"type": "string"},
        "labelColor": {"type": "string"},
        "isError": {"type": "boolean"},
        "namedLogo": {"type": "string"},
        "logoSvg": {"type": "string"},
        "logoColor": {"type": "string"},
        "logoWidth": {"type": "number"},
        "style": {"type": "string"},
        "cacheSeconds": {"type": "integer"},
    },
    "additionalProperties": False,
}


def cell(cell_id: str, status: str = "ok", *, reused: bool = False) -> dict[str, object]:
    origin = {"date": "2026-11-20T03:00:00+00:00", "commit": "0ld", "run": "local"} if reused else None
    return {"id": cell_id, "pins": {}, "install": {"status": status, "reason": ""}, "reused_from": origin}


def result(outcome: str, verdict: str) -> dict[str, object]:
    return {"outcome": outcome, "verdict": verdict, "expected": "fixed", "message": "", "log": "", "leaked": [], "workarounds": []}


def night_report(tmp_path: Path, name: str, compat: dict[str, object], issues: dict[str, str] | None = None) -> tuple[Path, Path | None]:
    """A report directory (its compat.json is what the site reads) and, for a night with findings, its issue bodies."""
    reports = tmp_path / f"reports-{name}"
    reports.mkdir()
    (reports / "index.html").write_text(f"<p>{name}</p>")
    (reports / "compat.md").write_text(f"# {name}\n")
    (reports / "compat.json").write_text(
        json.dumps({"schema": "bugmatrix.compat/4", "commit": f"c-{name}", "profile": "nightly", "variants": [], **compat})
    )
    if not issues:
        return reports, None
    bodies = tmp_path / f"issues-{name}"
    bodies.mkdir()
    for stem, text in issues.items():
        (bodies / f"{stem}.md").write_text(text)
    return reports, bodies


#: The regression night's issue: a real body, as ``report --issue-bodies`` writes it (tests/test_issue_bodies.py's fixture night).
REGRESSION_KEY = "regression:" + CORE
#: The uninstallable night's issue: a hand-made body whose title and text try markup.
RELEASE = Marker("release-does-not-install:torch 9.0.0", State.OPENED, "2026-11-23", "d", ("c",), "torch 9.0.0 <b>does not</b> install")


def regression_body() -> str:
    report = regression_night()
    return body_of(report, finding(report, ChangeKind.REGRESSION, CORE))


def site_of_three_nights(tmp_path: Path, previous: Path | None = None) -> Path:
    """A clean night, a night with a regression, a night whose new release does not install; each built from the last site."""
    clean = {
        "cells": [cell("a"), cell("b", reused=True)],
        "results": {"v::core[cpu]": {"a": result("fixed", "as-expected"), "b": result("reproduced", "as-expected")}},
        "releases": [],
    }
    regression = {
        "cells": [cell("a"), cell("b")],
        "results": {"v::core[cpu]": {"a": result("reproduced", "regression"), "b": result("reproduced", "as-expected")}},
        "releases": [],
    }
    release = {"axis": "torch", "version": "9.0.0", "variant": "v::core[cpu]", "cell": "c", "outcome": "install-failed", "kind": "does-not-install", "text": ""}  # fmt: skip
    uninstallable = {
        "cells": [cell("a"), cell("b", reused=True), cell("c", "failed"), cell("d", "missing")],
        "results": {"v::core[cpu]": {"a": result("fixed", "as-expected"), "b": result("reproduced", "as-expected"), "c": result("install-failed", "not-run")}},
        "releases": [release, {**release, "variant": "v::core[cuda]"}],
    }  # fmt: skip
    nights = [
        ("2026-11-21", clean, None),
        ("2026-11-22", regression, {file_stem(REGRESSION_KEY): regression_body()}),
        ("2026-11-23", uninstallable, {file_stem(RELEASE.key): f"{RELEASE.render()}\n## {RELEASE.title}\n\n<script>alert(1)</script> `code`\n"}),
    ]  # fmt: skip
    for date, compat, issues in nights:
        reports, bodies = night_report(tmp_path, date, compat, issues)
        out = tmp_path / f"site-{date}"
        build_site(reports, out, date=date, profile="nightly", previous=previous, issues=bodies)
        previous = out
    assert previous is not None
    return previous


def rows(page: str) -> dict[str, list[str]]:
    """nights.html's table of nights, its rows by date: each cell's text, tags stripped."""
    found = {}
    table = page[page.index('<table class="nights">') :]
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        found[cells[0]] = cells
    return found


def test_the_nights_table_counts_each_night_from_its_report_and_links_it(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    page = (site / "nights.html").read_text()
    table = rows(page)
    assert list(table) == ["2026-11-23", "2026-11-22", "2026-11-21"], "newest first"
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th scope=\"col\">(.*?)</th>", page[page.index('<table class="nights">') :])]
    column = {name: i for i, name in enumerate(head)}
    assert table["2026-11-21"][column["regressions"]] == "—" and table["2026-11-21"][column["reused / run"]] == "1 / 1"
    assert table["2026-11-22"][column["regressions"]] == "1" and table["2026-11-22"][column["reused / run"]] == "0 / 2"
    newest = table["2026-11-23"]
    assert (newest[column["not installing"]], newest[column["missing"]], newest[column["new releases"]]) == ("1", "1", "1")
    assert newest[column["regressions"]] == "—" and newest[column["commit"]] == "c-2026-11-23"
    for date in table:
        assert f'href="{date}/index.html"' in page and (site / date / "index.html").is_file()
    trend = page[page.index('<div class="trend">') : page.index("</svg>", page.index('<div class="trend">'))]
    bars = re.findall(r"<g><title>(.*?)</title>(.*?)</g>", trend)
    assert [title.split(" ")[0] for title, _ in bars] == ["2026-11-21", "2026-11-22", "2026-11-23"], "oldest left"
    heights = [sum(float(h) for h in re.findall(r'height="([\d.]+)"', rects)) for _, rects in bars]
    assert heights[1] == heights[2] == 80.0, "per cell: 1 regression in 2 cells and 2 cell findings in 4 are the same height"
    assert heights[0] == 3.0 and nights.GREEN in bars[0][1], "a clean night: the short green mark"


def test_every_issue_page_is_linked_and_escaped(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    page = (site / "nights.html").read_text()
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("issues/*.html"))
    assert pages == [f"2026-11-22/issues/{file_stem(REGRESSION_KEY)}.html", f"2026-11-23/issues/{file_stem(RELEASE.key)}.html"]
    for path in pages:
        assert f'href="{path}"' in page
        text = (site / path).read_text()
        assert "<script>" not in text and "&lt;script&gt;" in text, "the body is shown, never interpreted"
    assert "torch 9.0.0 &lt;b&gt;does not&lt;/b&gt; install" in page, "the title, escaped"
    assert "reproduces where it was fixed" in page, "the real body's title, from its marker"


def test_the_badge_is_a_shields_endpoint_and_follows_the_newest_nightly(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    document = json.loads((site / "badge.json").read_text())
    jsonschema.validate(document, SHIELDS_ENDPOINT)
    assert document == {"schemaVersion": 1, "label": "bugmatrix nightly", "message": "2026-11-23 · 2 findings", "color": "red"}
    svg = (site / "badge.svg").read_text()
    assert "2026-11-23 · 2 findings" in svg and "href" not in svg, "self-contained: nothing fetched"
    regressed = site / "2026-11-22"
    reports = tmp_path / "again"
    reports.mkdir()
    for name in ("index.html", "compat.md", "compat.json"):
        (reports / name).write_bytes((regressed / name).read_bytes())
    out = tmp_path / "site-again"
    build_site(reports, out, date="2026-11-24", profile="nightly", previous=site)
    document = json.loads((out / "badge.json").read_text())
    jsonschema.validate(document, SHIELDS_ENDPOINT)
    assert (document["message"], document["color"]) == ("2026-11-24 · 1 finding", "red")
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in ("index.html", "compat.md", "compat.json"):
        (clean / name).write_bytes((site / "2026-11-21" / name).read_bytes())
    build_site(clean, tmp_path / "site-clean", date="2026-11-25", previous=out)
    document = json.loads((tmp_path / "site-clean" / "badge.json").read_text())
    assert (document["message"], document["color"]) == ("2026-11-25 · 0 findings", "green")


# -- accessibility basics (axe-core is not installed here: see docs/site.md) ------------------------


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_status_colours_have_text_contrast_of_at_least_4_5() -> None:
    own = (resources.files("bugmatrix.publish") / "templates" / "site.css").read_text(encoding="utf-8")
    text_colours = set(re.findall(r"(?<!-)color: (#[0-9a-fA-F]{6})", own))
    assert {nights.RED, nights.GREY} <= text_colours, "the quiet and the loud count are coloured text"
    shared = (resources.files("bugmatrix") / "styles" / "report.css").read_text(encoding="utf-8")
    page = re.search(r"body \{[^}]*background: (#[0-9a-f]{6})", shared)
    assert page is not None, "the report's stylesheet names its background"
    for colour in text_colours:
        for background in (page.group(1), "#ffffff"):
            assert contrast(colour, background) >= 4.5, f"{colour} on {background}: {contrast(colour, background):.2f}:1"
    for fill in nights.BADGE_COLOURS.values():  # the badge's white text on its colour
        assert contrast("#ffffff", fill) >= 4.5, f"white on {fill}"
    assert contrast("#ffffff", "#444d56") >= 4.5, "white on the badge's label"


def test_pictures_have_text_and_tables_have_header_cells(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    pages = [site / "nights.html", *site.rglob("issues/*.html")]
    for path in pages:
        page = path.read_text()
        assert '<html lang="en">' in page and "<title>" in page, path
        for img in re.findall(r"<img\b[^>]*>", page):
            assert re.search(r'\balt="[^"]+"', img), f"{path}: {img} has no alt text"
        for svg in re.findall(r"<svg\b[^>]*>", page):
            assert 'role="img"' in svg and re.search(r'aria-label="[^"]+"', svg), f"{path}: {svg} has no text"
        for table in re.findall(r"<table\b.*?</table>", page, re.S):
            assert '<th scope="col">' in table, f"{path}: a table without header cells"
    svg = (site / "badge.svg").read_text()
    assert 'role="img"' in svg and "aria-label=" in svg and "<title>" in svg
