"""The site's history: nights.html counts each night from its own report, the badge follows the newest night, every issue page is linked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from bugmatrix.publish.markers import Marker, State
from bugmatrix.publish.site import build_site

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
    return {"id": cell_id, "install": {"status": status, "reason": ""}, "reused_from": origin}


def result(outcome: str, verdict: str) -> dict[str, object]:
    return {"outcome": outcome, "verdict": verdict, "expected": "fixed", "message": "", "log": "", "leaked": [], "workarounds": []}


def night_report(tmp_path: Path, name: str, compat: dict[str, object], issues: dict[str, Marker] | None = None) -> tuple[Path, Path | None]:
    """A report directory (its compat.json is what the site reads) and, for a night with findings, its issue bodies."""
    reports = tmp_path / f"reports-{name}"
    reports.mkdir()
    (reports / "index.html").write_text(f"<p>{name}</p>")
    (reports / "compat.md").write_text(f"# {name}\n")
    (reports / "compat.json").write_text(json.dumps({"commit": f"c-{name}", **compat}))
    if not issues:
        return reports, None
    bodies = tmp_path / f"issues-{name}"
    bodies.mkdir()
    for stem, marker in issues.items():
        (bodies / f"{stem}.md").write_text(f"{marker.render()}\n## {marker.title}\n\n<script>alert(1)</script> `code`\n")
    return reports, bodies


def site_of_three_nights(tmp_path: Path) -> Path:
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
        ("2026-11-22", regression, {"regression-v-core-cpu-1a2b3c4d": Marker("regression:v::core[cpu]", State.OPENED, "2026-11-22", "d", ("a",), "v regressed <b>")}),
        ("2026-11-23", uninstallable, {"release-torch-9-0-0-5e6f7a8b": Marker("release-does-not-install:torch 9.0.0", State.OPENED, "2026-11-23", "d", ("c",), "torch 9.0.0 does not install")}),
    ]  # fmt: skip
    previous = None
    for date, compat, issues in nights:
        reports, bodies = night_report(tmp_path, date, compat, issues)
        out = tmp_path / f"site-{date}"
        build_site(reports, out, date=date, profile="nightly", previous=previous, attachments=bodies)
        previous = out
    assert previous is not None
    return previous


def rows(page: str) -> dict[str, list[str]]:
    """nights.html's rows by date: each cell's text, tags stripped."""
    found = {}
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        found[cells[0]] = cells
    return found


def test_the_nights_table_counts_each_night_from_its_report_and_links_it(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    page = (site / "nights.html").read_text()
    table = rows(page)
    assert list(table) == ["2026-11-23", "2026-11-22", "2026-11-21"], "newest first"
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th scope=\"col\">(.*?)</th>", page)]
    column = {name: i for i, name in enumerate(head)}
    assert table["2026-11-21"][column["regressions"]] == "—" and table["2026-11-21"][column["reused / run"]] == "1 / 1"
    assert table["2026-11-22"][column["regressions"]] == "1" and table["2026-11-22"][column["reused / run"]] == "0 / 2"
    newest = table["2026-11-23"]
    assert (newest[column["not installing"]], newest[column["missing"]], newest[column["new releases"]]) == ("1", "1", "1")
    assert newest[column["regressions"]] == "—" and newest[column["commit"]] == "c-2026-11-23"
    for date in table:
        assert f'href="{date}/index.html"' in page and (site / date / "index.html").is_file()
    assert "<svg" in page and page.count("▲</text>") == 2, "the trend marks the two nights with findings"


def test_every_issue_page_is_linked_and_escaped(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    page = (site / "nights.html").read_text()
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("issues/*.html"))
    assert pages == ["2026-11-22/issues/regression-v-core-cpu-1a2b3c4d.html", "2026-11-23/issues/release-torch-9-0-0-5e6f7a8b.html"]
    for path in pages:
        assert f'href="{path}"' in page
        text = (site / path).read_text()
        assert "<script>" not in text and "&lt;script&gt;" in text, "the body is shown, never interpreted"
    assert "v regressed &lt;b&gt;" in page


def test_the_badge_is_a_shields_endpoint_and_follows_the_newest_nightly(tmp_path: Path) -> None:
    site = site_of_three_nights(tmp_path)
    document = json.loads((site / "badge.json").read_text())
    jsonschema.validate(document, SHIELDS_ENDPOINT)
    assert document == {"schemaVersion": 1, "label": "bugmatrix nightly", "message": "0 regressions", "color": "green"}
    svg = (site / "badge.svg").read_text()
    assert "0 regressions" in svg and "href" not in svg, "self-contained: nothing fetched"
    regressed = site / "2026-11-22"
    reports = tmp_path / "again"
    reports.mkdir()
    for name in ("index.html", "compat.md", "compat.json"):
        (reports / name).write_bytes((regressed / name).read_bytes())
    out = tmp_path / "site-again"
    build_site(reports, out, date="2026-11-24", profile="nightly", previous=site)
    document = json.loads((out / "badge.json").read_text())
    jsonschema.validate(document, SHIELDS_ENDPOINT)
    assert (document["message"], document["color"]) == ("1 regression", "red")
