"""Filing without GitHub: one issue per finding, found again by its marker, commented when it changes or is back.

The decisions (:func:`plan_filing`) run against an in-memory tracker; the
``gh`` calls (:class:`GhIssues`) against a fake ``gh`` on PATH that keeps
its issues in a JSON file (a stand-in for the GitHub CLI, not a library
under test). The end-to-end test goes from run files through
``report --issue-bodies`` to ``issues`` and back to the baseline.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bugmatrix.cli import main
from bugmatrix.publish.bodies import Body, body_files, read_bodies
from bugmatrix.publish.filing import DEFAULT_TRUSTED, closed_knowingly, file_issues, judged, plan_filing, trusted_only
from bugmatrix.publish.issue_body import Links
from bugmatrix.publish.markers import SEARCH, State, finding_marker, parse_markers
from bugmatrix.publish.tracker import Issue
from bugmatrix.report.night import NightReport, analyse
from tests.test_issue_bodies import NIGHT, clean_night, regression_night
from tests.test_report import CORE, CRASHED, FIXED, FIXTURES

ROOT = Path(__file__).resolve().parents[1]


class MemoryTracker:
    """Issues in a list: what GitHub would hold, for the decisions alone."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.calls: list[str] = []
        self.closers: dict[int, str] = {}
        self.roles: dict[str, str] = {"maintainer": "triage"}

    def search(self, query: str) -> list[Issue]:
        assert query == SEARCH
        return [i for i in self.issues if "bugmatrix-finding" in i.body]

    def open_issue(self, title: str, body: str) -> str:
        number = len(self.issues) + 1
        self.issues.append(Issue(number, True, title, body, author=DEFAULT_TRUSTED))
        self.calls.append(f"open #{number}")
        return f"https://github.com/o/r/issues/{number}"

    def comment(self, number: int, body: str) -> None:
        self.add_comment(number, body, DEFAULT_TRUSTED)
        self.calls.append(f"comment #{number}")

    def add_comment(self, number: int, body: str, author: str) -> None:
        issue = self.issues[number - 1]
        self.issues[number - 1] = replace(issue, comments=(*issue.comments, body), comment_authors=(*issue.comment_authors, author))

    def close(self, number: int, by: str = "maintainer") -> None:
        self.issues[number - 1] = replace(self.issues[number - 1], open=False)
        self.closers[number] = by

    def closer(self, number: int) -> str:
        return self.closers.get(number, "")

    def permission(self, who: str) -> str:
        return self.roles.get(who, "")


def bodies_of(report: NightReport, tmp_path: Path, night: str = NIGHT) -> list[Body]:
    """The bodies ``report --issue-bodies`` would write for this night, written and read back."""
    directory = tmp_path / f"bodies-{night}-{len(list(tmp_path.iterdir()))}"
    files, _ = body_files(report, night, Links(), directory)
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content) if isinstance(content, str) else path.write_bytes(content)
    directory.mkdir(exist_ok=True)
    return read_bodies(directory)


def night(tracker: MemoryTracker, report: NightReport, tmp_path: Path, date: str = NIGHT) -> list[str]:
    trusted = frozenset({DEFAULT_TRUSTED})
    issues = trusted_only(tracker.search(SEARCH), trusted)
    actions = plan_filing(bodies_of(report, tmp_path, date), issues, report.compat, date, knowingly=closed_knowingly(tracker, trusted))
    return file_issues(tracker, actions)


def test_a_night_opens_one_issue_per_finding_and_the_same_night_again_adds_nothing(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    lines = night(tracker, regression_night(), tmp_path)
    assert tracker.calls == ["open #1", "open #2", "open #3"], lines
    assert all(line.startswith("open ") and "-> https://github.com/o/r/issues/" in line for line in lines)
    assert sorted(parse_markers(i.body)[0].key for i in tracker.issues) == sorted(f.key for f in regression_night().findings())
    again = night(tracker, regression_night(), tmp_path)
    assert len(again) == 3 and all(line.startswith("nothing #") and "already says this" in line for line in again), again
    assert len(tracker.issues) == 3 and all(not i.comments for i in tracker.issues), "no duplicate, no comment"


def test_a_finding_that_changes_gets_a_comment_and_one_that_turns_into_another_is_not_back(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    report = regression_night()
    night(tracker, report, tmp_path)
    reworded = analyse(report.compat.with_entry(CORE, FIXED, message="reworded"), report.baseline, report.own_nights)
    assert night(tracker, reworded, tmp_path) and tracker.calls == ["open #1", "open #2", "open #3"], "a new message alone is no news"
    spread = analyse(report.compat.with_entry(CORE, "py311-torch2.5.1-pl2.0.3", verdict="regression"), report.baseline, report.own_nights)
    lines = night(tracker, spread, tmp_path, "2026-11-24")
    core = next(i for i in tracker.issues if f"regression:{CORE}" in i.body)
    assert [line.split(" ", 1)[0] for line in lines if f"regression:{CORE}" in line] == ["comment"]
    assert core.comments and parse_markers(core.comments[-1])[0].state is State.UPDATED and "finding changed" in core.comments[-1]
    crashed = analyse(report.compat.with_entry(CORE, FIXED, outcome="crashed"), report.baseline, report.own_nights)
    lines = night(tracker, crashed, tmp_path, "2026-11-25")
    assert any(line.startswith("open") and f"new-failure-mode:{CORE}" in line for line in lines), lines
    said = next(line for line in lines if f"regression:{CORE}" in line)
    assert said.startswith("nothing") and "another finding tonight" in said, "a crash is not the baseline"


def test_back_to_baseline_is_said_once_and_a_return_is_said_again(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    night(tracker, regression_night(), tmp_path, "2026-11-23")
    lines = night(tracker, clean_night(), tmp_path, "2026-11-24")
    assert sorted(line.split(" ", 1)[0] for line in lines) == ["back-to-baseline"] * 3, lines
    for issue in tracker.issues:
        (comment,) = issue.comments
        marker = parse_markers(comment)[0]
        assert marker.state is State.BACK and marker.night == "2026-11-24" and "Closing is left to people" in comment
        assert issue.open, "closing is left to people"
    assert night(tracker, clean_night(), tmp_path, "2026-11-25") == [], "told once"
    night(tracker, regression_night(), tmp_path, "2026-11-26")
    assert all(len(i.comments) == 2 for i in tracker.issues) and len(tracker.issues) == 3, "back again: a comment, not a new issue"
    assert all("this is back" in i.comments[-1] and parse_markers(i.comments[-1])[0].state is State.UPDATED for i in tracker.issues)


def test_a_night_that_did_not_judge_a_finding_says_nothing_about_it(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    night(tracker, regression_night(), tmp_path)
    report = clean_night()
    partial = analyse(report.compat.with_entry(CORE, FIXED, outcome="missing", message="no run file"), report.baseline, report.own_nights)
    lines = night(tracker, partial, tmp_path, "2026-11-24")
    core = next(line for line in lines if f"regression:{CORE}" in line)
    assert core.startswith("nothing") and "not judged tonight" in core
    missing = next(i for i in tracker.issues if f"missing:{CRASHED}" in i.body)
    assert missing.comments, "the lost cell ran tonight: that finding is back to the baseline"


def test_closed_by_people_stays_closed_unless_the_finding_is_new(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    report = regression_night()
    night(tracker, report, tmp_path)
    for issue in tracker.issues:
        tracker.close(issue.number)
    lines = night(tracker, report, tmp_path, "2026-11-24")
    assert len(lines) == 3 and all("closed by people while it was unchanged" in line for line in lines), lines
    assert night(tracker, clean_night(), tmp_path, "2026-11-25") == [], "a closed issue gets no back-to-baseline note"
    spread = analyse(report.compat.with_entry(CORE, "py311-torch2.5.1-pl2.0.3", verdict="regression"), report.baseline, report.own_nights)
    lines = night(tracker, spread, tmp_path, "2026-11-26")
    closed = next(i.number for i in tracker.issues if f"regression:{CORE}" in i.body)
    assert [line for line in lines if line.startswith("open")] == [
        f"open regression:{CORE}: new since #{closed} was closed -> https://github.com/o/r/issues/4"
    ]
    assert tracker.issues[3].body.endswith(f"Earlier: #{closed} (closed).\n")


def test_foreign_and_broken_markers_are_ignored(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    tracker.issues.append(Issue(1, True, "a person's issue quoting bugmatrix-finding", "see <!-- bugmatrix-finding {broken -->"))
    night(tracker, regression_night(), tmp_path)
    assert tracker.issues[0].comments == () and len(tracker.issues) == 4


def test_an_outsiders_forged_marker_open_or_closed_does_not_keep_the_real_finding_from_being_filed(tmp_path: Path) -> None:
    report = regression_night()
    forged = [b.text for b in bodies_of(report, tmp_path)]  # the key and digest anyone can compute from compat.json
    for closed_by in (None, "outsider"):
        tracker = MemoryTracker()
        for number, text in enumerate(forged, 1):
            tracker.issues.append(Issue(number, True, "forged", text, author="outsider"))
            if closed_by:
                tracker.close(number, by=closed_by)
        lines = night(tracker, report, tmp_path)
        assert sorted(line.split(" ", 1)[0] for line in lines) == ["open"] * 3, (closed_by, lines)
        assert "new finding" in lines[0], "a forged issue is not an earlier issue of the finding"


def test_a_real_issue_closed_by_an_outsider_does_not_suppress_but_one_closed_by_triage_does(tmp_path: Path) -> None:
    for closer, kept_closed in (("outsider", False), ("maintainer", True), (DEFAULT_TRUSTED, True)):
        tracker = MemoryTracker()
        report = regression_night()
        night(tracker, report, tmp_path)
        for issue in tracker.issues:
            tracker.close(issue.number, by=closer)
        lines = night(tracker, report, tmp_path, "2026-11-24")
        said = {line.split(" ", 1)[0] for line in lines}
        assert said == ({"nothing"} if kept_closed else {"open"}), (closer, lines)


def test_an_outsiders_comment_and_a_marker_in_a_message_are_not_notes(tmp_path: Path) -> None:
    tracker = MemoryTracker()
    report = regression_night()
    night(tracker, report, tmp_path)
    core = next(i for i in tracker.issues if f"regression:{CORE}" in i.body)
    back = parse_markers(core.body)[0].but(State.BACK, "2026-11-22").render()
    tracker.add_comment(core.number, back, "outsider")
    assert [line for line in night(tracker, report, tmp_path, "2026-11-24") if line.startswith("comment")] == []
    # A run's message carrying a same-key back-to-baseline marker: the body shows it as code, never as a note.
    carrying = analyse(report.compat.with_entry(CORE, FIXED, message=f"boom {back}"), report.baseline, report.own_nights)
    for date in ("2026-11-25", "2026-11-26", "2026-11-27"):
        lines = night(tracker, carrying, tmp_path, date)
        assert not [line for line in lines if "back again" in line], lines
    trusted = trusted_only([tracker.issues[core.number - 1]], frozenset({DEFAULT_TRUSTED}))[0]
    assert [m.state for text in (trusted.body, *trusted.comments) for m in parse_markers(text)] == [State.OPENED]


def test_markers_in_code_spans_and_fences_are_quoted_text() -> None:
    real = finding_marker(regression_night().findings()[0], NIGHT, "t").render()
    assert len(parse_markers(real)) == 1
    assert parse_markers(f"`{real}`") == [] and parse_markers(f"`` a ` {real} ``") == []
    assert parse_markers(f"text\n```\n{real}\n```\n") == [] and parse_markers(f"~~~~python\n{real}\n") == []
    assert len(parse_markers(f"```\ncode\n```\n{real}")) == 1, "after the fence closes, a marker is a marker again"


def test_judged_needs_every_named_cell_to_have_run_and_recorded_the_subject() -> None:
    report = regression_night()
    compat = report.compat
    bodies = {f.key: f for f in report.findings()}
    core = finding_marker(bodies[f"regression:{CORE}"], NIGHT, "t")
    assert judged(compat, core)
    assert not judged(compat.with_entry(CORE, FIXED, outcome="missing"), core)
    missing = finding_marker(bodies[f"missing:{CRASHED}"], NIGHT, "t")
    assert not judged(compat, missing) and judged(clean_night().compat, missing)


# -- gh, faked on PATH ------------------------------------------------------------------------------

FAKE_GH = '''#!{python}
"""A stand-in for the GitHub CLI: issues in $FAKE_GH_STATE (JSON), every call appended to $FAKE_GH_LOG."""
import json, os, sys
args = sys.argv[1:]
state_path = os.environ["FAKE_GH_STATE"]
if args[:1] == ["api"]:  # events: who closed (the issue's "closed_by" in the state); permission: the state's "roles"
    with open(os.environ["FAKE_GH_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    issues = json.load(open(state_path)) if os.path.exists(state_path) else []
    path = args[-1].split("/")
    if path[-1] == "events":
        by = issues[int(path[-2]) - 1].get("closed_by")
        print(json.dumps([{{"event": "closed", "actor": {{"login": by}}}}] if by else []))
    elif path[-1] == "permission":
        role = json.loads(os.environ.get("FAKE_GH_ROLES", "{{}}")).get(path[-2])
        if role is None:
            print("HTTP 404: Not Found", file=sys.stderr)
            sys.exit(1)
        print(json.dumps({{"permission": "read", "role_name": role}}))
    sys.exit(0)
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_GH_FAIL"):
    print("HTTP 403: Resource not accessible by integration", file=sys.stderr)
    sys.exit(1)
issues = json.load(open(state_path)) if os.path.exists(state_path) else []
assert args[-2] == "--repo" and args[-1] == "o/r", args
if args[:2] == ["issue", "list"]:
    assert args[args.index("--search") + 1] == '"bugmatrix-finding" in:body'
    print(json.dumps([i for i in issues if "bugmatrix-finding" in i["body"]]))
elif args[:2] == ["issue", "create"]:
    assert args[args.index("--body-file") + 1] == "-"
    number = len(issues) + 1
    issues.append({{"number": number, "state": "OPEN", "title": args[args.index("--title") + 1], "body": sys.stdin.read(),
                   "comments": [], "url": f"https://github.com/o/r/issues/{{number}}", "author": {{"login": "app/github-actions"}}}})
    print(f"https://github.com/o/r/issues/{{number}}")
elif args[:2] == ["issue", "comment"]:
    assert args[args.index("--body-file") + 1] == "-"
    issues[int(args[2]) - 1]["comments"].append({{"body": sys.stdin.read(), "author": {{"login": "app/github-actions"}}}})
else:
    sys.exit(2)
json.dump(issues, open(state_path, "w"))
'''


@pytest.fixture
def fake_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake gh first on PATH; returns its state file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_STATE", str(tmp_path / "gh-issues.json"))
    monkeypatch.setenv("FAKE_GH_LOG", str(tmp_path / "gh.log"))
    return tmp_path / "gh-issues.json"


def plan_file(reports: Path) -> Path:
    """The plan of the fixture cells, so a lost run file is a missing cell."""
    runs = [json.loads(p.read_text()) for p in sorted((reports / "runs").glob("*.json"))]
    plan = {
        "schema": "bugmatrix.plan.cells/1", "profile": "smoke",
        "axes": [{"name": "python", "prefix": "py"}, {"name": "torch", "prefix": "torch"}, {"name": "lightning", "prefix": "pl"}],
        "cells": [{"id": r["cell"], "pins": r["pins"], "device": "cpu", "variants": r.get("selected") or [v["id"] for v in r["results"]]}
                  for r in runs],
    }  # fmt: skip
    path = reports.parent / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def report_night(tmp_path: Path, date: str, *, regress: bool, lose: str | None = None) -> tuple[Path, Path]:
    """``report --issue-bodies`` over the fixture run files, against a baseline of them as they are; (bodies, compat.json).

    ``regress``: two variants fixed in FIXED reproduce; ``lose``: that cell's run file is gone (the plan still has it).
    """
    reports = tmp_path / "reports"
    shutil.rmtree(reports / "runs", ignore_errors=True)
    shutil.copytree(FIXTURES, reports / "runs")
    plan = plan_file(reports)
    baseline = tmp_path / "baseline.json"
    if not baseline.exists():  # the first call: the fixture night itself is the baseline
        assert main(["report", "--reports", str(reports), "--plan", str(plan), "--history", str(tmp_path / "b.jsonl")]) in (0, 1)
        shutil.copy(reports / "compat.json", baseline)
    if regress:
        run = reports / "runs" / f"{FIXED}.json"
        data = json.loads(run.read_text())
        for record in data["results"]:
            if record["id"] in (CORE, "autocast_cache::lightning_manual_optimization[cpu]"):
                record.update(outcome="reproduced", message="RuntimeError: element 0 of tensors does not require grad")
        run.write_text(json.dumps(data))
    if lose:
        (reports / "runs" / f"{lose}.json").unlink()
    bodies = tmp_path / "bodies"
    argv = ["report", "--reports", str(reports), "--plan", str(plan), "--baseline", str(baseline), "--history", str(tmp_path / "h.jsonl")]
    assert main([*argv, "--date", date, "--issue-bodies", str(bodies)]) in (0, 1)
    return bodies, reports / "compat.json"


def issues(bodies: Path, compat: Path, date: str, *extra: str) -> int:
    return main(["issues", "--bodies", str(bodies), "--compat", str(compat), "--repo", "o/r", "--night", date, *extra])


def test_report_to_issues_and_back_through_the_cli_and_a_fake_gh(tmp_path: Path, fake_gh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two regressions and a lost cell: three bodies, three issues; the same night again: nothing; a clean night: three notes."""
    bodies, compat = report_night(tmp_path, "2026-11-23", regress=True, lose=CRASHED)
    written = sorted(p.name for p in bodies.glob("*.md"))
    assert len(written) == 3 and sum(name.startswith("regression-") for name in written) == 2 and any("missing-" in n for n in written)
    first = {p.name: p.read_text() for p in bodies.glob("*.md")}
    again, _ = report_night(tmp_path, "2026-11-23", regress=True, lose=CRASHED)
    assert {p.name: p.read_text() for p in again.glob("*.md")} == first, "the same night gives the same keys, and the same bodies"
    assert (bodies / written[-1].removesuffix(".md") / "repro.py").is_file(), "each body's repro files beside it"
    keys = sorted(parse_markers(p.read_text())[0].key for p in bodies.glob("*.md"))
    capsys.readouterr()

    assert issues(bodies, compat, "2026-11-23", "--dry-run") == 0
    calls = [json.loads(line)[:2] for line in (tmp_path / "gh.log").read_text().splitlines()]
    assert "would open" in capsys.readouterr().out and calls == [["issue", "list"]], "a dry run lists, and writes nothing"
    assert issues(bodies, compat, "2026-11-23") == 0
    filed = json.loads(fake_gh.read_text())
    assert sorted(parse_markers(i["body"])[0].key for i in filed) == keys and all(i["title"].startswith("bugmatrix: ") for i in filed)
    assert issues(bodies, compat, "2026-11-23") == 0
    assert json.loads(fake_gh.read_text()) == filed, "filing the same night twice changes nothing"

    clean, clean_compat = report_night(tmp_path, "2026-11-24", regress=False)
    assert list(clean.iterdir()) == [], "a clean night: no body left"
    capsys.readouterr()
    assert issues(clean, clean_compat, "2026-11-24", "--site-url", "https://o.github.io/r/") == 0
    out = capsys.readouterr().out
    assert out.count("back-to-baseline #") == 3 and "issues: 0 finding(s)" in out, out
    notes = [i["comments"][-1]["body"] for i in json.loads(fake_gh.read_text())]
    assert all("(https://o.github.io/r/smoke/2026-11-24/index.html)" in note for note in notes)


def test_gh_failures_and_bad_input_are_one_line(
    tmp_path: Path, fake_gh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies, compat = report_night(tmp_path, "2026-11-23", regress=True)
    capsys.readouterr()
    monkeypatch.setenv("FAKE_GH_FAIL", "1")
    assert issues(bodies, compat, "2026-11-23") == 2
    err = capsys.readouterr().err
    assert "HTTP 403" in err and "GH_TOKEN" in err and err.count("\n") == 1
    monkeypatch.delenv("FAKE_GH_FAIL")
    assert issues(tmp_path / "nowhere", compat, "2026-11-23") == 2
    assert "--issue-bodies" in capsys.readouterr().err
    assert issues(bodies, compat, "23.11.2026") == 2
    assert "is not a date" in capsys.readouterr().err
    stray = bodies / "notes.md"
    stray.write_text("my own notes")
    assert issues(bodies, compat, "2026-11-23") == 2
    assert "not an issue body" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    stray.unlink()
    assert issues(bodies, compat, "2026-11-23") == 2
    assert "GitHub CLI is not on PATH" in capsys.readouterr().err


def test_report_refuses_an_issue_directory_holding_someone_elses_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies, _ = report_night(tmp_path, "2026-11-23", regress=True)
    (bodies / "keep-me.txt").write_text("a user's file")
    reports = tmp_path / "reports"
    assert main(["report", "--reports", str(reports), "--baseline", str(tmp_path / "baseline.json"), "--issue-bodies", str(bodies)]) == 2
    assert "keep-me.txt, which report --issue-bodies did not write" in capsys.readouterr().err
    assert (bodies / "keep-me.txt").read_text() == "a user's file" and len(list(bodies.glob("*.md"))) == 2
