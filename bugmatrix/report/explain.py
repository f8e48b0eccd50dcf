"""What leads the report when upstream moved: new releases, and what moved under changed outcomes.

:func:`explain` adds two keys to the compat document, computed from it and
the baseline only (``releases``: :mod:`~bugmatrix.report.releases`;
``moved``: :mod:`~bugmatrix.report.envdiff`); :func:`summary_lines` is their
Markdown for ``$GITHUB_STEP_SUMMARY`` and compat.md. The HTML shows them
through ``templates/_releases.html.j2`` and ``_environment.html.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bugmatrix.report.envdiff import explain_changes
from bugmatrix.report.releases import group_headline, release_groups, release_notes

__all__ = ["LINE_LIMIT", "explain", "summary_lines"]

#: The step summary stays readable (GitHub truncates it at 1 MiB anyway); compat.json has everything.
LINE_LIMIT = 40


def explain(compat: dict[str, Any], baseline: Mapping[str, Any] | None) -> None:
    """Add ``releases`` and ``moved`` to ``compat`` (both lists; empty when nothing is new or moved)."""
    compat["releases"] = [note.to_json() for note in release_notes(compat, baseline)]
    compat["moved"] = explain_changes(baseline, compat)


def _md(text: str) -> str:
    from bugmatrix.report.render_md import escape_md

    return escape_md(text)


def summary_lines(compat: Mapping[str, Any], limit: int | None = LINE_LIMIT) -> list[str]:
    """Markdown sections for new releases (regression candidates first) and moved distributions; [] when neither."""
    lines: list[str] = []
    groups = release_groups(compat.get("releases") or [])
    if groups:
        lines += ["## New releases", ""]
        listed = 0
        for group in groups:
            lines.append(f"- {_md(group_headline(group))}")
            for note in group["notable"]:
                if limit is not None and listed >= limit:
                    break
                lines.append(f"  - {_md(note['text'])}")
                listed += 1
        hidden = sum(len(g["notable"]) for g in groups) - listed
        if hidden > 0:
            lines.append(f"- … and {hidden} more (compat.json: releases)")
        lines.append("")
    moved = compat.get("moved") or []
    if moved:
        lines += ["## Outcomes that changed since the baseline, and what moved in their cell", ""]
        for entry in moved[:limit]:
            why = "; ".join(entry["moved"]) or "no installed distribution changed"
            lines.append(f"- `{entry['variant']}` in `{entry['cell']}`: {entry['before']} → {entry['after']} — {_md(why)}")
        if limit is not None and len(moved) > limit:
            lines.append(f"- … and {len(moved) - limit} more (compat.json: moved)")
        lines.append("")
    return lines
