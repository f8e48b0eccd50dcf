"""Reuse: a cell whose input key equals a previous run's takes that run's results over, says whose they are, and every view says so too.

The runner is exercised for real (its key, its decision, the run file it
writes); only the environment builder is replaced, by one that fails the test
if it is ever called, because a reused cell builds and runs nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

import bugmatrix.run.runner
from bugmatrix.cell.caseenv import Env
from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import file_digest, write_json_atomic, write_text_atomic
from bugmatrix.plan.cells import Cell, plan_cells, sibling_id
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.report.history import HISTORY_SCHEMA, Night, load_history, reuse_facts, write_history
from bugmatrix.run.envbuild import InstallFailed
from bugmatrix.run.lock import lock_for, requirements_digest
from bugmatrix.run.reuse import NO_REUSE_ENV, PREVIOUS_ENV, ReuseOptions, ReusePolicy, decide, reuse_policy, split_reuse_options
from bugmatrix.run.runner import CellSpec, cell_key, run_cell
from bugmatrix.tools.benchmark.nightly import stale_setup
from tests.planfiles import plan_of_runs
from tests.reference import reference_catalog

ROOT = Path(__file__).resolve().parent.parent
MATRIX = load_resolved_matrix(ROOT / "matrix.toml")
SMOKE = [c for c in plan_cells(MATRIX, "smoke", reference_catalog()) if c.device == "cpu"]  # the fixture cases: a new case moves nothing
CELL = SMOKE[0]
NOW = dt.datetime(2026, 11, 23, 3, 17, tzinfo=dt.UTC)
ORIGIN = {"date": "2026-11-22T03:20:00+00:00", "commit": "abc1234", "run": "https://github.com/o/r/actions/runs/41/attempts/1"}


def record(variant_id: str, outcome: Outcome = Outcome.FIXED) -> VariantRecord:
    case, rest = variant_id.split("::")
    return VariantRecord(
        id=variant_id, case=case, variant=rest.split("[")[0], device="cpu", kind=Kind.CORE, workaround_for=None, outcome=outcome,
        expected=outcome, verdict=Verdict.AS_EXPECTED, signature_matched=outcome is Outcome.REPRODUCED, message="", duration_s=0.5,
    )  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A checkout holding the cell's committed lock (what makes it keyed)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "locks" / "pieces", checkout / "locks" / "pieces")  # the hash blocks the lock refers to
    (checkout / "locks" / f"{CELL.id}.txt").write_bytes((ROOT / "locks" / f"{CELL.id}.txt").read_bytes())
    return checkout


def spec(**changes: object) -> CellSpec:
    return CellSpec(CELL.id, CELL.pins, variants=CELL.variants, **changes)  # type: ignore[arg-type]


def previous_run(root: Path, **changes: object) -> RunRecord:
    key, why = cell_key(MATRIX, spec(), root)
    assert key is not None, why
    fields: dict[str, object] = {
        "cell": CELL.id, "pins": dict(CELL.pins), "axes": list(CELL.pins), "environment": {"python": "3.11.7"},
        "started": ORIGIN["date"], "finished": "2026-11-22T03:21:00+00:00", "results": [record(v) for v in CELL.variants],
        "selected": list(CELL.variants), "complete": True, "input_key": msgspec.to_builtins(key), "origin": dict(ORIGIN),
    }  # fmt: skip
    fields.update(changes)
    return RunRecord(**fields)  # type: ignore[arg-type]


def save(previous: Path, run: RunRecord, where: str = "runs") -> Path:
    """Write a previous run file and record its digest in the previous results' history, as that night's report did."""
    path = previous / where / f"{run.cell}.json"
    write_json_atomic(path, run.to_json())
    recorded = Night(
        schema=HISTORY_SCHEMA,
        date="2026-11-22",
        commit="abc1234",
        profile="smoke",
        cells=(),
        outcomes={},
        files={f"{where}/{run.cell}.json": file_digest(path)},
    )
    write_history(previous / "history.jsonl", [*load_history(previous / "history.jsonl"), recorded])
    return path


def policy_of(previous: Path, now: dt.datetime = NOW) -> ReusePolicy:
    """The policy a cell session gets for ``previous`` (its history's flaky pairs and recorded digests), at ``now``."""
    return ReusePolicy(previous, 7, *reuse_facts(previous / "history.jsonl"), now=now)


@pytest.fixture
def no_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every environment build the runner asks for, refused (and recorded): a reused cell must ask for none."""
    asked: list[str] = []

    def refuse(venv: Path, *args: object, **kwargs: object) -> bool:
        asked.append(str(venv))
        raise InstallFailed("no environment is built in this test")

    monkeypatch.setattr(bugmatrix.run.runner, "ensure_environment", refuse)
    return asked


def never(command: object, env: object) -> int:
    raise AssertionError("pytest must not run for a reused cell")


def report_argv(reports: Path, summary: Path) -> list[str]:
    """``report`` on these run files, against a plan of exactly their cells, with a step summary."""
    return ["report", "--reports", str(reports), "--plan", plan_of_runs(reports), "--step-summary", str(summary)]


def test_same_inputs_are_reused_with_their_origin_and_nothing_is_built(root: Path, tmp_path: Path, no_builds: list[str]) -> None:
    previous = tmp_path / "previous"
    save(previous, previous_run(root))
    tonight = {"torch": {"requested": "latest", "resolved": CELL.pins["torch"]}}
    out = tmp_path / "tonight" / f"{CELL.id}.json"
    said: list[str] = []
    done = run_cell(MATRIX, spec(tracked=tonight), out, execute=never, root=root, reuse=policy_of(previous), log=said.append)
    assert (
        done.reused and no_builds == [] and said[0].startswith("reused: inputs unchanged since 2026-11-22T03:20:00+00:00, commit abc1234")
    )
    reused = load_run_file(out)
    assert reused.reused_from == ORIGIN, "whose results these are"
    assert reused.origin is not None and reused.origin != ORIGIN and reused.origin["date"] > ORIGIN["date"], "tonight's run wrote the file"
    assert reused.tracked == tonight, "what latest means tonight, not the night the results were observed"
    assert [r.outcome for r in reused.results] == [Outcome.FIXED] * len(CELL.variants) and reused.complete
    # Reusing a reused file carries the first origin on: the age is the observation's, never the copy's.
    again = tmp_path / "again"
    save(again, reused)
    run_cell(MATRIX, spec(), again / "out.json", execute=never, root=root, reuse=policy_of(again))
    assert load_run_file(again / "out.json").reused_from == ORIGIN


@pytest.mark.parametrize("where", ["runs", "fresh/runs"])
def test_a_previous_run_file_edited_since_its_night_recorded_it_is_not_trusted(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_builds: list[str], where: str
) -> None:
    """Issue 45, item 12: a previous run file edited to say ``fixed`` where it said ``reproduced``, its key unchanged, was
    reused as tonight's truth (also through fresh/runs/). The night's real report records each file's digest in the
    history; reuse trusts only that file: an edit is named and the cell runs."""
    previous = tmp_path / "previous"
    first = CELL.variants[0]
    results = [replace(record(first), outcome=Outcome.REPRODUCED, signature_matched=True), *map(record, CELL.variants[1:])]
    path = previous / where / f"{CELL.id}.json"
    write_json_atomic(path, previous_run(root, results=results).to_json())
    if where == "fresh/runs":  # the lane's sibling of that night: its lock and its record, as the lane writes them
        fresh_lock = previous / "fresh" / "locks" / f"{CELL.id}.txt"  # tonight's committed lock is that night's fresh one
        fresh_lock.parent.mkdir(parents=True)
        assembled, why = lock_for(root, CELL.id, MATRIX.requirements_for(CELL.pins), CELL.pins[MATRIX.interpreter])
        assert assembled is not None, why
        fresh_lock.write_bytes(assembled.read_bytes())
        older = {"digest": "sha256:0", "parts": {"lock": "sha256:1"}}  # the locked run of that night: another lock
        write_json_atomic(previous / "runs" / f"{CELL.id}.json", previous_run(root, input_key=older).to_json())
        lane = {"schema": "bugmatrix.reresolve/1", "resolved_at": "2026-11-22T03:00:00+00:00", "as_of": None, "held": {},
                "profile": "smoke", "cells": [{"cell": CELL.id, "status": "moved", "moved": ["filelock 4.2.11 → 4.2.12"]}]}  # fmt: skip
        write_json_atomic(previous / "fresh" / "resolve.json", lane)
    summary = tmp_path / "summary.md"
    summary.write_text("")
    assert main([*report_argv(previous, summary), "--date", "2026-11-22", "--profile", "smoke"]) == 0
    capsys.readouterr()
    recorded = load_history(previous / "history.jsonl")[-1].files
    assert recorded[f"{where}/{CELL.id}.json"] == file_digest(path), "the report records the digest of each run file it read"
    assert decide(policy_of(previous), CellSpec.of(CELL), cell_key(MATRIX, spec(), root)[0]).source == path
    data = json.loads(path.read_text())
    data["results"][0].update(outcome="fixed", signature_matched=False)  # the edit: the key, the dates, the shape all unchanged
    write_json_atomic(path, data)
    load_run_file(path)  # still a well-formed run file
    said: list[str] = []
    done = run_cell(MATRIX, spec(), tmp_path / "out.json", execute=never, root=root, reuse=policy_of(previous), log=said.append)
    assert not done.reused and no_builds, "the cell runs"
    assert f"{where}/{CELL.id}.json is not the file the night of 2026-11-22 recorded (its digest {file_digest(path)}" in said[0], said
    assert "edited since, not trusted" in said[0] and "\n" not in said[0]


def test_a_previous_run_file_no_night_recorded_is_not_trusted(root: Path, tmp_path: Path) -> None:
    """Previous results without the history that recorded them (or a file it never read) are not reused: nothing vouches for them."""
    write_json_atomic(tmp_path / "runs" / f"{CELL.id}.json", previous_run(root).to_json())
    decision = decide(policy_of(tmp_path), CellSpec.of(CELL), cell_key(MATRIX, spec(), root)[0])
    assert decision.reused is None and f"runs/{CELL.id}.json: no night of {tmp_path / 'history.jsonl'} recorded its digest" in decision.why


def test_results_older_than_max_age_are_observed_again(root: Path, tmp_path: Path, no_builds: list[str]) -> None:
    previous = tmp_path / "previous"
    save(previous, previous_run(root))
    said: list[str] = []
    later = NOW + dt.timedelta(days=7)
    done = run_cell(MATRIX, spec(), tmp_path / "out.json", execute=never, root=root, reuse=policy_of(previous, later), log=said.append)
    assert not done.reused and done.install_failed and no_builds, "it ran (here: its stubbed build failed)"
    assert "its results are from 2026-11-22, 8 days ago ([reuse] max_age_days = 7)" in said[0]
    assert load_run_file(tmp_path / "out.json").reused_from is None


def test_a_changed_key_runs_and_says_which_part_moved(root: Path, tmp_path: Path, no_builds: list[str]) -> None:
    previous = tmp_path / "previous"
    run = previous_run(root)
    assert run.input_key is not None
    stale = {**run.input_key, "digest": "sha256:0", "parts": {**run.input_key["parts"], "lock": "sha256:0"}}
    save(previous, previous_run(root, input_key=stale))
    key, _ = cell_key(MATRIX, spec(), root)
    decision = decide(policy_of(previous), CellSpec.of(CELL), key)
    assert decision.reused is None and decision.why == "runs: the previous run inputs changed: lock changed"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"complete": False}, "it did not complete"),
        ({"install": {"status": "failed", "reason": "x"}}, "its environment did not install then"),
        ({"results": [record(CELL.variants[0], Outcome.CRASHED), *map(record, CELL.variants[1:])]}, "crashed/timeout result(s)"),
        ({"selected": list(CELL.variants[:-1])}, "another selection of variants"),
        ({"input_key": None}, "recorded no input key"),
        ({"origin": None}, "carry no date"),
    ],
)
def test_runs_that_are_no_whole_observation_are_not_reused(root: Path, tmp_path: Path, changes: dict[str, object], why: str) -> None:
    save(tmp_path, previous_run(root, **changes))
    key, _ = cell_key(MATRIX, spec(), root)
    decision = decide(policy_of(tmp_path), CellSpec.of(CELL), key)
    assert decision.reused is None and why in decision.why


def test_a_future_dated_previous_run_runs_again_and_says_why(root: Path, tmp_path: Path, no_builds: list[str]) -> None:
    """A 2099 file would otherwise never age past max_age_days and be reused forever."""
    previous = tmp_path / "previous"
    save(previous, previous_run(root, origin={**ORIGIN, "date": "2099-01-01T00:00:00+00:00"}))
    said: list[str] = []
    done = run_cell(MATRIX, spec(), tmp_path / "out.json", execute=never, root=root, reuse=policy_of(previous), log=said.append)
    assert not done.reused and no_builds, "it ran"
    assert "its results are dated 2099-01-01, in the future: refused" in said[0]


@pytest.mark.parametrize(
    ("corrupt", "why"),
    [
        (lambda data: data.update(results=data["results"][:1]), "says complete but records 1 of its"),
        (lambda data: data["results"][0].update(message={"a": 1}), "Expected `str`, got `object` - at `$.results[0].message`"),
        (lambda data: data["results"][0].update(duration_s="1"), "Expected `float`, got `str` - at `$.results[0].duration_s`"),
    ],
)
def test_a_short_or_type_corrupt_previous_run_runs_again_and_says_why(
    root: Path, tmp_path: Path, no_builds: list[str], corrupt: object, why: str
) -> None:
    """The previous file goes through tonight's validating reader: a file it refuses is named, and the cell runs."""
    previous = tmp_path / "previous"
    path = save(previous, previous_run(root))
    data = json.loads(path.read_text())
    corrupt(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    said: list[str] = []
    done = run_cell(MATRIX, spec(), tmp_path / "out.json", execute=never, root=root, reuse=policy_of(previous), log=said.append)
    assert not done.reused and no_builds, "it ran"
    assert said[0].startswith(f"runs: the previous run {path.name} cannot be read") and why in said[0], said[0]
    assert len(said[0].splitlines()) == 1


def test_a_pair_the_history_calls_flaky_is_observed_again(root: Path, tmp_path: Path) -> None:
    """Flip-flopping for three nights in the previous results' history: that cell runs, the others may be reused."""
    path = save(tmp_path, previous_run(root))
    variant, other = CELL.variants[0], SMOKE[1].id
    letters = [Outcome.FIXED.code, Outcome.REPRODUCED.code, Outcome.FIXED.code]
    lines = [
        {"schema": HISTORY_SCHEMA, "date": f"2026-11-2{i}", "commit": "c", "profile": "smoke", "cells": [CELL.id, other],
         "outcomes": {variant: letter + "F"}, "files": {f"runs/{CELL.id}.json": file_digest(path)}}
        for i, letter in enumerate(letters)
    ]  # fmt: skip
    write_text_atomic(tmp_path / "history.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    policy = reuse_policy(7, ReuseOptions(previous=tmp_path), history_of=reuse_facts)
    assert policy is not None and policy.flaky == {(variant, CELL.id)}
    key, _ = cell_key(MATRIX, spec(), root)
    decision = decide(policy, CellSpec.of(CELL), key)
    assert decision.reused is None and f"the history calls {variant} flaky here: re-observed" in decision.why


def test_a_sibling_run_of_the_same_lock_stands_in_once_the_patch_is_applied(root: Path, tmp_path: Path) -> None:
    """Tonight's committed lock is last night's fresh lock: the fresh sibling's results are that lock's, so they are reused."""
    other_lock = previous_run(root, input_key={"digest": "sha256:0", "parts": {"lock": "sha256:1"}})
    save(tmp_path, other_lock)
    sibling = save(tmp_path, previous_run(root), where="fresh/runs")
    key, _ = cell_key(MATRIX, spec(), root)
    decision = decide(policy_of(tmp_path), CellSpec.of(CELL), key)
    assert decision.reused is not None and decision.source == sibling


def test_a_workaround_sibling_is_keyed_with_its_extra_wherever_a_planned_cell_is_keyed(root: Path, tmp_path: Path) -> None:
    """The benchmark's kept setup night keys its cells as the cell sessions do (``CellSpec.of``): a ``-with-`` sibling with
    its workaround's requirements, so its own lock is current and last night's run of it stands (else: "no current lock")."""
    extra = Env(requires=["filelock<4"])
    sibling = Cell(sibling_id(CELL.id, extra), CELL.pins, CELL.profiles, CELL.device, CELL.variants, CELL.interpreter, extra, CELL.id)
    text = (root / "locks" / f"{CELL.id}.txt").read_text(encoding="utf-8")
    digest = requirements_digest(MATRIX.requirements_for(CELL.pins, extra=extra))
    lock = text.replace(requirements_digest(MATRIX.requirements_for(CELL.pins)), digest)
    (root / "locks" / f"{sibling.id}.txt").write_text(lock.replace("# requirement: ", "# requirement: filelock<4\n# requirement: ", 1))
    key, why = cell_key(MATRIX, replace(CellSpec.of(sibling), locks=root / "locks"), root)
    assert key is not None, why
    recent = {**ORIGIN, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    save(tmp_path, previous_run(root, cell=sibling.id, input_key=msgspec.to_builtins(key), origin=recent, started=recent["date"]))
    assert stale_setup(root, MATRIX, [sibling], tmp_path, root / "locks") == ""
    without = stale_setup(root, MATRIX, [replace(sibling, extra=Env())], tmp_path, root / "locks")
    assert "no current lock" in without and "(-filelock<4)" in without, "without its extra the sibling's lock is stale"


def test_when_reuse_is_off_or_impossible(root: Path, tmp_path: Path) -> None:
    key, _ = cell_key(MATRIX, spec(), root)
    policy = policy_of(tmp_path)
    assert "reuse is off" in decide(None, CellSpec.of(CELL), key).why
    assert "no previous run file" in decide(policy, CellSpec.of(CELL), key).why
    assert "not reusable, no current lock" in decide(policy, CellSpec.of(CELL), None, unkeyed="no current lock").why
    assert "pytest arguments narrow" in decide(policy, CellSpec.of(CELL), key, narrowed=["-k", "x"]).why
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / f"{CELL.id}.json").write_text('{"schema": "bugmatrix.run/3", "cel')
    corrupt = decide(policy, CellSpec.of(CELL), key)
    assert corrupt.reused is None and "cannot be read" in corrupt.why and "\n" not in corrupt.why, (
        "a corrupt previous file only runs the cell"
    )


def test_the_policy_comes_from_the_session_options_and_the_environment(tmp_path: Path) -> None:
    options, rest = split_reuse_options(["--no-reuse", "-k", "t5", "--reuse-from", str(tmp_path), "--no-reuse-x"])
    assert options == ReuseOptions(True, tmp_path) and rest == ["-k", "t5", "--no-reuse-x"]
    assert reuse_policy(7, environ={}, history_of=reuse_facts) is None, "no previous results named: nothing is reused"
    assert reuse_policy(7, environ={PREVIOUS_ENV: str(tmp_path)}, history_of=reuse_facts) == ReusePolicy(tmp_path, 7)
    assert reuse_policy(7, environ={PREVIOUS_ENV: str(tmp_path), NO_REUSE_ENV: "1"}, history_of=reuse_facts) is None
    assert reuse_policy(0, environ={PREVIOUS_ENV: str(tmp_path)}, history_of=reuse_facts) is None, "max_age_days = 0: never reuse"
    assert reuse_policy(7, ReuseOptions(no_reuse=True), environ={PREVIOUS_ENV: str(tmp_path)}, history_of=reuse_facts) is None
    with pytest.raises(BugmatrixError, match=r"^--reuse-from \S+/missing: no such directory of previous results"):
        reuse_policy(7, ReuseOptions(previous=tmp_path / "missing"), environ={}, history_of=reuse_facts)  # a typo: never "none"
    warned: list[str] = []
    (tmp_path / "history.jsonl").write_text("not json\n")
    assert reuse_policy(7, environ={PREVIOUS_ENV: str(tmp_path)}, warn=warned.append, history_of=reuse_facts) is None
    assert "history that names flaky results and the run files' digests cannot be read" in warned[0], "nothing is reused"


def test_a_reused_result_is_never_shown_without_its_origin(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compat.json, compat.md, index.html, the terminal and the step summary: each reused entry or column comes with whose results they are."""
    reports = tmp_path / "reports"
    reused = previous_run(root, reused_from=dict(ORIGIN), origin={**ORIGIN, "date": "2026-11-23T03:20:00+00:00", "run": "tonight"})
    save(reports, reused)
    fresh = next(c for c in SMOKE[1:] if c.variants == CELL.variants)  # the same cases: every entry of either column is a result
    save(reports, RunRecord(
        cell=fresh.id, pins=dict(fresh.pins), axes=list(fresh.pins), environment={}, started="2026-11-23T03:20:00+00:00",
        finished="2026-11-23T03:21:00+00:00", results=[record(v) for v in fresh.variants], selected=list(fresh.variants), complete=True,
        origin={**ORIGIN, "date": "2026-11-23T03:20:00+00:00", "run": "tonight"},
    ))  # fmt: skip
    summary = tmp_path / "summary.md"
    summary.write_text("")
    assert main([*report_argv(reports, summary), "--history", str(tmp_path / "h.jsonl")]) == 0
    origin = "2026-11-22T03:20:00+00:00, commit abc1234, https://github.com/o/r/actions/runs/41/attempts/1"
    terminal = capsys.readouterr().out
    assert "REUSED 1 of 2 cells" in terminal and f"from {origin}: {CELL.id}" in terminal
    compat = json.loads((reports / "compat.json").read_text())
    cells = {c["id"]: c for c in compat["cells"]}
    assert cells[CELL.id]["reused_from"] == ORIGIN and cells[fresh.id]["reused_from"] is None
    markdown = (reports / "compat.md").read_text()
    assert f"- from {origin}: `{CELL.id}`" in markdown
    assert "♻" in markdown and "♻ Reused: 1 of 2 cells" in markdown
    assert f"- from {origin}: `{CELL.id}`" in summary.read_text()
    html = (reports / "index.html").read_text()
    tds = re.findall(r'<td [^>]*data-cell="([^"]+)"[^>]*>', html)
    reused_tds = re.findall(rf'<td [^>]*data-cell="{re.escape(CELL.id)}"[^>]*data-reused="([^"]*)"', html)
    assert reused_tds and len(reused_tds) == tds.count(CELL.id), "every entry of the reused cell carries its origin"
    assert all(origin in r for r in reused_tds)
    assert not re.search(rf'data-cell="{re.escape(fresh.id)}"[^>]*data-reused', html), "a cell that ran is not marked"
    assert re.search(rf'<th [^>]*data-cell="{re.escape(CELL.id)}"[^>]*data-reused="♻ reused from {re.escape(origin)}"', html)
    assert f'data-origin-run="{ORIGIN["run"]}"' in html


def test_a_new_release_has_no_key_so_its_cells_run_the_same_night(root: Path, tmp_path: Path, no_builds: list[str]) -> None:
    """``latest`` moved to a release no lock knows: even a previous run file under that cell's name cannot stand in for it."""
    pins = {**CELL.pins, next(a for a in CELL.pins if a != "python"): "99.0.0"}
    new = CellSpec(MATRIX.cell_id(pins), pins, variants=CELL.variants)
    key, why = cell_key(MATRIX, new, root)
    assert key is None and "no lock for this cell" in why
    save(tmp_path, previous_run(root, cell=new.id, pins=dict(pins)))
    said: list[str] = []
    done = run_cell(MATRIX, new, tmp_path / "out.json", execute=never, root=root, reuse=policy_of(tmp_path), log=said.append)
    assert not done.reused and no_builds and said[0].startswith("runs: not reusable, no current lock")


def test_a_reused_regression_carries_its_origin_on_every_finding_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The REGRESSION line, "Changes since baseline" (md, HTML, step summary) and the issue body: each says ♻ and whose results."""
    reports = tmp_path / "reports"
    first = CELL.variants[0]
    regressed = replace(record(first), outcome=Outcome.REPRODUCED, verdict=Verdict.REGRESSION, message="the documented failure")
    tonight = {**ORIGIN, "date": "2026-11-23T03:20:00+00:00", "run": "tonight"}
    results = [regressed, *map(record, CELL.variants[1:])]
    save(reports, previous_run(root, results=results, reused_from=dict(ORIGIN), origin=tonight))
    summary, bodies = tmp_path / "summary.md", tmp_path / "bodies"
    summary.write_text("")
    argv = [*report_argv(reports, summary), "--issue-bodies", str(bodies)]
    assert main([*argv, "--history", str(tmp_path / "h.jsonl"), "--fail-on-regression"]) == 1
    note = f"(♻ reused from {ORIGIN['date']}, commit abc1234, {ORIGIN['run']})"
    err = capsys.readouterr().err
    assert re.search(
        rf"REGRESSION {re.escape(first)} in {re.escape(CELL.id)}: \S+ -> reproduced: the documented failure {re.escape(note)}", err
    )
    for text in ((reports / "compat.md").read_text(), summary.read_text()):
        changes = text[text.index("Changes since baseline") :]
        assert f"`{first}` in `{CELL.id}`" in changes and "♻ reused from 2026-11-22" in changes.split("\n- ")[1], changes[:600]
    html = (reports / "index.html").read_text()
    section = html[html.index('<section id="changes"') : html.index("</section>", html.index('<section id="changes"'))]
    assert f"♻ reused from {ORIGIN['date']}, commit abc1234" in section
    body = "\n".join(p.read_text() for p in bodies.glob("*.md"))
    assert "reproduced ♻ reused from `2026-11-22T03:20:00+00:00, commit abc1234" in body, body[:1500]


def test_every_line_that_shows_a_reused_result_carries_the_mark(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 45, item 12: "Outcomes that changed since the baseline" (compat.md, step summary, index.html), the upstream
    agreement lines and the terminal's per-variant lines showed a reused result without ♻. Each output is rendered and read."""
    reports = tmp_path / "reports"
    first = CELL.variants[0]
    declared = {v.id: v for v in reference_catalog().variants}
    results = [  # each as its variant declares it: the upstream ones with the counterpart they are compared with
        replace(record(v), kind=declared[v].kind, counterpart=declared[v].counterpart, workaround_for=declared[v].workaround_for)
        for v in CELL.variants
    ]
    results[0] = replace(results[0], outcome=Outcome.REPRODUCED, verdict=Verdict.REGRESSION, message="the documented failure")
    assert first == results[0].id and any(r.counterpart for r in results), "the cell runs upstream variants and their counterparts"
    tonight = {**ORIGIN, "date": "2026-11-23T03:20:00+00:00", "run": "tonight"}
    save(reports, previous_run(root, results=results, reused_from=dict(ORIGIN), origin=tonight))
    summary = tmp_path / "summary.md"
    summary.write_text("")
    assert main([*report_argv(reports, summary), "--history", str(tmp_path / "h.jsonl")]) == 0
    terminal = capsys.readouterr().out
    # The only cell of this night is the reused one: every line below shows a reused result.
    for name, text in (("compat.md", (reports / "compat.md").read_text()), ("step summary", summary.read_text())):
        section = text[text.index("## Outcomes that changed since the baseline") :].split("\n\n")[1]
        moved = [line for line in section.splitlines() if not line.startswith("- … and")]  # "… and 12 more" shows no result
        assert moved and all("♻ reused from 2026-11-22" in line for line in moved), (name, moved)
    markdown = (reports / "compat.md").read_text()
    agreement = [line for line in markdown.splitlines() if line.startswith("- `upstream") and "` vs `" in line]
    assert agreement and all(f"♻ {CELL.id} reused" in line for line in agreement), agreement
    boundaries = [line for block in markdown.split("**Boundaries**\n\n")[1:] for line in block.split("\n\n")[0].splitlines()]
    assert boundaries and all("♻:" in line for line in boundaries), boundaries[:3]
    html = (reports / "index.html").read_text()
    items = re.findall(r'<li class="moved">.*?</li>', html, flags=re.S)
    assert items and all("♻ reused from 2026-11-22" in item for item in items), items[:2]
    rows = re.findall(r'<li class="agreement-row".*?</li>', html, flags=re.S)
    assert rows and all(f"♻ {CELL.id} reused" in row for row in rows), rows[:2]
    per_variant = [line for line in terminal.splitlines() if line.split(" ")[0] in CELL.variants]
    assert per_variant and all(line.split("  ")[0].endswith("♻") for line in per_variant), per_variant[:3]
