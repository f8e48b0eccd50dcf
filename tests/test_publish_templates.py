"""publish/ renders with templates of its own (issue 46): no markup built in Python, one page skeleton, one stylesheet shared with the report.

The markup check reads the source, so a regression is one failing line: a
string that holds a tag of a page (``<td``, ``<a ``, ``<div`` …), plain or
f-string, is HTML escaped by hand instead of by the templates' autoescape.
The Markdown writers (issue bodies for GitHub) may keep GitHub's own inline
HTML (``<details>``, ``<summary>``, ``<sub>``, the marker comment), never a
page's tags.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from bugmatrix.publish import render
from tests.test_report import html_for_regression
from tests.test_site_nights import site_of_three_nights

ROOT = Path(__file__).resolve().parent.parent
PUBLISH = sorted((ROOT / "bugmatrix" / "publish").glob("*.py"))
TEMPLATES = ROOT / "bugmatrix" / "publish" / "templates"
#: The tags of a page: none may be spelled in a Python string of publish/.
PAGE_TAG = re.compile(
    r"<(?:!doctype|html|head|body|style|script|header|main|section|article|nav|div|span|p|a|b|i|img|br|hr|ul|ol|li"
    r"|table|thead|tbody|tr|th|td|h[1-6]|pre|svg|g|rect|text|line|title)\b",
    re.IGNORECASE,
)
#: Any tag or comment: none may be built by an f-string outside the Markdown writers.
ANY_TAG = re.compile(r"<[a-zA-Z/!]")
#: Modules of publish/ that write Markdown for GitHub, whose raw HTML (``<details>``, ``<sub>``, the marker comment) is body text.
MARKDOWN_WRITERS = {"issue_body.py", "markers.py", "bodies.py"}


def shared_stylesheet() -> str:
    return (resources.files("bugmatrix") / "styles" / "report.css").read_text(encoding="utf-8")


def strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every string literal of a module, an f-string's literal parts included, its docstrings left out."""
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, scopes) and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def markup(source: str, markdown: bool = False) -> list[int]:
    """Lines of ``source`` whose strings build markup: a page's tag anywhere, and (unless ``markdown``) any tag in an f-string."""
    tree = ast.parse(source)
    found = {node.lineno for node in strings(tree) if PAGE_TAG.search(node.value)}
    if not markdown:
        for node in ast.walk(tree):
            parts = node.values if isinstance(node, ast.JoinedStr) else []
            found |= {node.lineno for p in parts if isinstance(p, ast.Constant) and ANY_TAG.search(str(p.value))}
    return sorted(found)


@pytest.mark.parametrize("path", PUBLISH, ids=[p.name for p in PUBLISH])
def test_publish_builds_no_markup_in_python(path: Path) -> None:
    """The site's pages come from publish/'s autoescaped templates: a tag in a Python string is escaping by hand."""
    lines = markup(path.read_text(encoding="utf-8"), markdown=path.name in MARKDOWN_WRITERS)
    assert not lines, f"bugmatrix/publish/{path.name}:{lines}: put the markup in bugmatrix/publish/templates/ (render it with render())"


def test_the_markup_scan_can_fail() -> None:
    """Each way of building a tag is found (plain string, f-string, concatenation); a docstring and Markdown's own HTML are not."""
    planted = (
        '"""A <div> in a docstring is prose."""\n'
        'row = f"<td>{value}</td>"\n'
        'link = "<a href=" + repr(url) + ">"\n'
        'item = "<li>" if shown else ""\n'
        'summary = f"<details><summary>{name}</summary>"\n'
        'page = "<!DOCTYPE html>"\n'
    )
    assert markup(planted) == [2, 3, 4, 5, 6]
    assert markup(planted, markdown=True) == [2, 3, 4, 6], "Markdown may hold <details>, never a page's tags"


def test_publish_reads_no_other_package_s_files() -> None:
    """Templates and the stylesheet come from package resources: no path built from a module's ``__file__``."""
    named = [p.name for p in PUBLISH if "__file__" in p.read_text(encoding="utf-8")]
    assert named == [], f"load these through bugmatrix.publish.render (package resources): {named}"


def test_one_skeleton_for_every_page_of_the_site() -> None:
    """Only ``_page.html.j2`` spells a page's head and frame; every page extends it."""
    templates = {p.name: p.read_text(encoding="utf-8") for p in sorted(TEMPLATES.glob("*.j2"))}
    frames = [name for name, text in templates.items() if re.search(r"<(?:!doctype|html|head|style|header|main|h1)\b", text, re.I)]
    assert frames == ["_page.html.j2"]
    pages = [name for name, text in templates.items() if "{% block title %}" in text and name != "_page.html.j2"]
    assert pages == ["issue.html.j2", "nights.html.j2"]
    assert all(templates[name].count('{% extends "_page.html.j2" %}') == 1 for name in pages)


def test_the_stylesheet_is_one_file_the_report_and_the_site_both_inline(tmp_path: Path) -> None:
    """The report's page and every page of the site inline ``bugmatrix/styles/report.css``: one package resource, no copy."""
    shared = shared_stylesheet().strip()
    assert [p.relative_to(ROOT).as_posix() for p in (ROOT / "bugmatrix").rglob("report.css")] == ["bugmatrix/styles/report.css"]
    assert shared in html_for_regression()
    site = site_of_three_nights(tmp_path)
    pages = [site / "nights.html", *sorted(site.rglob("issues/*.html"))]
    assert len(pages) == 3, pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert shared in text, f"{page.relative_to(site)}: the shared stylesheet is not inlined"
        head = text[: text.index("</head>")]
        title, h1 = re.findall(r"<title>(.*?)</title>", head), re.findall(r"<h1>(.*?)</h1>", text)
        assert len(title) == 1 and title == h1 and text.count("<main>") == 1, f"{page.relative_to(site)}: not the one skeleton"


def test_a_page_title_is_escaped_once_in_the_title_and_the_heading() -> None:
    """The page's title block is its <h1> too: markup in an issue's title is text in both, escaped once."""
    issue = {"title": "torch <b>9</b> & co", "stem": "s", "files": ()}
    page = render("issue.html.j2", issue=issue, night={"date": "2026-11-23", "profile": "nightly"}, blocks=[], to_root="../../")
    assert page.count("torch &lt;b&gt;9&lt;/b&gt; &amp; co") == 2 and "<b>9</b>" not in page
