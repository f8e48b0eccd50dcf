"""The HTML report as a person sees it: Debian's headless chromium renders it.

Asserts on the rendered DOM (after the inline script ran), not on the
template, and takes a 1280x800 screenshot. Skips, saying why, where chromium
is not installed (the tests session installs it with apt-get).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest

from bugmatrix.report.diff import diff_against_baseline
from bugmatrix.report.render_html import render_html
from tests.test_rendering import compat

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    baseline = compat()
    current = copy.deepcopy(baseline)
    current["results"]["demo::core[cpu]"]["py311-torch2.11.0"]["outcome"] = "reproduced"  # a planted regression
    path = tmp_path_factory.mktemp("html") / "index.html"
    path.write_text(render_html(current, diff_against_baseline(current, baseline)))
    return path


def chromium(report: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = report.parent / "profile"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, report.as_uri()], capture_output=True, text=True, timeout=90, check=False
    )


def test_rendered_dom_has_the_regression_on_top_and_js_filters(report: Path) -> None:
    dom = chromium(report, "--dump-dom").stdout
    assert "<title>bugmatrix" in dom and "pwned" not in dom.split("</title>")[0], "the hostile message must not run"
    changes, table = dom.index('id="changes"'), dom.index('id="compat-table"')
    regression = dom.index("change-regression")
    assert changes < regression < table
    # options that only the inline script creates, from the table's data attributes
    assert '<option value="demo">demo</option>' in dom
    assert '<option value="reproduced">reproduced</option>' in dom
    assert '<option value="2.11.0">2.11.0</option>' in dom
    assert "&lt;script&gt;document.title" in dom


def test_screenshot_is_readable_size(report: Path) -> None:
    shot = report.parent / "report.png"
    chromium(report, "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
