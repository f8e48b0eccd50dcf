"""Bad command-line input ends in one line on stderr, naming the value and the fix, with exit 2 and nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.errors import USAGE_EXIT_CODE
from tests.planfiles import plan_of_runs

ROOT = Path(__file__).resolve().parent.parent


def _one_run(tmp_path: Path) -> Path:
    """A reports dir holding one real committed run file."""
    runs = tmp_path / "reports" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(sorted((ROOT / "reports" / "runs").glob("*.json"))[0], runs)
    return runs.parent


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["bisect", "autocast_cache::core[cpu]", "torch", "--from", "abc"], ["--from", "'abc' is not a version"]),
        (["bisect", "autocast_cache::core[cpu]", "torch", "--to", "2.x"], ["--to", "'2.x'"]),
        (
            ["repro", "autocast_cache::core[cpu]", "--cell", "py311-torch2.5.1-pl2.6.6", "--out", "README.md"],
            ["--out README.md", "directory"],
        ),
        (["repro", "autocast_cache::nope[cpu]", "--cell", "py311-torch2.5.1-pl2.6.6"], ["unknown variant 'autocast_cache::nope[cpu]'"]),
        (["report", "--baseline", "{tmp}/missing.json"], ["--baseline", "missing.json", "no such file"]),
        (["report", "--plan", "{tmp}/missing-plan.json"], ["--plan", "missing-plan.json"]),
        (["report", "--step-summary", "cases"], ["--step-summary cases", "is a directory"]),
        (["report", "--step-summary", "/nonexistent/dir/x.md"], ["--step-summary /nonexistent/dir/x.md", "no such directory"]),
        (["report", "--history", "cases"], ["--history cases", "is a directory"]),
        (["report", "--profile", "smoke", "--readme", "README.md"], ["--readme README.md without --publish only", "leave out --profile"]),
        (["plan", "--out", "cases"], ["--out cases", "is a directory"]),
        (["plan", "--out", "cases/plan.json"], ["--out cases/plan.json", "inside", "cases"]),
        (["repro", "autocast_cache::core[cpu]", "--out", "cases"], ["--out cases", "inside", "cases"]),
        (["repro", "autocast_cache::core[cpu]", "--out", "cases/sub"], ["--out cases/sub", "inside"]),
        (["repro", "autocast_cache::core[cpu]", "--out", "{tmp}/foreign"], ["foreign", "holds notes.txt", "--force"]),
        (["bisect", "autocast_cache::core[cpu]", "torch", "--out", "cases"], ["--out cases", "is a directory"]),
        (["bisect", "autocast_cache::core[cpu]", "torch", "--out", "cases/x.json"], ["--out cases/x.json", "inside"]),
        (["bisect", "autocast_cache::core[cpu]", "torch", "--timeout", "-1"], ["--timeout", "'-1' is not a positive number of seconds"]),
        (["bisect", "autocast_cache::core[cpu]", "torch", "--timeout", "nan"], ["--timeout", "'nan'"]),
        (["plan", "--profile", ""], ["--profile", "an empty name"]),
        (["repro", "autocast_cache::core[cpu]", "--cell", ""], ["--cell", "an empty name"]),
        (["report", "--profile", " "], ["--profile", "an empty name"]),
        (["reresolve", "--jobs", "0"], ["--jobs", "'0' is not a whole number of at least 1"]),
        (["plan", "--out", "/proc/x.json"], ["--out /proc/x.json"]),
        (["report", "--history", "/proc/x/h.jsonl"], ["--history /proc/x/h.jsonl"]),
    ],
    ids=[
        "bisect-from", "bisect-to", "repro-out-is-a-file", "repro-unknown-variant", "report-missing-baseline", "report-missing-plan",
        "report-step-summary-dir", "report-step-summary-no-dir", "report-history-dir", "report-readme-without-publish",
        "plan-out-dir", "plan-out-in-cases", "repro-out-cases", "repro-out-in-cases", "repro-out-foreign", "bisect-out-dir",
        "bisect-out-in-cases", "bisect-timeout-negative", "bisect-timeout-nan", "plan-profile-empty", "repro-cell-empty",
        "report-profile-blank", "reresolve-jobs-zero", "plan-out-proc", "report-history-proc",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], names: list[str]
) -> None:
    monkeypatch.chdir(ROOT)
    reports = _one_run(tmp_path)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("a user's work")
    before = {p: p.stat().st_mtime_ns for p in reports.rglob("*")}
    cases = {p: p.stat().st_mtime_ns for p in (ROOT / "cases").rglob("*")}
    readme = (ROOT / "README.md").read_bytes()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "report":
        argv += ["--reports", str(reports)]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    assert code == USAGE_EXIT_CODE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bugmatrix: error: "), err
    for name in names:
        assert name in err, err
    assert (ROOT / "README.md").read_bytes() == readme
    assert {p: p.stat().st_mtime_ns for p in reports.rglob("*")} == before, "nothing may be written on bad input"
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "cases").rglob("*")} == cases, "nothing lands in the catalogue"
    assert [p.name for p in (tmp_path / "foreign").iterdir()] == ["notes.txt"]


#: Every step of the benchmark and the pool that runs a profile: each builds environments (5.3 GB for the benchmark's first).
BUILDERS = {
    "bugmatrix.tools.benchmark": ("measure_report", "measure_report_with_history", "measure_nightly_reuse"),
    "bugmatrix.tools.benchmark.cells": (
        "measure_builds", "measure_runners", "measure_sessions", "measure_smoke", "measure_lean_cost",
        "measure_disk", "measure_ci_cache", "measure_full",
    ),
    "bugmatrix.tools.run_profile": ("run_cells",),
}  # fmt: skip


@pytest.fixture
def nothing_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever would build or measure, refused: bad options must be refused before the first of them (issue 45, item 10)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an environment would be built before the options were checked")

    for module, names in BUILDERS.items():
        for name in names:
            monkeypatch.setattr(f"{module}.{name}", refuse)


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["report", "--profile", "x) [pwned](https://evil.example/) ("], ["--profile", "not a profile name"]),
        (["report", "--profile", "nightly\n@octocat"], ["--profile", "not a profile name"]),
        (["plan", "--profile", "Nightly"], ["--profile", "'Nightly': not a profile name"]),
        (["lock", "--profile", "gpu-nightly", "--check"], ["--profile", "not a profile name"]),
        (["cachesize", "--profile", ""], ["--profile", "an empty name"]),
        (["site", "--reports", ".", "--out", "x", "--date", "2026-11-23", "--profile", "a/b"], ["--profile", "not a profile name"]),
        (["run", "--profile", ""], ["--profile", "an empty name"]),
        (["run", "--jobs", "0"], ["--jobs", "'0' is not a whole number of at least 1"]),
        (["run", "--reuse-from", "/nonexistent"], ["--reuse-from", "/nonexistent: no such directory"]),
        (["repro", "autocast_cache::core[cpu]", "--reports", "/nonexistent"], ["--reports", "/nonexistent: no such directory"]),
        (["plan", "--compute", "smoke", "--reference", "/nonexistent.json"], ["--reference", "no such directory"]),
        (["benchmark", "--repeat", "0"], ["--repeat", "'0' is not a whole number of at least 1"]),
        (["benchmark", "--repeat", "-1"], ["--repeat", "'-1'"]),
        (["benchmark", "--out", "/proc/x.json"], ["--out /proc/x.json", "cannot write into /proc"]),
        (["benchmark", "--new-release", "foo"], ["--new-release", "'foo' is not AXIS=VERSION"]),
        (["benchmark", "--new-release", "torch=2.16.0"], ["--new-release: only with --nightly-reuse"]),
        (["benchmark", "--nightly-reuse", "--new-release", "nope=1.0"], ["--new-release nope=1.0", "nope is not an axis"]),
        (["benchmark", "--nightly-reuse", "--nightly-profile", "nope"], ["--nightly-profile nope: not a profile"]),
        (["stability", "--repeat", "0"], ["--repeat", "'0' is not a whole number of at least 1"]),
        (["site", "--reports", ".", "--out", "x", "--date", "2026-11-23", "--keep", "0"], ["--keep", "'0'"]),
    ],
    ids=[
        "report-profile-markdown", "report-profile-newline", "plan-profile-uppercase", "lock-profile-gpu", "cachesize-profile-empty",
        "site-profile-slash", "run-profile-empty", "run-jobs-zero", "run-reuse-from-missing", "repro-reports-missing",
        "plan-reference-missing", "benchmark-repeat-zero", "benchmark-repeat-negative", "benchmark-out-proc", "benchmark-new-release-foo",
        "benchmark-new-release-without-nightly", "benchmark-new-release-unknown-axis", "benchmark-nightly-profile-unknown",
        "stability-repeat-zero", "site-keep-zero",
    ],
)  # fmt: skip
def test_every_option_is_checked_where_it_is_parsed_before_anything_builds(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    nothing_builds: None,
    argv: list[str],
    names: list[str],
) -> None:
    """Issue 45, items 9 and 10: each of these was accepted (a profile into the issue bodies' links, builds, a silent default)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("BUGMATRIX_REPORTS", str(tmp_path / "reports"))
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == USAGE_EXIT_CODE, err
    assert err.count("\n") == 1 and err.startswith("bugmatrix: error: "), err
    for name in names:
        assert name in err, err
    assert not (tmp_path / "reports").exists(), "nothing may be written on bad input"


@pytest.mark.parametrize(
    "profile",
    ["x) [pwned](https://evil.example/) (", "nightly\n<img src=x onerror=alert(1)> @octocat", ""],
    ids=["markdown", "newline", "empty"],
)
def test_a_plan_documents_profile_follows_the_one_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str], profile: str) -> None:
    """Issue 45, item 9: ``report --plan p.json`` put the plan's profile into the issue bodies' links, unescaped."""
    reports = _one_run(tmp_path)
    plan = Path(plan_of_runs(reports, "smoke"))
    plan.write_text(plan.read_text().replace('"profile": "smoke"', f'"profile": {json.dumps(profile)}'))
    bodies = tmp_path / "bodies"
    argv = ["report", "--reports", str(reports), "--plan", str(plan), "--issue-bodies", str(bodies), "--history", str(tmp_path / "h")]
    assert main([*argv, "--site-url", "https://o.github.io/r"]) == USAGE_EXIT_CODE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--plan {plan}: profile" in err and "not a profile name" in err, err
    assert not bodies.exists() and not (reports / "compat.json").exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--bugmatrix-timeout", "-1"], "argument --bugmatrix-timeout: '-1' is not a positive number of seconds"),
        (["--bugmatrix-timeout", "nan"], "argument --bugmatrix-timeout: 'nan' is not a positive number of seconds"),
        (["--bugmatrix-cell-deadline", "-5"], "argument --bugmatrix-cell-deadline: '-5' is not a number of seconds"),
        (["-n", "-2"], "-n -2: give a number of xdist workers"),
    ],
    ids=["timeout-negative", "timeout-nan", "deadline-negative", "xdist-negative"],
)
def test_a_cells_pytest_options_are_checked_before_any_variant_runs(tmp_path: Path, argv: list[str], said: str) -> None:
    """``--bugmatrix-timeout -1`` or ``nan`` recorded every variant ``different`` and filed 20 "new failure mode" bodies."""
    run_file = tmp_path / "runs" / "system.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "cases/autocast_cache.py", "--bugmatrix-cell", "system"]
    done = subprocess.run(
        [*command, "--bugmatrix-run-file", str(run_file), *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]  # pytest's usage error
    assert said in done.stderr, done.stderr
    assert not run_file.exists(), "no variant ran"
