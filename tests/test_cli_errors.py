"""Bad command-line input ends in one line on stderr, naming the value and the fix, with exit 2 and nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.errors import USAGE_EXIT_CODE

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
