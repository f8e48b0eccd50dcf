"""Every relative link in the README and docs/ resolves: the file exists, and an ``#anchor`` is a heading there.

The README was split into docs/ (issue 35); a moved section must not leave a
dead link behind. Anchors are GitHub's heading slugs, computed the way GitHub
computes them (lowercase, punctuation dropped, spaces to hyphens, ``-1`` for a
repeat), from headings outside code fences.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "cases" / "README.md", *(ROOT / "docs").glob("*.md")])
#: ``[text](target)`` and ``![alt](target)``; a title after the target (``"..."``) is allowed.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
README_LINES = 250


def _outside_code(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    kept, fence = [], ""
    for line in text.splitlines():
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker and (
            not fence
            or (marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) and not stripped[len(marker.group(1)) :].strip())
        ):
            fence = "" if fence else marker.group(1)
            continue
        if not fence:
            kept.append(line)
    return kept


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _outside_code(page.read_text(encoding="utf-8")):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The link targets of a page; a link written inside code (a fence or a span) is text, not a link."""
    lines = [re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line) for line in _outside_code(page.read_text(encoding="utf-8"))]
    return [m.group(1) for line in lines for m in LINK.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    dead = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            dead.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            dead.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not dead, f"{page.relative_to(ROOT)}: " + "; ".join(dead)


def test_the_readme_fits_in_one_sitting_and_links_every_docs_page() -> None:
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= README_LINES
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(readme)}
    assert {p.resolve() for p in (ROOT / "docs").glob("*.md")} <= linked, "a docs/ page the README does not point to"


def test_the_checker_finds_a_dead_link_and_a_wrong_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A `code` title: here\n\n[ok](#a-code-title-here) [bad](#nope) [gone](missing.md) `[not](a-link.md)`\n```\n[x](y.md)\n```\n"
    )
    assert anchors(page) == {"a-code-title-here"}
    assert links(page) == ["#a-code-title-here", "#nope", "missing.md"]
