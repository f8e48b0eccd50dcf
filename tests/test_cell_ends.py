"""A cell finishes, whatever its variants do (issue 34): real cells over planted cases, under every runner.

Each test runs a real pytest over planted case modules (tests/fixtures/planted/cases, copied into a temporary
``cases/``) and checks the one outcome that matters: the run file complete, the variant's outcome, and the very
process it left (its pid, written by the variant after a handshake) named in its ``leaked`` and gone. Output goes
to a file, never a pipe: a process left holding a pipe would hang the test instead of failing it, and a cell that
does not end fails on the subprocess limit. Nothing here waits on a timer: a hang is a variant that never returns,
a wait is a handshake (a line read, a pidfd that becomes readable).
"""

from __future__ import annotations

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
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file

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


def command(tmp_path: Path, *modules: str, args: tuple[str, ...] = ()) -> list[str]:
    """A cell's pytest over the named planted modules (copied into ``tmp_path/cases``), recording ``tmp_path/run.json``."""
    cases = tmp_path / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for name in modules:
        shutil.copy(PLANTED / f"{name}.py", cases)
    return [
        sys.executable, "-m", "pytest", str(cases), "-p", "bugmatrix.cell.plugin", "-p", "no:cacheprovider",
        "--bugmatrix-cell", "planted", "--bugmatrix-run-file", str(tmp_path / "run.json"), *args,
    ]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def run_cell(tmp_path: Path, *modules: str, args: tuple[str, ...] = ()) -> tuple[int, str]:
    """Run the cell to its end (output to a file); its exit code and output."""
    log = tmp_path / "output.txt"
    with log.open("w") as out:
        code = subprocess.run(
            command(tmp_path, *modules, args=args),
            cwd=tmp_path,
            env=env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=LIMIT_S,
            check=False,
        ).returncode
    return code, log.read_text()


def recorded(tmp_path: Path) -> tuple[RunRecord, dict[str, VariantRecord]]:
    run = load_run_file(tmp_path / "run.json")
    return run, {r.id: r for r in run.results}


def gone(pid: int) -> bool:
    """No such process, not even a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def named(record: VariantRecord, pid: int) -> bool:
    return any(line.startswith(f"process {pid} ") and line.endswith(": killed") for line in record.leaked)


@pytest.mark.parametrize("runner", ["fork", "xdist"])
def test_a_variant_that_forks_and_crashes_is_crashed_its_child_named_and_killed(tmp_path: Path, runner: str) -> None:
    """``os.abort()`` with a forked child alive. Under xdist the child held the dead worker's channel open, so the cell
    never ended and the crash was never recorded; now the controller (a subreaper) kills what the worker left, xdist
    reports the crash, and the crash record names the child. The other variant keeps its own clean record."""
    # One child at a time under the fork runner: two ending together may have their orphans named under the first reaped.
    args = (*RUNNERS[runner], *(("--bugmatrix-forks", "1") if runner == "fork" else ()), "-k", "leaves_child or fixed")
    code, output = run_cell(tmp_path, "planted_orphans", "planted", args=args)
    run, results = recorded(tmp_path)
    assert run.complete and set(results) == {"planted_orphans::leaves_child[cpu]", "planted::fixed[cpu]"}, output[-3000:]
    crashed, child = results["planted_orphans::leaves_child[cpu]"], int((tmp_path / "orphans-leaves_child.txt").read_text())
    assert crashed.outcome == "crashed", crashed
    assert named(crashed, child), crashed.leaked
    assert gone(child)
    fixed = results["planted::fixed[cpu]"]
    assert (fixed.outcome, fixed.leaked) == ("fixed", ()), fixed
    assert code == 1, "the crash contradicts its expectation; nothing else ended the run"


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_setsid_grandchild_of_a_variant_that_returns_is_killed_and_named(tmp_path: Path, runner: str) -> None:
    """A double fork and ``setsid`` escapes every process group; the variant then returns. It outlived the cell and the
    variant was ``fixed`` with nothing leaked; now the process that ran the variant is a subreaper, and the grandchild
    is found under it, killed and named on that variant (its outcome stays its own)."""
    code, output = run_cell(tmp_path, "cell_ends", args=(*RUNNERS[runner], "-k", "leaves_setsid_grandchild"))
    run, results = recorded(tmp_path)
    grandchild = int((tmp_path / "grandchild.txt").read_text())
    record = results["cell_ends::leaves_setsid_grandchild[cpu]"]
    assert run.complete and record.outcome == "fixed", output[-3000:]
    assert named(record, grandchild), record.leaked
    assert gone(grandchild)
    assert code == 0, output[-2000:]


#: Seconds: a hang's cell ends this long after it started.
DEADLINE = "10"


def _spec(tmp_path: Path, deadline_s: float) -> str:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "cell_deadline_s": deadline_s}))
    return str(spec)


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_the_cell_deadline_ends_a_hang_nothing_else_ends(tmp_path: Path, runner: str) -> None:
    """A variant that blocks every signal and waits, with a per-variant timeout far away (300 s): the cell deadline
    (from the spec file as the runner writes it; from the option for the in-process runner) kills it, records it
    ``timeout`` saying the deadline passed, writes the run file complete and exits 1. The deadline counts from the
    cell's start: it is long enough for xdist's workers to have collected (else nothing could be named)."""
    deadline = ("--bugmatrix-cell-deadline", DEADLINE) if runner == "inline" else ("--bugmatrix-spec", _spec(tmp_path, float(DEADLINE)))
    args = (*RUNNERS[runner], "--bugmatrix-timeout", "300", *deadline, "-k", "hangs_for_good")
    code, output = run_cell(tmp_path, "cell_ends", args=args)
    run, results = recorded(tmp_path)
    record = results["cell_ends::hangs_for_good[cpu]"]
    assert run.complete and run.finished and run.running == [], output[-3000:]
    assert record.outcome == "timeout" and record.message.startswith(
        f"the cell deadline ({DEADLINE}s, [harness] cell_deadline_s) passed"
    ), record
    assert f"bugmatrix: the cell deadline ({DEADLINE}s) passed 1 unfinished variant(s) recorded as timeout" in output, output[-3000:]
    assert code == 1


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
            env=env(),
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
    run, results = recorded(tmp_path)
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
    nox = subprocess.Popen([sys.executable, "-c", stand_in], cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=errors, text=True)
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
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
        nox.stdout.close()
        errors.close()
