"""A cell finishes, whatever its variants do (issue 34): real cells over planted cases, under every runner.

Each test runs a real pytest over planted case modules (tests/fixtures/planted/cases, copied into a temporary
``cases/``) and checks the one outcome that matters: the run file complete, the variant's outcome, and the very
process it left (its pid, written by the variant after a handshake) named in its ``leaked`` and gone. Output goes
to a file, never a pipe: a process left holding a pipe would hang the test instead of failing it, and a cell that
does not end fails on the subprocess limit. Nothing here waits on a timer: a hang is a variant that never returns,
a wait is a handshake (a line read, a pidfd that becomes readable). Every process a cell starts carries this test's
mark in its environment (:func:`env`), so /proc says what survived it (:func:`survivors`), whatever it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cell.cellspec import SCHEMA as SPEC_SCHEMA
from bugmatrix.cell.recording import deadline_message
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.cell.runners import chosen_runner
from bugmatrix.files import write_json_atomic
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.run.runner import CellRun, CellSpec, unfinished
from bugmatrix.run.runner import run_cell as runner_run_cell

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper, parent-death signal and /proc are Linux's"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch: the plugin seeds it before every variant"),
    pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist: one runner is -n 2"),
]

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "planted" / "cases"
#: A broken harness fails on this instead of hanging the suite; the cells here end in seconds.
LIMIT_S = 180

RUNNERS = {
    "fork": ("-n", "0"),  # the default: a forked process per variant
    "xdist": ("-n", "2", "--bugmatrix-forks", "0"),  # two xdist workers, variants in each worker's own process
    "inline": ("-n", "0", "--bugmatrix-forks", "0"),  # the pytest process itself
}


def plant(tmp_path: Path, *modules: str) -> Path:
    """The named planted modules, copied into ``tmp_path/cases`` (the plugin collects files whose parent is ``cases``)."""
    cases = tmp_path / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for name in modules:
        shutil.copy(PLANTED / f"{name}.py", cases)
    return cases


def command(tmp_path: Path, *modules: str, args: tuple[str, ...] = ()) -> list[str]:
    """A cell's pytest over the named planted modules (:func:`plant`), recording ``tmp_path/run.json``."""
    cases = plant(tmp_path, *modules)
    return [
        sys.executable, "-m", "pytest", str(cases), "-p", "bugmatrix.cell.plugin", "-p", "no:cacheprovider",
        "--bugmatrix-cell", "planted", "--bugmatrix-run-file", str(tmp_path / "run.json"), *args,
    ]  # fmt: skip


#: In the environment of every process a test's cell starts (inherited): /proc finds what outlived the cell by it.
MARK = "BUGMATRIX_TEST_CELL"


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), MARK: str(tmp_path)}


def survivors(tmp_path: Path) -> list[str]:
    """Every live process (not a zombie) that a cell of this test started, as "pid: command line"."""
    mark, found = f"{MARK}={tmp_path}".encode(), []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append(f"{entry.name}: " + (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # ended while we looked, or not ours to read
    return found


def run_cell(tmp_path: Path, *modules: str, args: tuple[str, ...] = ()) -> tuple[int, str]:
    """Run the cell to its end (output to a file); its exit code and output."""
    log = tmp_path / "output.txt"
    with log.open("w") as out:
        code = subprocess.run(
            command(tmp_path, *modules, args=args),
            cwd=tmp_path,
            env=env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=LIMIT_S,
            check=False,
        ).returncode
    return code, log.read_text()


def recorded(run_file: Path) -> tuple[RunRecord, dict[str, VariantRecord]]:
    run = load_run_file(run_file)
    return run, {r.id: r for r in run.results}


def gone(pid: int) -> bool:
    """No such process, not even a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def end_for_good(pid: int) -> None:
    """Kill ``pid`` if it still runs, and reap it if it came back to this process (a subreaper under the tests session)."""
    if not gone(pid):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def named(record: VariantRecord, pid: int) -> bool:
    return any(line.startswith(f"process {pid} ") and line.endswith(": killed") for line in record.leaked)


def scaled(seconds: float) -> float:
    """``seconds`` on a quiet machine, stretched by the load now: a cell's imports run slower on a busy machine."""
    return round(seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)), 1)


def _spec(tmp_path: Path, deadline_s: float) -> str:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "cell_deadline_s": deadline_s}))
    return str(spec)


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_the_cell_deadline_ends_a_hang_nothing_else_ends(tmp_path: Path, runner: str) -> None:
    """A variant that blocks every signal and waits, with a per-variant timeout far away (300 s): the cell deadline
    (from the spec file as the runner writes it; from the option for the in-process runner) kills it, records it
    ``timeout`` saying the deadline passed, writes the run file complete and exits 1.

    The deadline counts from the cell's start, and only a deadline that passes after xdist's workers said what they
    collected can name the hang (before, the cell says so and its run file stays incomplete: this test once failed
    with a KeyError on a loaded machine). So it is scaled by the load, and doubled for another run when the cell says
    it passed before collection: the assertions hold for the run whose deadline passed while the hang ran."""
    for attempt in range(3):
        seconds = scaled(10) * 2**attempt
        given = f"{seconds:g}"
        deadline = ("--bugmatrix-cell-deadline", given) if runner == "inline" else ("--bugmatrix-spec", _spec(tmp_path, seconds))
        args = (*RUNNERS[runner], "--bugmatrix-timeout", "300", *deadline, "-k", "hangs_for_good")
        code, output = run_cell(tmp_path, "cell_ends", args=args)
        if "passed before its variants were collected" not in output:
            break
    run, results = recorded(tmp_path / "run.json")
    assert run.complete and run.finished and run.running == [], output[-3000:]
    record = results["cell_ends::hangs_for_good[cpu]"]
    assert record.outcome == "timeout" and record.message == deadline_message(seconds), record
    assert f"bugmatrix: the cell deadline ({given}s) passed 1 unfinished variant(s) recorded as timeout" in output, output[-3000:]
    assert code == 1


def test_setsid_daemons_ending_side_by_side_never_keep_the_fork_runners_deadline_from_firing(tmp_path: Path) -> None:
    """Issue 45, item 1: a variant that starts ``setsid sleep 4002 &`` from a shell and returns (or ``os._exit(7)``) hung the
    cell for good. The cell process killed one variant's leftovers from one read of /proc and waited for its children
    from a second read, which could hold the daemon of another variant that ended in between: alive, never killed,
    ``wait4`` forever, no run file, and the cell deadline never looked at again. Ten such variants, two at a time (a
    hang holds a third child slot), end side by side again and again; the cell deadline must still end the hang.

    Every daemon that started is named and gone, nothing the cell started survives it, and each variant keeps its own
    outcome (a daemon variant the deadline overtook on a loaded machine is a deadline ``timeout``)."""
    seconds = scaled(20)
    args = ("-n", "0", "--bugmatrix-forks", "3", "--bugmatrix-timeout", "300", "--bugmatrix-spec", _spec(tmp_path, seconds))
    code, output = run_cell(tmp_path, "left_running", "cell_ends", args=(*args, "-k", "daemon or hangs_for_good"))
    run, results = recorded(tmp_path / "run.json")
    assert run.complete and run.finished, output[-3000:]
    hang = results["cell_ends::hangs_for_good[cpu]"]
    assert (hang.outcome, hang.message) == ("timeout", deadline_message(seconds)), hang
    leaked = [line for record in results.values() for line in record.leaked]
    for n in range(10):
        record, pid_file = results[f"left_running::daemon_{n}[cpu]"], tmp_path / f"left_running-daemon_{n}.txt"
        if (record.outcome, record.message) != ("timeout", deadline_message(seconds)):
            assert record.outcome == ("crashed" if n % 2 else "fixed"), record
            pid = int(pid_file.read_text())
            assert any(line.startswith(f"process {pid} (sleep) ") for line in leaked), leaked
            assert gone(pid)
    assert survivors(tmp_path) == []
    assert code == 1


#: xdist's controller, standing in: ten times, two workers leave a shell's ``setsid sleep &`` and exit side by side.
WATCHED = """
import json, os, subprocess, sys
from bugmatrix.cell.recording import WorkerWatch
from bugmatrix.cell.descendants import become_subreaper, descendants_of

become_subreaper()
watch = WorkerWatch()
worker = "import os, subprocess; subprocess.run(['bash', '-c', 'setsid sleep 4003 >/dev/null 2>&1 &']); os._exit(7)"
for _ in range(10):
    workers = [subprocess.Popen([sys.executable, '-c', worker]) for _ in range(2)]
    for w in workers:
        watch.add(w.pid)
    named = [line for w in workers for line in watch.leaked_by(w.pid)]
    left = descendants_of(os.getpid(), spare={w.pid for w in workers})
    print(json.dumps([named, left]), flush=True)
    if left:
        break
"""


def test_xdists_controller_kills_what_workers_dying_side_by_side_left(tmp_path: Path) -> None:
    """Issue 45, item 2 under ``-n 2``: a crashed worker's sleep was recorded ``leaked=[]`` and survived with PPID 1. The
    controller's watch killed what one dead worker left from one read of /proc and waited on its children from a
    second, which could hold the daemon of another worker that died in between: its thread blocked in ``wait4`` for
    good, every later crash was named with nothing, and what those workers left outlived the cell. The real
    :class:`WorkerWatch` in a stand-in controller: each time, both daemons are named (under either worker: two dying
    at once may be named under the first) and none is left."""
    done = subprocess.run([sys.executable, "-c", WATCHED], env=env(tmp_path), capture_output=True, text=True, timeout=LIMIT_S)
    rounds = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(len(named) == 2 and left == [] for named, left in rounds), rounds
    assert len(rounds) == 10, done.stderr[-2000:]
    assert survivors(tmp_path) == []


def through_the_runner(
    tmp_path: Path, runner: str, workers: str, nodes: list[str], extra: tuple[str, ...] = ()
) -> tuple[CellRun, list[str], str]:
    """The planted ``nodes`` (``module.py::variant[cpu]``) run the way every session runs a cell (``run_cell``: its command,
    environment and checks), in this interpreter as the system cell does, from ``tmp_path`` as the checkout (the harness
    linked in); (what it gave, the lines it logged, pytest's output)."""
    cases = plant(tmp_path, *{node.split(".py::")[0] for node in nodes})
    (tmp_path / "bugmatrix").symlink_to(ROOT / "bugmatrix")
    log, said = tmp_path / "output.txt", []

    def execute(command: list[str], environment: dict[str, str]) -> int:
        with log.open("w") as out:
            marked = {**environment, MARK: str(tmp_path)}
            return subprocess.run(
                command, cwd=tmp_path, env=marked, stdout=out, stderr=subprocess.STDOUT, timeout=LIMIT_S, check=False
            ).returncode

    done = runner_run_cell(
        load_matrix(ROOT / "matrix.toml"),
        CellSpec("planted", None, runner=chosen_runner(runner, int(workers))),
        tmp_path / "runs" / "planted.json",
        execute=execute,
        root=tmp_path,
        select=[str(cases / node) for node in nodes],
        extra=("-p", "bugmatrix.cell.plugin", *extra),
        log=said.append,
    )
    return done, said, log.read_text()


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_no_process_survives_the_cell_whatever_its_variants_leave_and_however_they_end(tmp_path: Path, runner: str) -> None:
    """Issue 45, item 2: ``setsid`` grandchildren of variants that return (a double fork; a shell's ``setsid sleep &``), then
    an abort with a forked child alive. They outlived the cell under every runner; under ``-n 2`` the child held the
    dead worker's channel open, so xdist never heard of the death; in-process (``--bugmatrix-forks 0``) the abort ends
    the cell process itself, and its child survived it. Now whatever runs a variant is a subreaper and kills and names
    what the variant left, on that variant only (xdist's controller: what a dead worker left, on its crash record), and
    what a cell that died itself left comes back to the runner that started it (a subreaper while the cell runs), which
    kills it and says so. /proc then shows none of them, and each record keeps its own outcome."""
    nodes = ["cell_ends.py::leaves_setsid_grandchild[cpu]", "left_running.py::daemon_0[cpu]", "planted_orphans.py::leaves_child[cpu]"]
    # The fork runner: one child at a time (two ending together may have their orphans named under the first reaped).
    done, said, output = through_the_runner(tmp_path, runner, "1" if runner == "fork" else "2", nodes)
    assert survivors(tmp_path) == [], output[-3000:]
    pids = [int((tmp_path / f).read_text()) for f in ("grandchild.txt", "left_running-daemon_0.txt", "orphans-leaves_child.txt")]
    assert all(gone(pid) for pid in pids), pids
    run, results = recorded(done.run_file)
    for node, pid in zip(nodes[:2], pids, strict=False):
        record = results[node.replace(".py::", "::")]
        assert record.outcome == "fixed" and len(record.leaked) == 1 and named(record, pid), record
    if runner == "inline":  # the abort ended the cell process: its child was the runner's to kill, and the run is unfinished
        assert done.returncode == -signal.SIGABRT and not run.complete, output[-3000:]
        assert done.unfinished is not None and done.unfinished.endswith("it was running planted_orphans::leaves_child[cpu]")
        assert f"process {pids[2]} (" in said[-1] and said[-1].endswith("still running after the cell's pytest ended: killed"), said
    else:
        assert done.returncode == 1 and run.complete and done.unfinished is None, output[-3000:]
        aborted = results["planted_orphans::leaves_child[cpu]"]
        assert aborted.outcome == "crashed" and len(aborted.leaked) == 1 and named(aborted, pids[2]), aborted
        assert not [line for line in said if line.startswith("killed ")], "the cell itself killed what its variants left"


def test_a_variant_ending_the_cell_process_with_the_import_failed_code_is_an_unfinished_run(tmp_path: Path) -> None:
    """Issue 45, item 3: in-process, ``os._exit(7)`` ends the cell's pytest with 7, which is also the code of a stack that
    does not import: the sessions accepted it, and nox said the cell succeeded over a run file saying ``complete: false``.
    The runner now decides from the run file, so the sessions fail the cell, saying why."""
    done, _, output = through_the_runner(tmp_path, "inline", "2", ["left_running.py::daemon_1[cpu]"])
    assert (done.returncode, done.install_failed) == (7, None), output[-3000:]
    assert done.unfinished == (
        f"{done.run_file} is not complete: 0 of 1 selected variant(s) recorded; it was running left_running::daemon_1[cpu]"
    )
    assert survivors(tmp_path) == []


def test_a_cell_that_records_nothing_is_unfinished_even_beside_an_earlier_complete_run_file(tmp_path: Path) -> None:
    """A cell that ends before it writes (here: refused at its start) leaves the previous run's file, complete and
    looking like tonight's: the runner sees that file started before this run did."""
    earlier = tmp_path / "runs" / "planted.json"
    write_json_atomic(
        earlier, RunRecord("planted", {}, {}, "2020-01-01T00:00:00+00:00", "2020-01-01T00:01:00+00:00", complete=True).to_json()
    )
    done, _, output = through_the_runner(tmp_path, "inline", "2", ["left_running.py::daemon_0[cpu]"], ("--bugmatrix-forks", "-1"))
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output[-3000:]
    assert done.unfinished is not None and done.unfinished.startswith(
        f"{earlier} was not written by this run (it is from a run started 2020-01-01T00:00:00+00:00)"
    )


@pytest.mark.parametrize("started", ["2020-01-01T00:00:00+00:00", "2099-01-01T00:00:00", "not a time", ""])
def test_a_run_file_this_run_did_not_write_is_unfinished_whatever_its_start_stamp(tmp_path: Path, started: str) -> None:
    """Older, naive (a foreign writer: the cell side writes aware stamps), malformed or empty starts each give the reason,
    never a TypeError from comparing naive with aware."""
    run_file = tmp_path / "run.json"
    write_json_atomic(run_file, RunRecord("planted", {}, {}, started, "2099-01-01T00:01:00+00:00", complete=True).to_json())
    since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    reason = unfinished(run_file, since)
    assert reason is not None and reason.startswith(f"{run_file} was not written by this run"), reason
    fresh = RunRecord("planted", {}, {}, "2026-01-02T00:00:00+00:00", "2026-01-02T00:01:00+00:00", complete=True)
    write_json_atomic(run_file, fresh.to_json())
    assert unfinished(run_file, since) is None


def test_a_second_pytest_on_the_same_run_file_waits_for_the_first(tmp_path: Path) -> None:
    """The run file's lock (``.run.json.lock``) is held here, as a first cell would; a second cell says in one line that it
    waits, writes nothing meanwhile, and runs once the lock is let go."""
    lock = tmp_path / ".run.json.lock"
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    os.write(holder, b"4242\n")
    log = tmp_path / "output.txt"
    with log.open("w") as out:
        second = subprocess.Popen(
            command(tmp_path, "planted", args=("-p", "no:xdist", "-k", "fixed")),
            cwd=tmp_path,
            env=env(tmp_path),
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert second.stderr is not None
        said = second.stderr.readline()  # a handshake: the line it writes before it waits
        assert said.startswith(f"bugmatrix: another pytest (pid 4242) is writing {tmp_path / 'run.json'}; waiting"), said
        assert not (tmp_path / "run.json").exists(), "nothing written while the first holds the lock"
        assert second.poll() is None, "it waits, it does not give up"
        os.close(holder)  # the first one ends
        second.communicate(timeout=LIMIT_S)
    run, results = recorded(tmp_path / "run.json")
    assert run.complete and results["planted::fixed[cpu]"].outcome == "fixed", log.read_text()[-2000:]
    assert not lock.exists(), "its own lock file is removed on the way out"


@pytest.mark.parametrize("runner", ["fork", "xdist"])
def test_the_cell_dies_with_the_process_that_started_it(tmp_path: Path, runner: str) -> None:
    """nox killed: its pytest (and xdist's workers) get SIGKILL from the kernel (parent-death signal) instead of writing
    the run file on beside a rerun. A stand-in for nox starts the cell with a variant that never ends, says the cell's
    pid, and is SIGKILLed once the cell has configured (its header line): the cell's pidfd then becomes readable."""
    cell = command(tmp_path, "cell_ends", args=(*RUNNERS[runner], "--bugmatrix-timeout", "300", "-k", "hangs_for_good"))
    stand_in = f"import subprocess, sys; p = subprocess.Popen({cell!r}); print(p.pid, flush=True); p.wait()"
    errors = (tmp_path / "stderr.txt").open("w")  # what the killed cell's processes say as they go, kept out of this run's output
    nox = subprocess.Popen(
        [sys.executable, "-c", stand_in], cwd=tmp_path, env=env(tmp_path), stdout=subprocess.PIPE, stderr=errors, text=True
    )
    assert nox.stdout is not None
    pid = int(nox.stdout.readline())
    pidfd = os.pidfd_open(pid)
    try:
        for line in nox.stdout:  # the cell's own output: its header comes after it configured (and asked for the signal)
            if line.startswith("bugmatrix:"):
                break
        nox.kill()
        nox.wait(timeout=LIMIT_S)
        readable, _, _ = select.select([pidfd], [], [], LIMIT_S)
        assert readable == [pidfd], f"pytest {pid} outlived the process that started it"
    finally:
        os.close(pidfd)
        end_for_good(pid)
        nox.stdout.close()
        errors.close()


def test_the_cell_dies_with_a_runner_killed_before_its_pytest_configured(tmp_path: Path) -> None:
    """Issue 45, item 4: nox SIGKILLed before the cell's pytest configured (the parent-death signal was asked for there,
    and the kernel sends none for a death already past): pytest ran on as an orphan until it finished. The runner now
    names itself in the cell's environment (``cell_env``), and the cell's first line (the plugin's import) asks for
    the signal and ends at once when its runner is gone. The stand-in for nox starts the cell with that environment and
    kills itself as soon as the cell's process exists."""
    cell = command(tmp_path, "cell_ends", args=("-n", "0", "--bugmatrix-timeout", "300", "-k", "hangs_for_good"))
    output = tmp_path / "output.txt"
    stand_in = (
        "import os, signal, subprocess; from bugmatrix.run.command import cell_env; "
        f"p = subprocess.Popen({cell!r}, env={{**cell_env(), {MARK!r}: {str(tmp_path)!r}}}, stdout=open({str(output)!r}, 'w'), "
        "stderr=subprocess.STDOUT); print(p.pid, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    nox = subprocess.run([sys.executable, "-c", stand_in], cwd=tmp_path, env=env(tmp_path), capture_output=True, text=True, timeout=LIMIT_S)
    assert nox.returncode == -signal.SIGKILL, nox.stderr
    pid = int(nox.stdout)
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        pidfd = None  # ended and reaped already
    try:
        if pidfd is not None:
            readable, _, _ = select.select([pidfd], [], [], LIMIT_S)
            assert readable == [pidfd], f"pytest {pid} outlived the runner that started it: {output.read_text()[-2000:]}"
        assert "bugmatrix:" not in output.read_text(), "it ended before it configured"
    finally:
        if pidfd is not None:
            os.close(pidfd)
        end_for_good(pid)


def test_a_worker_that_finished_its_tests_is_not_waited_for_a_dead_one_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """xdist's controller calls pytest_testnodedown for a worker that finished normally while that worker is still alive
    (it waits for the controller to let it go): waiting there for its end only timed out, 30 s at the end of every xdist
    cell (the tests session's own included). A worker that died is still waited for: what it left is named."""
    from types import SimpleNamespace

    from bugmatrix.cell.recording import WorkerWatch

    asked: list[int] = []
    watch = WorkerWatch()
    monkeypatch.setattr(watch, "leaked_by", lambda pid: asked.append(pid) or ())
    node = SimpleNamespace(gateway=SimpleNamespace(_rinfo=lambda: SimpleNamespace(pid=4242)))
    watch.pytest_testnodedown(node, None)
    assert asked == [], "a finished worker is not waited for"
    watch.pytest_testnodedown(node, "worker 'gw0' crashed while running 'x'")
    assert asked == [4242], "a dead worker's leftovers are waited for and named"
