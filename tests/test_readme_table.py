"""The README's table is generated from a report, between markers, and only with --publish."""

from __future__ import annotations

from pathlib import Path

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.report.night import analyse
from bugmatrix.report.readme import END, START, check_readme, readme_table, readme_text
from tests.fullscale import full_compat

ROOT = Path(__file__).resolve().parent.parent


def test_the_table_has_one_row_per_drawn_variant_with_its_boundary() -> None:
    compat = full_compat()
    table = readme_table(analyse(compat))
    assert "| `autocast_cache::core[cpu]` |" in table
    row = next(line for line in table.splitlines() if line.startswith("| `autocast_cache::core[cpu]`"))
    assert "✗" in row and "→" in row, row
    assert "cache\\_disabled ✓" in row, "run data goes through the one Markdown escaping helper"
    assert f"`{compat.profile}` run" in table


def test_only_the_block_between_the_markers_is_rewritten(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{START}\nold table\n{END}\n\nafter\n", encoding="utf-8")
    text = readme_text(readme, analyse(full_compat()))
    assert text.startswith("# title\n\nbefore\n") and text.endswith(f"{END}\n\nafter\n")
    assert "old table" not in text and "autocast_cache::core[cpu]" in text
    readme.write_text(text, encoding="utf-8")
    assert readme_text(readme, analyse(full_compat())) == text, "regenerating is idempotent"


def test_a_readme_without_markers_is_one_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(BugmatrixError) as info:
        check_readme(readme)
    assert "\n" not in str(info.value) and "no table markers" in str(info.value)


def test_the_real_readme_has_the_markers() -> None:
    check_readme(ROOT / "README.md")
