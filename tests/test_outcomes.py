"""Outcomes as values: classify_outcome, Signature families and judge (pure, no torch)."""

from __future__ import annotations

import re

import pytest

from bugmatrix.cell.outcomes import MESSAGE_LIMIT, Outcome, Signature, Verdict, classify_outcome, excerpt, judge

GRAD = Signature(r"element 0 of tensors does not require grad and does not have a grad_fn")
#: The encoder case's family, as declared in cases/encoder_bf16_eval.py.
ENCODER = Signature(
    r"mat1 and mat2 must have the same dtype",
    r"expected scalar type (BFloat16|Half|Float) but found (Float|BFloat16|Half)",
)
GRAD_ERROR = RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")


def test_outcome_values_are_the_documented_words() -> None:
    """Run files and reports store these strings; renaming one breaks every old run file."""
    assert {o.value for o in Outcome} == {"reproduced", "fixed", "different", "skipped", "crashed", "timeout", "install-failed", "missing"}


def test_signature_match_is_reproduced_with_the_message() -> None:
    """The documented error is `reproduced`, and the evidence (type + message) is kept."""
    result = classify_outcome(GRAD, GRAD_ERROR)
    assert result.outcome is Outcome.REPRODUCED and result.signature_matched
    assert result.message.startswith("RuntimeError: element 0 of tensors")


def test_other_exception_is_different_with_its_message() -> None:
    """A failure that is not the bug is a new failure mode, shown with its own message."""
    result = classify_outcome(GRAD, ValueError("shapes (2,3) and (4,5) not aligned"))
    assert result.outcome is Outcome.DIFFERENT and not result.signature_matched
    assert result.message == "ValueError: shapes (2,3) and (4,5) not aligned"


def test_exception_wins_over_checks() -> None:
    """A variant that raised is judged by its exception, whatever checks were passed alongside."""
    assert classify_outcome(GRAD, GRAD_ERROR, {"ok": True}).outcome is Outcome.REPRODUCED


def test_signature_sees_the_exception_type() -> None:
    """Patterns match "Type: message", so a signature can insist on the exception type."""
    typed = Signature(r"^RuntimeError: element 0")
    assert classify_outcome(typed, GRAD_ERROR).outcome is Outcome.REPRODUCED
    assert classify_outcome(typed, ValueError(str(GRAD_ERROR))).outcome is Outcome.DIFFERENT


@pytest.mark.parametrize("checks", [None, {}], ids=["none", "empty"])
def test_no_exception_alone_is_not_fixed(checks: dict[str, bool] | None) -> None:
    """Running to the end without a positive check proves nothing: `different`, never `fixed`."""
    result = classify_outcome(GRAD, None, checks)
    assert result.outcome is Outcome.DIFFERENT and "no positive check" in result.message


def test_a_false_check_is_different_and_named() -> None:
    """The message names the check that failed (and only that one)."""
    result = classify_outcome(GRAD, None, {"grads finite": True, "output is bfloat16": False})
    assert result.outcome is Outcome.DIFFERENT
    assert "output is bfloat16" in result.message and "grads finite" not in result.message


def test_all_checks_true_is_fixed() -> None:
    """Fixed needs every positive check to hold; the message lists them."""
    result = classify_outcome(GRAD, None, {"grads finite": True, "loss has grad_fn": True})
    assert result.outcome is Outcome.FIXED and not result.signature_matched
    assert "grads finite" in result.message and "loss has grad_fn" in result.message


@pytest.mark.parametrize(
    "message",
    [
        "mat1 and mat2 must have the same dtype, but got BFloat16 and Float",  # torch >= 2.2 wording
        "expected scalar type BFloat16 but found Float",  # torch 2.0/2.1 wording
        "expected scalar type Half but found Float",  # fp16 on CUDA
    ],
)
def test_encoder_family_matches_every_wording(message: str) -> None:
    """Torch rewords the encoder error across releases; every wording is the same bug."""
    result = classify_outcome(ENCODER, RuntimeError(message))
    assert result.outcome is Outcome.REPRODUCED and result.signature_matched


def test_encoder_family_rejects_unrelated_dtype_errors() -> None:
    """A family is not a wildcard: another dtype error stays `different`."""
    result = classify_outcome(ENCODER, RuntimeError("Input type (float) and bias type (c10::BFloat16) should be the same"))
    assert result.outcome is Outcome.DIFFERENT


def test_signature_is_validated_at_declaration() -> None:
    """A broken regex or an empty family fails when the case is imported, not at the first run."""
    with pytest.raises(re.error):
        Signature(r"(unclosed")
    with pytest.raises(ValueError, match="at least one pattern"):
        Signature()


def test_long_messages_are_cut_to_the_limit() -> None:
    """Run files keep the head of a long message (where the error line is), bounded."""
    result = classify_outcome(GRAD, RuntimeError("x" * 5000))
    assert len(result.message) == MESSAGE_LIMIT and result.message.startswith("RuntimeError: xxx")
    assert excerpt("  short  ") == "short"


@pytest.mark.parametrize(
    ("observed", "expected", "verdict"),
    [
        (Outcome.REPRODUCED, Outcome.REPRODUCED, Verdict.AS_EXPECTED),
        (Outcome.FIXED, Outcome.FIXED, Verdict.AS_EXPECTED),
        (Outcome.REPRODUCED, Outcome.FIXED, Verdict.REGRESSION),
        (Outcome.FIXED, Outcome.REPRODUCED, Verdict.UNEXPECTED_FIX),
        (Outcome.DIFFERENT, Outcome.REPRODUCED, Verdict.NEW_FAILURE_MODE),
        (Outcome.DIFFERENT, Outcome.FIXED, Verdict.NEW_FAILURE_MODE),
        (Outcome.CRASHED, Outcome.FIXED, Verdict.NEW_FAILURE_MODE),
        (Outcome.TIMEOUT, Outcome.REPRODUCED, Verdict.NEW_FAILURE_MODE),
        (Outcome.REPRODUCED, None, Verdict.NEW),
        (Outcome.CRASHED, None, Verdict.NEW),
        (Outcome.SKIPPED, Outcome.FIXED, Verdict.NOT_RUN),
        (Outcome.SKIPPED, None, Verdict.NOT_RUN),
        (Outcome.INSTALL_FAILED, Outcome.REPRODUCED, Verdict.NOT_RUN),
    ],
)
def test_judge(observed: Outcome, expected: Outcome | None, verdict: Verdict) -> None:
    """Every verdict, including the order of precedence (not-run before new before the rest)."""
    assert judge(observed, expected) is verdict


def test_judge_covers_every_verdict() -> None:
    """No verdict is unreachable: the table above exercises each one."""
    reached = {
        judge(o, e) for o in Outcome for e in (None, Outcome.REPRODUCED, Outcome.FIXED, Outcome.DIFFERENT)
    }  # fmt: skip
    assert reached == set(Verdict)
