"""The re-resolve lane: what moved below a lock, a patch that ``git apply`` takes, and the lane on the page.

The lock comparison and the report are pure; the lane itself resolves a real
cell against the real registry (metadata only, like ``nox -s lock``), from a
lock made as the registry stood before one of its dependencies' releases, so
that something has moved whatever the registry holds today.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.cli import main
from bugmatrix.documents.lane import RERESOLVE_SCHEMA, load_reresolved
from bugmatrix.files import file_digest, write_json_atomic
from bugmatrix.report.command import load_fresh_lane
from bugmatrix.report.merge import merge_runs
from bugmatrix.report.night import analyse
from bugmatrix.run.lock import assemble_lock, create_lock, is_stored_as_pieces, lock_path
from bugmatrix.run.reresolve import lock_changes, lock_entries, patch_text, reresolve_cells
from tests.test_lock import registry_reachable
from tests.test_reuse import MATRIX, SMOKE, record

ROOT = Path(__file__).resolve().parent.parent

OLD = """# bugmatrix lock: header
# requirement: a
alpha==1.0 \\
    --hash=sha256:aaa
    # via a
beta==2.0 \\
    --hash=sha256:bbb \\
    --hash=sha256:bbc
    # via alpha
gamma==3.0 \\
    --hash=sha256:ccc
"""


def test_what_moved_below_a_lock_distribution_by_distribution() -> None:
    new = (
        OLD.replace("alpha==1.0", "alpha==1.1").replace("    # via alpha\n", "    # via\n    #   alpha\n    #   delta\n")
        .replace("gamma==3.0 \\\n    --hash=sha256:ccc\n", "Delta_Pkg==0.5 \\\n    --hash=sha256:ddd\n")
        .replace("--hash=sha256:bbc", "--hash=sha256:bbd")
    )  # fmt: skip
    assert lock_entries(OLD)["beta"] == ("2.0", frozenset({"sha256:bbb", "sha256:bbc"}))
    assert lock_changes(OLD, new) == [
        "alpha 1.0 → 1.1",
        "beta 2.0: files changed (another set of wheel hashes)",
        "+delta-pkg 0.5",
        "-gamma 3.0",
    ]
    assert lock_changes(OLD, OLD.replace("    # via a\n", "    # via a, b\n")) == [], "uv's annotations are no environment"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline", "no-final-newline"])
def test_the_patch_applies_with_git_apply(tmp_path: Path, ending: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    (repo / "locks").mkdir(parents=True)
    old = OLD.rstrip("\n") + ending
    new = old.replace("alpha==1.0", "alpha==1.1").replace("gamma==3.0", "gamma==3.1")
    (repo / "locks" / "c1.txt").write_text(old)
    (repo / "locks" / "c2.txt").write_text(OLD)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "locks")
    patch = tmp_path / "locks.patch"
    patch.write_text(patch_text([("locks/c1.txt", old, new), ("locks/c2.txt", OLD, OLD.replace("beta==2.0", "beta==2.1"))]))
    git(repo, "apply", "--check", str(patch))
    git(repo, "apply", str(patch))
    assert (repo / "locks" / "c1.txt").read_text() == new
    assert "beta==2.1" in (repo / "locks" / "c2.txt").read_text()
    assert patch_text([("locks/c1.txt", old, old)]) == "", "nothing moved: no patch"


def test_the_patch_adds_and_removes_whole_files(tmp_path: Path) -> None:
    """A moved lock's new pieces are new files, the pieces only its old lock used are deleted: git apply takes both."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    (repo / "locks" / "pieces").mkdir(parents=True)
    (repo / "locks" / "pieces" / "old.txt").write_text("alpha==1.0 \\\n    --hash=sha256:aa\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "locks")
    patch = tmp_path / "locks.patch"
    gone = (repo / "locks" / "pieces" / "old.txt").read_text()
    patch.write_text(
        patch_text([("locks/pieces/new.txt", None, "alpha==1.1 \\\n    --hash=sha256:bb\n"), ("locks/pieces/old.txt", gone, None)])
    )
    git(repo, "apply", "--check", str(patch))
    git(repo, "apply", str(patch))
    assert [p.name for p in (repo / "locks" / "pieces").iterdir()] == ["new.txt"]


@pytest.fixture
def held_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A checkout (a git repository) whose one locked cell was resolved before filelock 4.2.12 (2026-11-18): something has moved since."""
    if not registry_reachable():
        pytest.skip("pypi.org is unreachable: the lane resolves against the real registry")
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path / "checkout"
    cell = SMOKE[0]
    requirements = MATRIX.requirements_for(cell.pins)
    create_lock(
        requirements, cell.python, lock_path(root, cell.id), exclude_newer_packages={"filelock": "2026-11-18T00:00:00Z"}, pieces=True
    )
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "locks")
    return root, cell.id


def test_the_lane_finds_what_moved_and_its_patch_applies_cleanly(held_back: tuple[Path, str], tmp_path: Path) -> None:
    root, cell_id = held_back
    cells = [c for c in SMOKE if c.id == cell_id] + [SMOKE[1]]  # the second cell has no lock in this checkout
    out = tmp_path / "fresh"
    results = {r.cell: r for r in reresolve_cells(MATRIX, cells, root, out)}
    moved = results[cell_id]
    assert moved.status == "moved" and moved.committed == f"locks/{cell_id}.txt"
    assert any(line.startswith("filelock 4.2.11 → ") for line in moved.moved), moved.moved
    assert results[SMOKE[1].id].status == "unlocked" and "no lock for this cell" in results[SMOKE[1].id].reason
    assert load_reresolved(out) is not None and json.loads((out / "resolve.json").read_text())["schema"] == RERESOLVE_SCHEMA
    fresh_lock = out / "locks" / f"{cell_id}.txt"
    assert not is_stored_as_pieces(fresh_lock.read_text()), "the fresh session installs the lane's lock as it is: whole"
    old_filelock = [p.name for p in (root / "locks" / "pieces").glob("filelock-4.2.11-*.txt")]
    git(root, "apply", "--check", str(out / "locks.patch"))
    git(root, "apply", str(out / "locks.patch"))
    committed = root / "locks" / f"{cell_id}.txt"
    assert is_stored_as_pieces(committed.read_text()), "the patch keeps the committed form"
    assert assemble_lock(committed) == fresh_lock.read_text(), "the patched lock is the fresh one, byte for byte"
    pieces = {p.name for p in (root / "locks" / "pieces").glob("*.txt")}
    assert old_filelock and not pieces & set(old_filelock), "the piece only the old lock used is removed by the patch"
    assert any(name.startswith("filelock-") for name in pieces), "the moved release's piece is added by the patch"
    # Applied, nothing has moved any more: tomorrow's lane leaves no patch and no fresh lock behind.
    again = {r.cell: r for r in reresolve_cells(MATRIX, cells[:1], root, out)}
    assert again[cell_id].status == "same" and not (out / "locks.patch").exists() and not fresh_lock.exists()


def test_a_cell_that_no_longer_resolves_is_a_finding(held_back: tuple[Path, str], tmp_path: Path) -> None:
    """The pinned release as if it had never been published: the requirements are unsatisfiable, said in the resolver's words."""
    root, cell_id = held_back
    cell = next(c for c in SMOKE if c.id == cell_id)
    out = tmp_path / "fresh"
    pinned = next(iter(MATRIX.providers(cell.pins).values()))[0]  # a distribution the cell pins exactly
    (result,) = reresolve_cells(MATRIX, [cell], root, out, held={pinned: "2000-01-01T00:00:00Z"})
    assert result.status == "failed" and "cannot lock" in result.reason and "\n" not in result.reason
    assert not (out / "locks.patch").exists()


def lane(tmp_path: Path) -> tuple[Path, list[RunRecord]]:
    """A night of two cells, and its lane: the first moved (numpy) and differs fresh in one variant; the second no longer resolves."""
    moved, broken = SMOKE[0], SMOKE[1]
    variants = moved.variants[:3]
    runs = [
        RunRecord(cell=c.id, pins=dict(c.pins), axes=list(c.pins), environment={}, started="2026-11-23T03:00:00+00:00",
                  finished="2026-11-23T03:01:00+00:00", results=[record(v) for v in variants], selected=list(variants), complete=True)
        for c in (moved, broken)
    ]  # fmt: skip
    fresh = tmp_path / "fresh"
    (fresh / "locks").mkdir(parents=True)
    (fresh / "locks" / f"{moved.id}.txt").write_text("numpy==2.5.0\n")
    document = {
        "schema": RERESOLVE_SCHEMA, "resolved_at": "2026-11-23T03:05:00+00:00", "as_of": None, "held": {}, "profile": "smoke",
        "cells": [
            {"cell": moved.id, "status": "moved", "moved": ["numpy 2.4.6 → 2.5.0"], "reason": "", "committed": f"locks/{moved.id}.txt"},
            {"cell": broken.id, "status": "failed", "moved": [], "reason": "cannot lock x: no solution (setuptools>=90 needs …)"},
        ],
    }  # fmt: skip
    write_json_atomic(fresh / "resolve.json", document)
    key = {"digest": "sha256:f", "parts": {"lock": file_digest(fresh / "locks" / f"{moved.id}.txt")}}
    sibling = RunRecord(
        cell=moved.id, pins=dict(moved.pins), axes=list(moved.pins), environment={}, started="2026-11-23T03:10:00+00:00",
        finished="2026-11-23T03:11:00+00:00", results=[record(variants[0], Outcome.DIFFERENT), *(record(v) for v in variants[1:])],
        selected=list(variants), complete=True, input_key=key,
        origin={"date": "2026-11-23T03:10:00+00:00", "commit": "abc1234", "run": "tonight"},
    )  # fmt: skip
    write_json_atomic(fresh / "runs" / f"{moved.id}.json", sibling.to_json())
    stale = RunRecord(
        **{**sibling.__dict__, "cell": broken.id, "pins": dict(broken.pins), "input_key": {"digest": "x", "parts": {"lock": "y"}}}
    )
    write_json_atomic(fresh / "runs" / f"{broken.id}.json", stale.to_json())
    return fresh, runs


def test_the_report_attributes_a_fresh_difference_to_what_moved_and_lists_what_breaks(tmp_path: Path) -> None:
    fresh, runs = lane(tmp_path)
    compat = merge_runs(runs, profile="smoke", commit="c", generated="g")
    found, files = load_fresh_lane(fresh, compat)
    assert found.stale == (SMOKE[1].id,), "a sibling of another lock is left out, said so"
    assert list(files) == [f"fresh/runs/{SMOKE[0].id}.json"], "the history records only the sibling shown as tonight's"
    report = analyse(compat, fresh=found)
    assert report.findings() == analyse(compat).findings(), "no issue is filed for the lane's findings"
    (differs,) = [c for c in found.cells if c.differences]
    (difference,) = differs.differences
    assert difference.variant == SMOKE[0].variants[0] and differs.cell == SMOKE[0].id
    assert differs.moved == ("numpy 2.4.6 → 2.5.0",) and (difference.locked, difference.fresh) == (Outcome.FIXED, Outcome.DIFFERENT)
    (breaks,) = [c for c in found.cells if c.breaks]
    assert breaks.cell == SMOKE[1].id and "no longer resolve" in breaks.breaks and "setuptools>=90" in breaks.breaks
    assert not report.failing, "news about the next lock: the locked night fails nothing"
    assert report.to_json()["reresolved"]["cells"][0]["differences"][0]["fresh"] == "different"


def test_every_view_names_the_moved_distribution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, runs = lane(tmp_path)
    reports = tmp_path
    for run in runs:
        write_json_atomic(reports / "runs" / f"{run.cell}.json", run.to_json())
    summary = tmp_path / "summary.md"
    summary.write_text("")
    assert main(["report", "--reports", str(reports), "--profile", "smoke", "--step-summary", str(summary), "--date", "2026-11-23"]) == 0
    terminal = capsys.readouterr().out
    variant = SMOKE[0].variants[0]
    assert (
        "↻ re-resolved 2 cells" in terminal
        and "numpy 2.4.6 → 2.5.0" in terminal
        and f"{variant}: locked fixed → fresh different" in terminal
    )
    for text in ((reports / "compat.md").read_text(), summary.read_text()):
        assert "## ↻ Re-resolved against today's registry" in text and "attributed to numpy 2.4.6 → 2.5.0" in text
        assert "**fresh lock breaks**" in text and "locks.patch" in text
    html = (reports / "index.html").read_text()
    assert '<b class="moved-dists">numpy 2.4.6 → 2.5.0</b>' in html and "fresh-breaks" in html
    assert f'data-variant="{variant}"' in html and "attributed to numpy 2.4.6 → 2.5.0" in html
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "bugmatrix" / "documents" / "json" / "compat.schema.json").read_text())
    jsonschema.validate(json.loads((reports / "compat.json").read_text()), schema)


@pytest.mark.parametrize(
    ("change", "night", "why"),
    [
        ({"profile": "nightly"}, "2026-11-23", "it re-resolved profile nightly, this report is of profile smoke"),
        ({"profile": None}, "2026-11-23", "it re-resolved no profile (an older lane), this report is of profile smoke"),
        ({}, "2026-11-25", "it resolved on 2026-11-23, this report is of the night of 2026-11-25"),
    ],
)
def test_a_lane_of_another_profile_or_night_is_left_out_in_one_line(
    tmp_path: Path, change: dict[str, object], night: str, why: str
) -> None:
    """The smoke lane of an hour ago, or yesterday's, in the same fresh/ is never presented as this night's."""
    fresh, runs = lane(tmp_path)
    document = json.loads((fresh / "resolve.json").read_text())
    write_json_atomic(fresh / "resolve.json", {**document, **change})
    compat = merge_runs(runs, profile="smoke", commit="c", generated="g")
    said: list[str] = []
    assert load_fresh_lane(fresh, compat, night=night, warn=said.append) is None
    assert said == [f"report: left out the re-resolve lane in {fresh}: {why}"]
    if not change:
        assert load_fresh_lane(fresh, compat, night="2026-11-24") is not None, "the day after a night that crossed midnight"


def _report_of_lane(tmp_path: Path, runs: list[RunRecord], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, str]:
    """The real report over the locked night beside ``<tmp>/fresh``: its exit code, terminal, stderr and compat.md."""
    for run in runs:
        write_json_atomic(tmp_path / "runs" / f"{run.cell}.json", run.to_json())
    code = main(
        ["report", "--reports", str(tmp_path), "--profile", "smoke", "--date", "2026-11-23", "--history", str(tmp_path / "h.jsonl")]
    )
    captured = capsys.readouterr()
    markdown = (tmp_path / "compat.md").read_text() if (tmp_path / "compat.md").exists() else ""
    return code, captured.out, captured.err, markdown


def test_a_corrupt_lane_file_is_its_cells_finding_and_never_a_lost_night(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 45, item 8: one corrupt sibling (even of a cell the lane does not list) used to be exit 2 and no report."""
    fresh, runs = lane(tmp_path)
    moved = SMOKE[0].id
    (fresh / "runs" / f"{moved}.json").write_text('{"schema": "bugmatrix.run/3", "cell": ')  # truncated mid-write
    (fresh / "runs" / "py399-torch0.0.1.json").write_text("not json")  # a cell the lane does not list
    code, terminal, err, markdown = _report_of_lane(tmp_path, runs, capsys)
    assert code == 0, err
    assert f"{moved}: moved numpy 2.4.6 → 2.5.0 (NOT run fresh: its sibling run file cannot be read:" in terminal, terminal
    assert "**not run** in the fresh environment (its sibling run file cannot be read:" in markdown
    assert "not valid JSON" in terminal and "py399" not in terminal


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("{", "not valid JSON"),
        ({"moved": "numpy 2.4.6 → 2.5.0"}, "Expected `array`, got `str` - at `$.cells[0].moved`"),
        ({"cell": 7}, "Expected `str`, got `int` - at `$.cells[0].cell`"),
    ],
    ids=["truncated", "moved-a-string", "cell-a-number"],
)
def test_a_corrupt_resolve_json_leaves_the_lane_out_in_one_line_and_the_night_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str | dict[str, object], said: str
) -> None:
    fresh, runs = lane(tmp_path)
    if isinstance(change, str):
        (fresh / "resolve.json").write_text(change)
    else:
        document = json.loads((fresh / "resolve.json").read_text())
        document["cells"][0].update(change)
        write_json_atomic(fresh / "resolve.json", document)
    code, terminal, err, markdown = _report_of_lane(tmp_path, runs, capsys)
    assert code == 0 and markdown, err
    lines = [line for line in err.splitlines() if line.startswith(f"report: left out the re-resolve lane in {fresh}: ")]
    assert len(lines) == 1 and "resolve.json" in lines[0] and said in lines[0], err
    assert "n; u; m; p; y" not in terminal + markdown, "a string is never read as a list, one character at a time"


def test_a_sibling_run_of_an_earlier_night_is_not_shown_as_tonights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same fresh lock (nothing moved since), but the sibling ran on 2026-11-01: stale, never "(ran fresh)" tonight."""
    fresh, runs = lane(tmp_path)
    moved = SMOKE[0].id
    path = fresh / "runs" / f"{moved}.json"
    old = json.loads(path.read_text())
    write_json_atomic(
        path, {**old, "origin": {**old["origin"], "date": "2026-11-01T03:10:00+00:00"}, "started": "2026-11-01T03:10:00+00:00"}
    )
    compat = merge_runs(runs, profile="smoke", commit="c", generated="g")
    found, files = load_fresh_lane(fresh, compat, night="2026-11-23")
    assert moved in found.stale and not files
    cell = next(c for c in found.cells if c.cell == moved)
    assert cell.sibling == "not-run" and not cell.differences
    code, terminal, _, _ = _report_of_lane(tmp_path, runs, capsys)
    assert code == 0 and "ran fresh" not in terminal and f"{moved}: moved numpy 2.4.6 → 2.5.0 (NOT run fresh" in terminal
