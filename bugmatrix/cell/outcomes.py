"""Outcomes as values: what a variant did (:func:`classify_outcome`), and its verdict against the expectation (:func:`judge`)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MESSAGE_LIMIT", "Classified", "Kind", "Outcome", "Signature", "Verdict", "classify_outcome", "excerpt", "judge", "tail"]

#: Longest message kept in a run file: the error line plus context. Longer ones say how much was cut.
MESSAGE_LIMIT = 600
#: Longest log (traceback) kept per variant; the tail is kept, where the error is.
LOG_LIMIT = 3000


class Outcome(str, enum.Enum):
    """How one variant ended in one environment (see DESIGN.md, "Outcomes").

    Each member is (value, ``symbol``: works without colour, the report never relies on colour alone; ``code``: its
    one letter in the history file; ``verb``: a flip into it on a picture, "fixed in torch 2.11.0").
    """

    symbol: str
    code: str
    verb: str

    def __new__(cls, value: str, symbol: str, code: str, verb: str) -> Outcome:
        member = str.__new__(cls, value)
        member._value_ = value
        member.symbol, member.code, member.verb = symbol, code, verb
        return member

    REPRODUCED = ("reproduced", "✗", "R", "reproduced from")
    FIXED = ("fixed", "✓", "F", "fixed in")
    DIFFERENT = ("different", "≠", "D", "fails differently from")
    SKIPPED = ("skipped", "–", "S", "skipped from")
    CRASHED = ("crashed", "‼", "C", "crashes from")
    TIMEOUT = ("timeout", "∞", "T", "hangs from")
    INSTALL_FAILED = ("install-failed", "⚠", "I", "install-failed from")
    MISSING = ("missing", "?", "M", "missing from")  # planned, but no run recorded it: never written by a cell, only by the report

    @property
    def label(self) -> str:
        """``✗ reproduced``: the form every rendered table uses."""
        return f"{self.symbol} {self.value}"

    @property
    def ran(self) -> bool:
        """False for outcomes of a variant that did not run at all."""
        return self not in (Outcome.SKIPPED, Outcome.INSTALL_FAILED, Outcome.MISSING)

    def __str__(self) -> str:
        return self.value


class Verdict(str, enum.Enum):
    """Observed outcome against the declared expectation."""

    AS_EXPECTED = "as-expected"
    REGRESSION = "regression"  # expected fixed, the bug is back
    UNEXPECTED_FIX = "unexpected-fix"  # expected reproduced, it now works
    NEW_FAILURE_MODE = "new-failure-mode"  # failed another way, crashed or hung
    NEW = "new"  # no expectation covers this environment: recorded, not judged
    NOT_RUN = "not-run"  # skipped or not installable: nothing to judge

    @property
    def flagged(self) -> bool:
        """A verdict a maintainer must look at: renderers mark it beyond the symbol."""
        return self in (Verdict.REGRESSION, Verdict.UNEXPECTED_FIX, Verdict.NEW_FAILURE_MODE)

    def __str__(self) -> str:
        return self.value


class Kind(str, enum.Enum):
    """What a variant is to its case."""

    CORE = "core"  # the smallest plain-torch program
    FRAMEWORK = "framework"  # the seed's own setup (Lightning Trainer, transformers)
    WORKAROUND = "workaround"  # a documented way around a core/framework variant
    UPSTREAM = "upstream"  # upstream's own reproduction or regression test, adapted

    @property
    def order(self) -> int:
        """Display order: the bug, then upstream's evidence, then the ways around it."""
        return (Kind.CORE, Kind.FRAMEWORK, Kind.UPSTREAM, Kind.WORKAROUND).index(self)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Signature:
    """A family of regexes that all mean "this is the documented bug" (torch rewords errors across releases)."""

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
    """The head of a long message (the first lines carry the error), saying how much was cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    marker = f" … [{len(text) - limit:,} characters cut]"
    return text[: max(0, limit - len(marker))] + marker


def tail(text: str, limit: int = LOG_LIMIT) -> str:
    """The tail of a long log (a traceback ends with the error), saying how much was cut."""
    if len(text) <= limit:
        return text
    marker = f"[{len(text) - limit:,} characters cut] … "
    return marker + text[-(limit - len(marker)) :]


def classify_outcome(
    signature: Signature,
    error: BaseException | None = None,
    checks: Mapping[str, bool] | None = None,
) -> Classified:
    """One outcome from a variant's exception or checks: "fixed" needs at least one check, all true."""
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
    return Classified(Outcome.FIXED, excerpt("checks held: " + "; ".join(checks)))


def judge(observed: Outcome, expected: Outcome | None) -> Verdict:
    """Name the difference between what happened and what was declared."""
    if not observed.ran:
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
