"""What leads the report when upstream moved: new releases, and what moved under changed outcomes.

:func:`explain` adds two keys to the compat document, computed from it and
the baseline only (``releases``: :mod:`~bugmatrix.releases.notes`;
``moved``: :mod:`~bugmatrix.report.envdiff`). Their Markdown (compat.md and
``$GITHUB_STEP_SUMMARY``) is ``render_md.explained_lines``; the HTML shows them
through ``templates/_releases.html.j2`` and ``_environment.html.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bugmatrix.releases.notes import release_notes
from bugmatrix.report.envdiff import explain_changes

__all__ = ["explain"]


def explain(compat: dict[str, Any], baseline: Mapping[str, Any] | None) -> None:
    """Add ``releases`` and ``moved`` to ``compat`` (both lists; empty when nothing is new or moved)."""
    compat["releases"] = [note.to_json() for note in release_notes(compat, baseline)]
    compat["moved"] = explain_changes(baseline, compat)
