"""Outcomes as values: what a variant did, and how that compares to what was expected.

A variant either raises or returns its positive checks. :func:`classify_outcome`
turns that into exactly one :class:`Outcome`; :func:`judge` compares it to the
expectation and names the verdict a maintainer cares about (regression,
unexpected fix, new failure mode, new version). Nothing here imports torch.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Classified",
    "Outcome",
    "Signature",
    "Verdict",
    "classify_outcome",
    "excerpt",
    "judge",
]

#: Longest message kept in a run file; enough for an error line plus context.
MESSAGE_LIMIT = 600


class Outcome(str, enum.Enum):
    """How one variant ended in one environment (see DESIGN.md, "Outcomes")."""

    REPRODUCED = "reproduced"
    FIXED = "fixed"
    DIFFERENT = "different"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    INSTALL_FAILED = "install-failed"


class Verdict(str, enum.Enum):
    """Observed outcome against the declared expectation."""

    AS_EXPECTED = "as-expected"
    REGRESSION = "regression"  # expected fixed, the bug is back
    UNEXPECTED_FIX = "unexpected-fix"  # expected reproduced, it now works
    NEW_FAILURE_MODE = "new-failure-mode"  # failed another way, crashed or hung
    NEW = "new"  # no expectation covers this environment: recorded, not judged
    NOT_RUN = "not-run"  # skipped or not installable: nothing to judge


@dataclass(frozen=True)
class Signature:
    """A family of regexes that all mean "this is the documented bug".

    Families exist because torch rewords errors across releases: the encoder bug
    reads ``expected scalar type BFloat16 but found Float`` in torch 2.0/2.1 and
    ``mat1 and mat2 must have the same dtype`` later; both are the same bug.
    """

    patterns: tuple[str, ...]

    def __init__(self, *patterns: str) -> None:
        if not patterns:
            msg = "a Signature needs at least one pattern"
            raise ValueError(msg)
        for pattern in patterns:
            re.compile(pattern)  # fail at declaration, not at the first run
        object.__setattr__(self, "patterns", tuple(patterns))

    def matches(self, text: str) -> bool:
        """True when any pattern of the family is found in ``text``."""
        return any(re.search(p, text) for p in self.patterns)


@dataclass(frozen=True)
class Classified:
    """One outcome with the evidence behind it."""

    outcome: Outcome
    message: str = ""
    signature_matched: bool = False


def excerpt(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Keep the head of a long message; the first lines carry the error."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify_outcome(
    signature: Signature,
    error: BaseException | None = None,
    checks: Mapping[str, bool] | None = None,
) -> Classified:
    """Turn what a variant did into one outcome.

    ``error`` is the exception it raised (if any), ``checks`` the positive checks
    it returned. "Fixed" needs at least one check and all of them true: a variant
    that merely did not raise is *different*, never fixed.
    """
    if error is not None:
        text = f"{type(error).__name__}: {error}"
        if signature.matches(text):
            return Classified(Outcome.REPRODUCED, excerpt(text), signature_matched=True)
        return Classified(Outcome.DIFFERENT, excerpt(text))
    if not checks:
        return Classified(Outcome.DIFFERENT, "ran to the end but made no positive check")
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        return Classified(Outcome.DIFFERENT, excerpt("check failed: " + "; ".join(failed)))
    return Classified(Outcome.FIXED, "checks held: " + "; ".join(checks))


def judge(observed: Outcome, expected: Outcome | None) -> Verdict:
    """Name the difference between what happened and what was declared."""
    if observed in (Outcome.SKIPPED, Outcome.INSTALL_FAILED):
        return Verdict.NOT_RUN
    if expected is None:
        return Verdict.NEW
    if observed is expected:
        return Verdict.AS_EXPECTED
    if observed is Outcome.REPRODUCED and expected is Outcome.FIXED:
        return Verdict.REGRESSION
    if observed is Outcome.FIXED and expected is Outcome.REPRODUCED:
        return Verdict.UNEXPECTED_FIX
    return Verdict.NEW_FAILURE_MODE
