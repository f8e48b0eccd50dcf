"""All-or-nothing outputs, documented exit codes, one report at a time per directory (issue 22 items 3 and 4).

A report that cannot write says one line naming the path, exits 3, and
leaves every previous output -- compat.json, compat.md, index.html, the
history, the step summary, the published copies, the baseline, the README --
byte for byte as it was: tried with an ``OSError`` injected at a chosen
write, and with a real full tmpfs where this machine lets root mount one.
Two real report processes into one directory take turns: the second says it
waits, and both nights end up in the history.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import bugmatrix.files
from bugmatrix.cli import main
from bugmatrix.errors import WRITE_EXIT_CODE
from bugmatrix.files import write_json_atomic
from bugmatrix.report import command
from bugmatrix.report import options as options_module
from bugmatrix.report.night import analyse
from bugmatrix.report.readme import END, START
from tests.planfiles import plan_of_runs
from tests.test_report import fixture_compat

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "runs"


def fixture_plan(path: Path) -> Path:
    """A smoke plan of exactly the fixture runs' four cells (a --profile alone would plan today's smoke cells, which they are not)."""
    return Path(plan_of_runs(FIXTURES.parent, out=path))


def snapshot(*roots: Path) -> dict[Path, bytes]:
    """Every file under ``roots``, byte for byte."""
    return {p: p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[str]]:
    """A reports dir with one night already reported into every output, and the argv of the next night (every output asked for)."""
    reports, reference = tmp_path / "reports", tmp_path / "reference"
    shutil.copytree(FIXTURES, reports / "runs")
    (reference / "runs").mkdir(parents=True)
    (reference / "runs" / "stale-cell.json").write_text("{}")  # --publish removes it, but only once everything is written
    monkeypatch.setattr(options_module, "REFERENCE", reference)
    write_json_atomic(tmp_path / "baseline.json", analyse(fixture_compat()).to_json())
    (tmp_path / "README.md").write_text(f"# x\n{START}\nold\n{END}\n", encoding="utf-8")
    (tmp_path / "summary.md").write_text("# earlier steps\n", encoding="utf-8")
    argv = ["report", "--reports", str(reports), "--plan", str(fixture_plan(tmp_path / "plan.json")), "--baseline", str(tmp_path / "baseline.json"),
            "--step-summary", str(tmp_path / "summary.md"), "--publish", "--readme", str(tmp_path / "README.md"), "--update-baseline"]  # fmt: skip
    assert main([*argv, "--date", "2026-11-23"]) == 0
    return tmp_path, reports, argv


def outputs_of(argv: list[str]) -> list[Path]:
    """The files one report writes with ``argv``, in the order it writes them (a dry pass: write_files records, writes nothing)."""
    seen: list[Path] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(command, "write_files", lambda contents, remove=(): seen.extend(contents))
        assert main(argv) == 0
    return seen


@pytest.mark.parametrize("failing", ["first", "fourth", "last"])
def test_an_oserror_at_any_write_replaces_nothing_and_exits_3(
    setup: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], failing: str
) -> None:
    tmp_path, _, argv = setup
    argv = [*argv, "--date", "2026-11-24"]
    before = snapshot(tmp_path)
    planned = outputs_of(argv)
    assert len(planned) == 14, "compat.json/md, index.html, history, step summary, 4 runs + 3 outputs published, README, baseline"
    target = planned[{"first": 0, "fourth": 3, "last": -1}[failing]]
    real = bugmatrix.files._write_temporary

    def no_space_for_target(path: Path, content: str | bytes) -> str:
        if path == target:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, content)

    monkeypatch.setattr(bugmatrix.files, "_write_temporary", no_space_for_target)
    capsys.readouterr()
    assert main(argv) == WRITE_EXIT_CODE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "nothing was replaced" in err, err
    assert f"cannot write {target} " in err, "names the path it could not write"
    assert snapshot(tmp_path) == before, "every previous output byte for byte as it was, no temporary left"


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, options: str) -> Iterator[Path]:
    """A tmpfs at ``mount`` for the block (root only); skips, saying why, where it cannot be mounted."""
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root; the injected-OSError test covers the same path")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the injected-OSError test covers the same path")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def full_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, mounted for the test."""
    with mounted_tmpfs(tmp_path / "tmpfs", "size=1m") as mount:
        yield mount


@pytest.fixture
def readonly_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs: ``access()`` says root may write there, only a real write says it may not."""
    with mounted_tmpfs(tmp_path / "readonly", "size=1m,ro") as mount:
        yield mount


@pytest.mark.parametrize("where", ["read-only", "proc"])
def test_an_unwritable_issue_bodies_or_site_directory_is_one_line_before_anything_is_written(
    readonly_tmpfs: Path, tmp_path: Path, where: str
) -> None:
    """Issue 34's probes: ``report --issue-bodies`` and ``site --out`` on a read-only mount or under /proc were tracebacks."""
    reports = tmp_path / "reports"
    shutil.copytree(FIXTURES, reports / "runs")
    base = readonly_tmpfs if where == "read-only" else Path("/proc/no-such-pid")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "bugmatrix", "report", "--reports", str(reports), "--plan", str(fixture_plan(tmp_path / "plan.json"))]
    bodies = subprocess.run([*command, "--issue-bodies", str(base / "bodies")], env=env, capture_output=True, text=True, timeout=120)
    assert bodies.returncode == 2 and bodies.stderr.count("\n") == 1, bodies.stderr[-2000:]
    assert bodies.stderr.startswith(f"bugmatrix: error: --issue-bodies {base / 'bodies'}: cannot write into ")
    assert not (reports / "compat.json").exists(), "checked before anything was written"
    assert subprocess.run(command, env=env, capture_output=True, text=True, timeout=120).returncode == 0
    site = [sys.executable, "-m", "bugmatrix", "site", "--reports", str(reports), "--date", "2026-11-24", "--out", str(base / "site")]
    built = subprocess.run(site, env=env, capture_output=True, text=True, timeout=120)
    assert built.returncode == 2 and built.stderr.count("\n") == 1, built.stderr[-2000:]
    assert built.stderr.startswith(f"bugmatrix: error: --out {base / 'site'}: cannot write into "), built.stderr


def test_a_site_that_runs_out_of_space_leaves_nothing_and_exits_3(full_tmpfs: Path, tmp_path: Path) -> None:
    """The site is staged beside --out and renamed into place: a full disk mid-copy is one line, exit 3, nothing left there."""
    reports = tmp_path / "reports"
    shutil.copytree(FIXTURES, reports / "runs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    report = [sys.executable, "-m", "bugmatrix", "report", "--reports", str(reports), "--plan", str(fixture_plan(tmp_path / "plan.json"))]
    assert subprocess.run(report, env=env, capture_output=True, text=True, timeout=120).returncode == 0
    (full_tmpfs / "filler").write_bytes(b"\0" * max(0, shutil.disk_usage(full_tmpfs).free - 16 * 1024))
    site = [sys.executable, "-m", "bugmatrix", "site", "--reports", str(reports), "--date", "2026-11-24", "--out", str(full_tmpfs / "site")]
    built = subprocess.run(site, env=env, capture_output=True, text=True, timeout=120)
    assert built.returncode == 3 and built.stderr.count("\n") == 1 and "No space left on device" in built.stderr, built.stderr[-2000:]
    assert sorted(p.name for p in full_tmpfs.iterdir()) == ["filler"], "no site, no .site.partial"


def test_a_full_disk_replaces_nothing_and_exits_3(full_tmpfs: Path, tmp_path: Path) -> None:
    """The issue's reproduction: build/reports on a small tmpfs; the next night's report runs out of space."""
    reports = full_tmpfs / "reports"
    shutil.copytree(FIXTURES, reports / "runs")
    write_json_atomic(tmp_path / "baseline.json", analyse(fixture_compat()).to_json())
    argv = [sys.executable, "-m", "bugmatrix", "report", "--reports", str(reports), "--plan", str(fixture_plan(tmp_path / "plan.json")),
            "--baseline", str(tmp_path / "baseline.json")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run([*argv, "--date", "2026-11-23"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    free = shutil.disk_usage(full_tmpfs).free
    (full_tmpfs / "filler").write_bytes(b"\0" * max(0, free - 16 * 1024))  # room for a few small files, not for the report
    before = snapshot(reports)
    second = subprocess.run([*argv, "--date", "2026-11-24"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == WRITE_EXIT_CODE, second.stdout[-1000:] + second.stderr[-1000:]
    assert second.stderr.count("\n") == 1 and "No space left on device" in second.stderr and "nothing was replaced" in second.stderr
    assert "Traceback" not in second.stderr
    assert snapshot(reports) == before, "every previous output byte for byte as it was, no temporary left"


def test_two_reports_into_one_directory_take_turns_and_keep_both_nights(tmp_path: Path) -> None:
    """Two real processes, different profiles and dates: the second waits (saying so), both nights are in the history,
    and compat.json, compat.md and index.html all come from the same report."""
    reports = tmp_path / "reports"
    shutil.copytree(FIXTURES, reports / "runs")
    write_json_atomic(tmp_path / "baseline.json", analyse(fixture_compat()).to_json())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(profile: str, date: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "bugmatrix", "report", "--reports", str(reports), "--profile", profile, "--date", date,
                "--baseline", str(tmp_path / "baseline.json")]  # fmt: skip
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # The test holds the directory's lock first, so both reports are certainly inside the race window, not by a timer.
    held = os.open(reports, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    processes = [start("nightly", "2026-11-23"), start("smoke", "2026-11-24")]
    try:
        for process in processes:
            line = process.stderr.readline()  # blocks until the report says it waits
            assert line.startswith("report: waiting for another report writing into"), line
    finally:
        os.close(held)  # releases the lock: the two go one after the other
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    nights = [json.loads(line) for line in (reports / "history.jsonl").read_text().splitlines()]
    assert sorted((n["date"], n["profile"]) for n in nights) == [("2026-11-23", "nightly"), ("2026-11-24", "smoke")], "no night lost"
    compat = json.loads((reports / "compat.json").read_text())
    markdown = (reports / "compat.md").read_text()
    html = (reports / "index.html").read_text()
    assert f"Profile `{compat['profile']}`" in markdown and f"generated {compat['generated']}" in markdown
    assert re.search(rf"<title>bugmatrix — {compat['profile']} — {re.escape(compat['generated'])}</title>", html)


def test_a_new_view_is_one_entry_in_the_outputs_registry(tmp_path: Path) -> None:
    """An output added through ``ReportOptions.extra`` alone is checked first, written with the others (all or nothing), and says its line."""
    from bugmatrix.report.options import ReportOptions
    from bugmatrix.report.outputs import Night, Output

    reports = tmp_path / "reports"
    shutil.copytree(FIXTURES, reports / "runs")
    counted = tmp_path / "views" / "count.txt"

    def render(night: Night) -> tuple[dict[Path, str | bytes], list[Path]]:
        return {counted: f"{len(night.report.compat.variants)} variants, {len(night.runs)} cells\n"}, []

    view = Output("count", render, line=lambda night: f"count: -> {counted}")
    options = ReportOptions(
        reports=reports, root=tmp_path, plan=fixture_plan(tmp_path / "plan.json"), baseline=tmp_path / "none.json", extra=(view,)
    )
    with pytest.raises(command.BugmatrixError, match=r"none\.json: no such file"):
        command.run_report(options)  # a bad input stops the report before any output, the new one included
    assert not counted.exists()
    options = ReportOptions(reports=reports, root=tmp_path, plan=fixture_plan(tmp_path / "plan.json"), extra=(view,))
    assert command.run_report(options) == 0
    assert (
        counted.read_text()
        == f"{len(json.loads((reports / 'compat.json').read_text())['variants'])} variants, {len(list(FIXTURES.glob('*.json')))} cells\n"
    )

    refused = Output("refused", render, check=lambda options: (_ for _ in ()).throw(command.BugmatrixError("views: refused")))
    counted.unlink()
    with pytest.raises(command.BugmatrixError, match="views: refused"):
        command.run_report(ReportOptions(reports=reports, root=tmp_path, plan=fixture_plan(tmp_path / "plan.json"), extra=(view, refused)))
    assert not counted.exists(), "an output's check runs before anything is written"


def test_a_gpu_run_committed_beside_the_reference_survives_a_cpu_publish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--publish`` replaces the CPU reference's run files, keeps the runs recorded on a GPU, and its pages show them."""
    reports, reference = tmp_path / "reports", tmp_path / "reference"
    shutil.copytree(FIXTURES, reports / "runs")
    (reference / "runs").mkdir(parents=True)
    committed = sorted((ROOT / "reports" / "runs").glob("system-cuda-h200*.json"))
    assert {p.stem for p in committed} == {f"system-cuda-h200{v}" for v in ("", "-pl2.0.3", "-pl2.0.6", "-pl2.0.7")}
    for path in committed:
        shutil.copy(path, reference / "runs")
    gpu = json.loads(committed[0].read_text())
    write_json_atomic(reference / "runs" / "py311-gone.json", {**gpu, "cell": "py311-gone", "environment": {"cuda_available": False}})
    monkeypatch.setattr(options_module, "REFERENCE", reference)
    plan = str(fixture_plan(tmp_path / "plan.json"))
    assert main(["report", "--reports", str(reports), "--plan", plan, "--publish", "--baseline", str(tmp_path / "x.json")]) == 2
    assert main(["report", "--reports", str(reports), "--plan", plan, "--publish"]) == 0
    kept = sorted(p.stem for p in (reference / "runs").glob("*.json"))
    assert {p.stem for p in committed} <= set(kept), "the GPU runs survive"
    assert all((reference / "runs" / p.name).read_bytes() == p.read_bytes() for p in committed), "byte for byte"
    assert "py311-gone" not in kept, "a CPU cell no longer run is removed"
    assert set(kept) - {p.stem for p in committed} == {p.stem for p in FIXTURES.glob("*.json")}
    published = json.loads((reference / "compat.json").read_text())
    cells = {c["id"]: c for c in published["cells"]}
    assert {p.stem for p in committed} <= set(cells), "the reference's pages read the GPU runs beside the night's"
    assert cells["system-cuda-h200"]["environment"]["gpu"] == "NVIDIA H200" and cells["system-cuda-h200"]["environment"]["cuda"] == "13.0"
    page = (reference / "compat.md").read_text()
    assert "NVIDIA H200" in page and "CUDA: ✓ fixed at torch 2.11.0 (NVIDIA H200" in page, page[:3000]
