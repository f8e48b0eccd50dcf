"""Pure unit tests: outcome classification, verdicts, expectations, run files (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bugmatrix.case import Case, Expect
from bugmatrix.errors import BugmatrixError
from bugmatrix.outcomes import Outcome, Signature, Verdict, classify_outcome, judge
from bugmatrix.runfile import SCHEMA, RunRecord, VariantRecord, load_run_file, write_json_atomic

GRAD = Signature(r"element 0 of tensors does not require grad")
ENCODER = Signature(
    r"mat1 and mat2 must have the same dtype", r"expected scalar type (BFloat16|Half|Float) but found (Float|BFloat16|Half)"
)


def test_signature_match_is_reproduced() -> None:
    result = classify_outcome(GRAD, RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn"))
    assert result.outcome is Outcome.REPRODUCED and result.signature_matched


def test_other_exception_is_different_with_its_message() -> None:
    result = classify_outcome(GRAD, ValueError("shape mismatch"))
    assert result.outcome is Outcome.DIFFERENT and "ValueError: shape mismatch" in result.message


def test_no_exception_without_checks_is_not_fixed() -> None:
    assert classify_outcome(GRAD, None, {}).outcome is Outcome.DIFFERENT
    assert classify_outcome(GRAD, None, None).outcome is Outcome.DIFFERENT


def test_a_failed_check_is_different_and_named() -> None:
    result = classify_outcome(GRAD, None, {"grads finite": True, "dtype is bf16": False})
    assert result.outcome is Outcome.DIFFERENT and "dtype is bf16" in result.message and "grads finite" not in result.message


def test_all_checks_true_is_fixed() -> None:
    assert classify_outcome(GRAD, None, {"grads finite": True}).outcome is Outcome.FIXED


@pytest.mark.parametrize(
    "message",
    [
        "mat1 and mat2 must have the same dtype, but got BFloat16 and Float",
        "expected scalar type BFloat16 but found Float",
        "expected scalar type Float but found BFloat16",
    ],
)
def test_encoder_signature_family_matches_every_wording(message: str) -> None:
    assert classify_outcome(ENCODER, RuntimeError(message)).outcome is Outcome.REPRODUCED


def test_signature_rejects_bad_regex_at_declaration() -> None:
    with pytest.raises(Exception, match=r"unterminated|missing"):
        Signature(r"(unclosed")


@pytest.mark.parametrize(
    ("observed", "expected", "verdict"),
    [
        (Outcome.REPRODUCED, Outcome.REPRODUCED, Verdict.AS_EXPECTED),
        (Outcome.REPRODUCED, Outcome.FIXED, Verdict.REGRESSION),
        (Outcome.FIXED, Outcome.REPRODUCED, Verdict.UNEXPECTED_FIX),
        (Outcome.DIFFERENT, Outcome.FIXED, Verdict.NEW_FAILURE_MODE),
        (Outcome.CRASHED, Outcome.REPRODUCED, Verdict.NEW_FAILURE_MODE),
        (Outcome.TIMEOUT, Outcome.FIXED, Verdict.NEW_FAILURE_MODE),
        (Outcome.FIXED, None, Verdict.NEW),
        (Outcome.SKIPPED, Outcome.FIXED, Verdict.NOT_RUN),
        (Outcome.INSTALL_FAILED, None, Verdict.NOT_RUN),
    ],
)
def test_judge_names_every_verdict(observed: Outcome, expected: Outcome | None, verdict: Verdict) -> None:
    assert judge(observed, expected) is verdict


def test_expect_compares_base_versions_and_devices() -> None:
    expect = Expect("reproduced", torch="<2.11", device="cpu")
    assert expect.covers({"torch": "2.10.0+cu128"}, "cpu")
    assert not expect.covers({"torch": "2.11.0+cpu"}, "cpu")
    assert not expect.covers({"torch": "2.10.0"}, "cuda")
    assert not expect.covers({}, "cpu"), "an axis that is not installed is not covered"


def test_expect_rejects_a_bad_specifier() -> None:
    with pytest.raises(ValueError, match=r"torch='2\.x'"):
        Expect("fixed", torch="2.x")


def _case() -> Case:
    case = Case(id="demo", title="demo", seed="000", signature=GRAD)

    @case.variant(
        devices=(("cuda", "float16"), ("cpu", "bfloat16")),
        axes=("torch", "lightning"),
        expect=(
            Expect("fixed", torch=">=2.11"),
            Expect("fixed", lightning=">=2.5.5"),
            Expect("reproduced", torch="<2.11", lightning="<2.5.5"),
        ),
    )
    def core(device: str, dtype: object) -> dict[str, bool]:
        return {"ok": True}

    return case


def test_variant_registers_once_per_device_with_stable_ids() -> None:
    variants = _case().variants
    assert [v.id for v in variants] == ["demo::core[cuda]", "demo::core[cpu]"]
    assert variants[1].dtype == "bfloat16" and variants[1].axes == ("torch", "lightning")


@pytest.mark.parametrize(
    ("versions", "outcome"),
    [
        ({"torch": "2.5.1", "lightning": "2.0.3"}, Outcome.REPRODUCED),
        ({"torch": "2.5.1", "lightning": "2.5.5"}, Outcome.FIXED),
        ({"torch": "2.11.0", "lightning": "2.0.3"}, Outcome.FIXED),
    ],
)
def test_first_matching_expectation_wins(versions: dict[str, str], outcome: Outcome) -> None:
    found = _case().variants[1].expectation(versions)
    assert found is not None and found.outcome is outcome


def test_no_expectation_means_new() -> None:
    assert _case().variants[1].expectation({"torch": "2.5.1"}) is None  # lightning missing: nothing covers it


def _record(**overrides: object) -> VariantRecord:
    fields = {
        "id": "demo::core[cpu]", "case": "demo", "variant": "core", "device": "cpu", "kind": "core", "workaround_for": None,
        "outcome": "reproduced", "expected": "reproduced", "verdict": "as-expected", "signature_matched": True,
        "message": "RuntimeError: element 0", "duration_s": 0.1,
    }  # fmt: skip
    fields.update(overrides)
    return VariantRecord(**fields)  # type: ignore[arg-type]


def _run(results: list[VariantRecord]) -> RunRecord:
    return RunRecord(
        cell="c1",
        pins={"torch": "2.5.1"},
        environment={"torch": "2.5.1"},
        started="2026-01-01T00:00:00+00:00",
        finished="2026-01-01T00:00:09+00:00",
        results=results,
    )


def test_run_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_json_atomic(path, _run([_record()]).to_json())
    loaded = load_run_file(path)
    assert loaded.results == [_record()] and loaded.schema == SCHEMA


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"schema": "bugmatrix.run/1", "cell": "c1", "resu', "not valid JSON"),
        ('{"schema": "bugmatrix.run/99"}', "bugmatrix.run/99"),
        ("[1, 2]", "must be a JSON object"),
        ('{"schema": "bugmatrix.run/1", "cell": "c1"}', "malformed run file"),
    ],
)
def test_corrupt_run_files_are_one_line_errors(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert needle in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_outcome_in_a_run_file_is_rejected(tmp_path: Path) -> None:
    data = _run([_record()]).to_json()
    data["results"][0]["outcome"] = "exploded"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BugmatrixError, match="malformed"):
        load_run_file(path)


def test_interrupted_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    write_json_atomic(path, {"version": 1})

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("bugmatrix.runfile.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"version": 2})
    assert json.loads(path.read_text()) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"], "no temporary file left behind"
