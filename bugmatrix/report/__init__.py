"""From run files to what maintainers read: compat.json, compat.md, index.html."""

from __future__ import annotations

__all__ = ["SYMBOLS", "label"]

#: Every outcome has a symbol *and* a word; colour is only ever an addition.
SYMBOLS = {
    "reproduced": "✗",
    "fixed": "✓",
    "different": "≠",
    "skipped": "–",
    "crashed": "‼",
    "timeout": "∞",
    "install-failed": "⚠",
}


def label(outcome: str) -> str:
    """``✗ reproduced``: the form used in every rendered table."""
    return f"{SYMBOLS.get(outcome, '?')} {outcome}"
