"""The exception types that reach a person, and the exit codes they end in (CI tells a regression from a full disk)."""

from __future__ import annotations

__all__ = ["EXIT_MEANINGS", "FINDINGS_EXIT_CODE", "USAGE_EXIT_CODE", "WRITE_EXIT_CODE", "BugmatrixError", "OutputError"]

#: Exit code of ``report --fail-on-regression`` when a result is missing, regressed or does not install.
FINDINGS_EXIT_CODE = 1
#: Exit code for bad input, as argparse and nox use for usage errors.
USAGE_EXIT_CODE = 2
#: Exit code when an output could not be written; nothing was replaced.
WRITE_EXIT_CODE = 3
#: What each exit code says, for a wrapper that can only pass "failed" on (nox): its last line names the exit.
EXIT_MEANINGS = {
    FINDINGS_EXIT_CODE: "a missing, regressed or uninstallable result",
    USAGE_EXIT_CODE: "bad input",
    WRITE_EXIT_CODE: "could not write",
}


class BugmatrixError(Exception):
    """A user-facing, one-line, actionable error."""

    exit_code = USAGE_EXIT_CODE

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class OutputError(BugmatrixError):
    """An output could not be written (disk full, permission); the previous outputs are all as they were."""

    exit_code = WRITE_EXIT_CODE
