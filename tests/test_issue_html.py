"""Issue bodies as HTML for the site: the body writer's Markdown subset rendered, every character of run text escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from bugmatrix.publish.issue_body import Attachment, fenced, literal
from bugmatrix.publish.issue_html import render_markdown
from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.night import analyse
from tests.test_issue_bodies import CORE, body_of, finding, regression_night
from tests.test_report import FIXED

#: What the renderer may emit; anything else in the output came from the body unescaped.
ALLOWED = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "li", "pre", "code", "b", "a", "hr", "details", "summary", "small", "div", "table", "thead", "tbody", "tr", "th", "td"}  # fmt: skip


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(fragment: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(fragment)
    return parser.tags


def test_a_real_regression_body_renders_its_table_sections_and_code() -> None:
    report = regression_night()
    body = body_of(
        report, finding(report, ChangeKind.REGRESSION, CORE), Attachment("d", {"repro.py": "print(1)\n"}, False, "3.11", "cmd", "run")
    )
    page = render_markdown(body, top=2)
    found = tags(page)
    assert {t for t, _ in found} <= ALLOWED
    assert "<h2>In which cells</h2>" in page, (
        "the body's ### sections under the page's h1: h2" and "<table>" in page and '<th scope="col">' in page
    )
    assert "<pre><code>" in page and "<!-- bugmatrix" not in page, "the marker is for the tracker, not the reader"
    assert all(not (a.get("href") or "").lower().startswith("javascript") for _, a in found)


def test_hostile_text_stays_text() -> None:
    hostile = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) [y](data:text/html,hi) **<b>**"
    page = render_markdown("\n".join([f"- {literal(hostile)}", "", hostile, "", fenced(hostile), "", f"| a |\n|---|\n| {hostile} |"]))
    assert {t for t, _ in tags(page)} <= ALLOWED
    assert "<script" not in page and "<img" not in page and 'href="javascript' not in page and 'href="data' not in page
    assert page.count("&lt;script&gt;") == 4, "shown four times, as text"
    assert re.search(r'<a href="https://example.org/x\?a=1&amp;b=2">', render_markdown("[ok](https://example.org/x?a=1&b=2)"))


def test_the_log_summary_shows_its_cell_as_code_not_as_markup_text() -> None:
    """The writer puts an escaped cell id in ``<code>`` inside ``<summary>``: the page shows it as code, and a hostile id stays text."""
    report = regression_night()
    tonight = report.compat.with_entry(CORE, FIXED, log="Traceback: boom")
    body = body_of(analyse(tonight, report.baseline), finding(report, ChangeKind.REGRESSION, CORE))
    page = render_markdown(body, top=2)
    assert f"<summary>Log recorded in <code>{FIXED}</code> (its tail)</summary>" in page, page[page.index("<summary>Log") :][:200]
    assert "&lt;code&gt;" not in page
    hostile = render_markdown("<details><summary>Log recorded in <code>a&lt;/code&gt;&lt;img src=x&gt;</code> (its tail)</summary>")
    assert "<img" not in hostile and "<code>a&lt;/code&gt;&lt;img src=x&gt;</code>" in hostile
