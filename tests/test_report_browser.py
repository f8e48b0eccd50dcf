"""index.html as a person sees it: Debian's headless chromium renders the fixture report.

Asserts on the DOM *after* the inline script ran (filters built from the
table, a change link opening its log), checks that the hostile fixture
message did not execute, and takes a 1280x800 screenshot. Skips, saying why,
where chromium is not installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bugmatrix.report.night import analyse
from bugmatrix.report.render_html import render_html
from tests.test_report import CORE, FIXED, fixture_compat, with_regression

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
#: No network, no first-run UI, no background services: the page must render from the file alone.
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI containers run as root, where chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture report with a planted regression, written where chromium can open it."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (/usr/bin/chromium); install it with: apt-get install -y chromium")
    baseline = fixture_compat()
    current = with_regression(baseline)
    path = tmp_path_factory.mktemp("report") / "index.html"
    path.write_text(render_html(analyse(current, baseline)), encoding="utf-8")
    return path


def chromium(report: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    """One headless run with a throwaway profile (a shared one would lock between runs)."""
    profile = report.parent / f"profile-{len(list(report.parent.glob('profile-*')))}"
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, report.as_uri() + fragment]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.fixture(scope="module")
def dom(report: Path) -> str:
    return chromium(report, "--dump-dom").stdout


def test_hostile_message_did_not_run(dom: str, report: Path) -> None:
    written = re.search(r"<title>(.*?)</title>", report.read_text(encoding="utf-8")).group(1)
    rendered = re.search(r"<title>(.*?)</title>", dom).group(1)
    assert rendered == written and "pwned" not in rendered, "a fixture message tries to set document.title"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom, "it is shown as text instead"
    assert not re.search(r"<img[^>]*onerror", dom)


def test_regression_is_inside_changes_above_the_table(dom: str) -> None:
    start = dom.index('<section id="changes"')
    section = dom[start : dom.index("</section>", start)]
    assert 'class="change change-regression"' in section and f"{CORE}" in section and FIXED in section
    assert dom.index("</section>", start) < dom.index('id="compat-table"')


def test_filters_are_built_from_the_table(dom: str) -> None:
    case = dom[dom.index('id="f-case"') : dom.index("</select>", dom.index('id="f-case"'))]
    assert '<option value="autocast_cache">autocast_cache</option>' in case
    assert '<option value="t5_loss_no_grad_fn">t5_loss_no_grad_fn</option>' in case
    outcome = dom[dom.index('id="f-outcome"') : dom.index("</select>", dom.index('id="f-outcome"'))]
    for word in ("crashed", "fixed", "install-failed", "reproduced", "skipped", "timeout"):
        assert f'<option value="{word}">{word}</option>' in outcome
    torch = dom[dom.index('data-axis="torch"') : dom.index("</select>", dom.index('data-axis="torch"'))]
    values = re.findall(r'<option value="([^"]+)">', torch)
    assert values == ["2.5.1", "2.11.0", "2.12.0", "9.0.0"], "versions in plan order, not string order"
    # python is the same in every cell: its filter would only ever show one value.
    python = dom.index('data-axis="python"')
    assert 'class="hidden"' in dom[dom.rindex("<label", 0, python) : python]
    # the CUDA rows are skipped everywhere and hidden by default, by the script
    assert re.search(r'<tr data-case="autocast_cache" data-variant="autocast_cache::core\[cuda\]"[^>]*class="[^"]*hidden', dom)


def test_a_change_link_opens_its_log(report: Path) -> None:
    dom = chromium(report, "--dump-dom", fragment="#e0").stdout
    entry = re.search(r'<td [^>]*id="e0"[^>]*>(.*?)</td>', dom, re.S)
    assert entry and "<details open" in entry.group(1), "following a change link expands the entry's message and log"


def test_screenshot_at_1280x800(report: Path) -> None:
    shot = report.parent / "report.png"
    chromium(report, "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 800), "the IHDR chunk holds width and height"
    assert len(data) > 10_000, "a blank page compresses to a few hundred bytes"


# -- the full profile: boundary pictures, and nothing wider than 1280 px ----------------------------

#: Test-only probe: after layout, how much wider than the window the page is (0: no horizontal scroll).
MEASURE = (
    "<script>window.addEventListener('load', function () {"
    " var d = document.documentElement;"
    " document.body.setAttribute('data-overflow-px', String(d.scrollWidth - d.clientWidth));"
    " var widest = 0; document.querySelectorAll('figure.boundary').forEach(function (f) {"
    " widest = Math.max(widest, f.getBoundingClientRect().right); });"
    " document.body.setAttribute('data-widest-figure-px', String(Math.ceil(widest))); });</script></body>"
)
#: Where the full-profile screenshot is kept for a person to look at (build/ is git-ignored).
SHOT_DIR = Path(__file__).resolve().parent.parent / "build" / "screenshots"


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic full-profile page (70 cells, 30 nights of history, a flap), with the width probe appended."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (/usr/bin/chromium); install it with: apt-get install -y chromium")
    from msgspec.structs import replace

    from bugmatrix.report.history import night_from_compat
    from tests.fullscale import full_compat

    compat = full_compat()
    night = night_from_compat(compat, "2026-11-23")
    # 30 nights: the timelines at their full width must fit too; one cell of the core variant flaps on the last three.
    nights = [replace(night, date=f"2026-10-{day:02d}", commit="c", profile="full") for day in range(1, 31)]
    flapped = dict(night.outcomes)
    core = flapped["autocast_cache::core[cpu]"]
    flapped["autocast_cache::core[cpu]"] = ("R" if core[-2] == "F" else "F") + core[1:]
    nights[-2] = replace(nights[-2], outcomes=flapped)
    path = tmp_path_factory.mktemp("full") / "index.html"
    path.write_text(render_html(analyse(compat, None, nights)).replace("</body>", MEASURE), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def full_dom(full_report: Path) -> str:
    return chromium(full_report, "--window-size=1280,2400", "--hide-scrollbars", "--dump-dom").stdout


def test_full_profile_draws_a_strip_or_grid_per_variant(full_dom: str) -> None:
    from tests.fullscale import EXPECTED

    figures = {vid: kind for kind, vid in re.findall(r'<figure class="boundary (strip|grid)" data-variant="([^"]+)"', full_dom)}
    assert figures == {vid: "strip" if len(axes) == 1 else "grid" for vid, axes in EXPECTED.items()}
    for vid, axes in EXPECTED.items():
        drawn = re.search(rf'data-variant="{re.escape(vid)}" data-axes="([^"]+)"', full_dom).group(1).split()
        assert sorted(drawn) == sorted(axes), vid


def test_full_profile_labels_every_flip_with_its_release(full_dom: str) -> None:
    from bugmatrix.report.boundaries import pictures
    from tests.fullscale import full_compat

    labelled = set(
        re.findall(r'<li class="flip" data-variant="([^"]+)" data-flip-axis="([^"]+)" data-release="([^"]+)">([^<]+)</li>', full_dom)
    )
    expected = {(t.variant.id, f.axis, f.after) for p in pictures(full_compat())[0] for t in p.tracks for f in t.flips}
    assert {(v, a, r) for v, a, r, _ in labelled} == expected and len(expected) >= 10
    for _, _, release, text in labelled:
        assert release in text
    assert any(text == "core[cpu]: fixed in torch 2.11.0" for *_, text in labelled)
    assert any(text.startswith("lightning_trainer[cpu]: fixed in pl 2.0.7") for *_, text in labelled)


def test_full_profile_shows_history_flaky_and_agreement(full_dom: str) -> None:
    strip = full_dom[full_dom.index('data-variant="autocast_cache::core[cpu]" data-axes') :]
    row = strip[strip.index('<tr data-variant="autocast_cache::core[cpu]"') :]
    row = row[: row.index("</tr>")]
    assert 'data-since="2026-10-30"' in row, "the flap's last change"
    assert re.search(r'class="flaky" title="changed back and forth[^"]*">≈ flaky \(1 cell\)', row)
    assert row.count('class="t-') == 30 and '<span class="t-flap"' in row
    rows = re.findall(r'<li class="agreement-row" data-agrees="(yes|no)" data-upstream="([^"]+)">(.*?)</li>', full_dom, re.S)
    by_name = {name: (agrees, re.sub(r"<[^>]+>", "", text)) for agrees, name, text in rows}
    assert by_name["upstream_pr165068_test[cpu]"][0] == "yes" and "agrees in 42/42 cells" in by_name["upstream_pr165068_test[cpu]"][1]
    agrees, text = by_name["upstream_issue82783[cpu]"]
    assert agrees == "no" and "agrees in 30/42 cells; differs in: py311-torch2.1.2-pl2.0.3" in text


def test_full_profile_fits_1280_px_without_horizontal_scroll(full_dom: str) -> None:
    overflow = re.search(r'data-overflow-px="(-?\d+)"', full_dom)
    widest = re.search(r'data-widest-figure-px="(\d+)"', full_dom)
    assert overflow and widest, "the probe ran after layout"
    assert int(overflow.group(1)) <= 0, f"the page is {overflow.group(1)} px wider than 1280"
    assert 600 < int(widest.group(1)) <= 1280, "the strips are drawn, and inside the window"
    assert '<details class="detail-view" id="detail">' in full_dom, "70 columns start collapsed below the pictures"


def test_full_profile_screenshot(full_report: Path) -> None:
    shot = full_report.parent / "full.png"
    chromium(full_report, "--window-size=1280,2400", "--hide-scrollbars", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert struct.unpack(">II", data[16:24]) == (1280, 2400) and len(data) > 50_000
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy2(shot, SHOT_DIR / "fullscale-1280.png")
