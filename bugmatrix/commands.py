"""Subcommands beyond ``plan``: report, bisect, repro (registered on the CLI parser)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the report/bisect/repro subcommands."""
