"""nights.html as a person sees it in Debian's headless chromium: no sideways scroll at 1280 px or on a phone, and a screenshot.

The site is built from fixture nights (tests/test_site_nights.py: a clean
night, a regression, a release that does not install), with two weeks of
ordinary nights before them so the grid and the trend have something to show.
The 1280x800 screenshots of the site after the clean night and after the
regression night are copied to build/screenshots/nights-{clean,regression}-1280.png
for a person to look at (``docs/nights-clean.png`` and ``docs/nights-regression.png``
are committed copies). Skips, saying why, where chromium is not installed.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from bugmatrix.publish.site import build_site
from tests.test_report_browser import CHROMIUM, chromium
from tests.test_site_nights import cell, night_report, result, site_of_three_nights

pytestmark = pytest.mark.browser

#: Test-only probe: how much wider than the window the page is after layout (0: no sideways scroll).
MEASURE = (
    "<script>window.addEventListener('load', function () { var d = document.documentElement;"
    " document.body.setAttribute('data-overflow-px', String(d.scrollWidth - d.clientWidth)); });</script></body>"
)
SHOT_DIR = Path(__file__).resolve().parent.parent / "build" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (/usr/bin/chromium); install it with: apt-get install -y chromium")
    tmp = tmp_path_factory.mktemp("nights")
    previous = None
    for day in range(1, 15):  # two ordinary weeks: some cells reused, a variant fixed upstream on the 8th
        date = f"2026-11-{day:02d}"
        ids = [f"c{i}" for i in range(12)]
        outcome = "fixed" if day >= 8 else "reproduced"
        compat = {
            "cells": [cell(c, reused=(day % 3 == 0 and i % 2 == 0)) for i, c in enumerate(ids)],
            "results": {
                "v::core[cpu]": {c: result(outcome if i < 6 else "reproduced", "as-expected") for i, c in enumerate(ids)},
                "v::fresh[cpu]": {c: result("fixed", "as-expected") for c in ids},
                "v::guard[cpu]": {c: result("skipped", "not-run") for c in ids[:4]},
            },
            "releases": [],
        }
        reports, _ = night_report(tmp, date, compat)
        out = tmp / f"site-{date}"
        build_site(reports, out, date=date, profile="nightly", previous=previous)
        previous = out
    staged = tmp / "three"
    staged.mkdir()
    return site_of_three_nights(staged, previous)


def probed(page: Path) -> Path:
    copy = page.with_name(f"probe-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE), encoding="utf-8")
    return copy


@pytest.mark.parametrize("width", [1280, 390])
def test_nights_page_needs_no_sideways_scroll(site: Path, width: int) -> None:
    assert len(json.loads((site / "nights.json").read_text())["nights"]) == 17
    dom = chromium(probed(site / "nights.html"), f"--window-size={width},800", "--dump-dom").stdout
    overflow = re.search(r'data-overflow-px="(-?\d+)"', dom)
    assert overflow is not None, "the probe ran"
    assert int(overflow.group(1)) <= 0, (
        f"nights.html is {overflow.group(1)} px wider than a {width} px window (the table scrolls in its box)"
    )


@pytest.mark.parametrize(("night", "name"), [("2026-11-21", "clean"), ("2026-11-22", "regression")])
def test_nights_screenshot_at_1280x800(site: Path, night: str, name: str) -> None:
    """The site as it stood the morning after a clean night and after the regression night (docs/nights-<name>.png)."""
    that_morning = site.parent / f"site-{night}"
    shot = site.parent / f"nights-{name}.png"
    chromium(that_morning / "nights.html", "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert struct.unpack(">II", data[16:24]) == (1280, 800) and len(data) > 10_000
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy2(shot, SHOT_DIR / f"nights-{name}-1280.png")
    issues = sorted((that_morning / night / "issues").glob("*.html"))
    if issues:
        chromium(issues[0], "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={site.parent / 'issue.png'}")
        shutil.copy2(site.parent / "issue.png", SHOT_DIR / "issue-1280.png")


#: axe-core's browser bundle, unpacked from the npm registry's tarball (``npm pack axe-core``); build/ is git-ignored.
AXE = Path(__file__).resolve().parent.parent / "build" / "axe" / "package" / "axe.min.js"
#: Reports axe's violations into the DOM once it has run; --virtual-time-budget lets the promise settle before --dump-dom.
AXE_RUN = (
    "<script>axe.run(document, {resultTypes: ['violations']}).then(function (r) { var p = document.createElement('pre');"
    " p.id = 'axe'; p.textContent = JSON.stringify(r.violations.map(function (v) {"
    " return [v.id, v.impact, v.nodes.map(function (n) { return n.html; }).slice(0, 2)]; })); document.body.appendChild(p); });</script></body>"
)


def test_axe_finds_no_violations_on_the_nights_and_issue_pages(site: Path) -> None:
    if not AXE.is_file():
        pytest.skip(
            f"axe-core is not unpacked at {AXE}; get it with: mkdir -p build/axe && cd build/axe && npm pack axe-core && tar xzf axe-core-*.tgz"
        )
    script = "<script>" + AXE.read_text(encoding="utf-8").replace("</script", "<\\/script") + "</script>"
    for page in [site / "nights.html", *sorted(site.rglob("issues/*.html"))]:
        probe = page.with_name(f"axe-{page.name}")
        probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + AXE_RUN), encoding="utf-8")
        dom = chromium(probe, "--virtual-time-budget=10000", "--dump-dom").stdout
        found = re.search(r'<pre id="axe">(.*?)</pre>', dom, re.S)
        assert found is not None, f"{page}: axe did not report"
        assert json.loads(html.unescape(found.group(1))) == [], f"{page.relative_to(site)}: axe-core violations"
