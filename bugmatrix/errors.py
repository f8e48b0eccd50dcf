"""The one exception type that reaches a person.

Every bad input (a malformed ``matrix.toml``, a corrupt run file, an unknown case
or cell on the command line, a bisect range with no releases) is raised as a
:class:`BugmatrixError` with a one-line message that names the file, key and value
and says what to do. The CLI catches it once, prints the line and exits with 2.
"""

from __future__ import annotations

__all__ = ["USAGE_EXIT_CODE", "BugmatrixError"]

#: Exit code for bad input, as argparse and nox use for usage errors.
USAGE_EXIT_CODE = 2


class BugmatrixError(Exception):
    """A user-facing, one-line, actionable error."""

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would hide the actionable part.
        super().__init__(" ".join(message.split()))
