"""The fork runner: children that report, die or hang; CUDA left alone in the cell process; torch's thread pool after a fork;
what is imported once; leaks that are the variant's own.

Process faults through a whole cell are in test_faults.py; here are the pieces: :class:`ForkPool` on plain
functions (no torch), and planted cases in a real pytest that check what the cell process did or did not do
before forking. Every check has a run that shows it can fail (a parallel op in the parent hangs the child; the
cell process running variants itself does call CUDA).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from bugmatrix.cell.forkrun import ForkPool, describe_status
from bugmatrix.cell.preload import MANY_MODULES, uncovered_imports
from bugmatrix.cell.runfile import VariantRecord, load_run_file
from bugmatrix.cell.runners import RUNNERS, Fork, Inline, Xdist, chosen_runner, default_workers
from bugmatrix.errors import BugmatrixError
from bugmatrix.run.command import CellSpec

NEEDS_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
NEEDS_LIGHTNING = pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs lightning (an axis module)")

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "planted"


def _returns() -> dict[str, int]:
    return {"pid": os.getpid()}


def _exits() -> None:
    os._exit(4)


def _is_killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _raises() -> None:
    msg = "harness bug"
    raise RuntimeError(msg)


def _prints_and_returns() -> int:
    print("to stdout")
    print("to stderr", file=sys.stderr)
    return 1


def _blocks() -> None:
    """Hangs for good: every signal but SIGKILL blocked, then waits for one (the pool's deadline ends it)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
    signal.pause()


def test_a_child_reports_its_result_and_what_it_printed() -> None:
    with ForkPool(2) as pool:
        end = pool.call(_returns, deadline_s=60)
        printed = pool.call(_prints_and_returns, deadline_s=60)
    assert end.result["pid"] != os.getpid() and end.status == "" and not end.timed_out
    assert (printed.result, printed.stdout, printed.stderr) == (1, "to stdout\n", "to stderr\n")


@pytest.mark.parametrize(
    ("fn", "status"),
    [(_exits, "exited with code 4"), (_is_killed, "was killed by signal 9 (SIGKILL)"), (_raises, "exited with code 70")],
)
def test_a_child_that_dies_is_said_with_its_exit_code_or_signal(fn: object, status: str) -> None:
    with ForkPool(1) as pool:
        end = pool.call(fn, deadline_s=60)  # type: ignore[arg-type]
    assert (end.result, end.status, end.timed_out) == (None, status, False)
    if fn is _raises:
        assert "RuntimeError: harness bug" in end.stderr, "the harness's own failure in a child is on its stderr"


def test_a_child_past_its_deadline_is_killed_with_its_group_and_the_others_go_on() -> None:
    with ForkPool(2) as pool:
        pool.start("hangs", _blocks, deadline_s=1)
        pool.start("returns", _returns, deadline_s=60)
        ends = {end.key: end for end in (pool.next_end(), pool.next_end())}
    assert ends["hangs"].timed_out and ends["hangs"].status == "was killed by signal 9 (SIGKILL)"
    assert ends["returns"].result is not None and not ends["returns"].timed_out


def test_leaving_the_pool_kills_what_still_runs() -> None:
    with ForkPool(1) as pool:
        child = pool.start("hangs", _blocks, deadline_s=600)
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: not running, not a zombie


def _leaves_a_setsid_grandchild_and_crashes() -> None:
    """Forks a child that starts its own session and forks again; the grandchild says its pid, then sleeps for good. Then crashes."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()  # out of the variant's process group: its group kill misses it
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
            signal.pause()
        os._exit(0)
    pid = os.read(read, 32).decode()  # a handshake, not a sleep: the grandchild is running
    print(pid, flush=True)
    os._exit(3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's prctl(PR_SET_CHILD_SUBREAPER)")
def test_a_setsid_grandchild_of_a_crashed_child_is_found_killed_and_named() -> None:
    with ForkPool(2) as pool:
        end = pool.call(_leaves_a_setsid_grandchild_and_crashes, deadline_s=60)
        grandchild = int(end.stdout.strip())
        assert end.status == "exited with code 3" and end.result is None
        assert [line for line in end.leaked if line.startswith(f"process {grandchild} ")], end.leaked
        assert "still running after the variant ended: killed" in end.leaked[0]
        with pytest.raises(ProcessLookupError):
            os.kill(grandchild, 0)  # killed and reaped: no process, not even a zombie


def test_describe_status_names_the_signal() -> None:
    assert describe_status(signal.SIGABRT) == "was killed by signal 6 (SIGABRT)"
    assert describe_status(3 << 8) == "exited with code 3"


def test_workers_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUGMATRIX_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.setenv("BUGMATRIX_WORKERS", "two")
    with pytest.raises(BugmatrixError, match="BUGMATRIX_WORKERS='two' is not a number of processes"):
        default_workers()


def test_the_runner_modes_have_one_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """fork: one process imports, N children; xdist: N workers, each in-process; inline: one process. The cell's spec
    chooses its mode once, from $BUGMATRIX_RUNNER / $BUGMATRIX_WORKERS; an unknown mode is one line naming the choices."""
    assert Fork(2).pytest_args() == ["-n", "0", "--bugmatrix-forks", "2"]
    assert Xdist(2).pytest_args() == ["-n", "2", "--bugmatrix-forks", "0"]
    assert Inline().pytest_args() == ["-n", "0", "--bugmatrix-forks", "0"]
    assert [(m.forks, m.in_workers) for m in RUNNERS.values()] == [(True, False), (False, True), (False, False)]
    monkeypatch.delenv("BUGMATRIX_RUNNER", raising=False)
    monkeypatch.setenv("BUGMATRIX_WORKERS", "3")
    assert CellSpec("c", None).runner == Fork(3) and chosen_runner("xdist", 1) == Xdist(1)
    monkeypatch.setenv("BUGMATRIX_RUNNER", "inline")
    spec = CellSpec("c", None)
    monkeypatch.setenv("BUGMATRIX_RUNNER", "xdist")
    assert spec.runner == Inline(3), "chosen when the spec was made, not again at each use"
    monkeypatch.setenv("BUGMATRIX_RUNNER", "forks")
    with pytest.raises(BugmatrixError) as info:
        CellSpec("c", None)
    assert str(info.value) == "BUGMATRIX_RUNNER='forks' is not a runner; use one of fork, xdist, inline"


def mode_compares(package: Path) -> list[str]:
    """Every comparison with a runner mode's name (``== "fork"``, ``in ("xdist", "fork")``) outside the registry."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() == "cell/runners.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare | ast.For | ast.comprehension):
                operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else [node.iter]
                names = {c.value for o in operands for c in ast.walk(o) if isinstance(c, ast.Constant) and c.value in RUNNERS}
                found += [f"{path.relative_to(package.parent)}:{node.lineno}: {n!r}" for n in sorted(names)]
    return found


def test_no_mode_name_is_compared_outside_the_registry(tmp_path: Path) -> None:
    """A mode is a class of bugmatrix/cell/runners.py, read through its attributes; and the check can fail."""
    assert mode_compares(ROOT / "bugmatrix") == []
    copy = tmp_path / "bugmatrix"
    (copy / "tools").mkdir(parents=True)
    (copy / "tools" / "planted.py").write_text('def f(r):\n    return r.name != "fork"\n', encoding="utf-8")
    (copy / "tools" / "looped.py").write_text('for r in ("xdist", "fork"):\n    pass\n', encoding="utf-8")
    assert mode_compares(copy) == [
        "bugmatrix/tools/looped.py:1: 'fork'",
        "bugmatrix/tools/looped.py:1: 'xdist'",
        "bugmatrix/tools/planted.py:2: 'fork'",
    ]


def test_uncovered_imports_name_only_heavy_imports_of_the_stack() -> None:
    heavy = [f"transformers.models.t5.m{i}" for i in range(MANY_MODULES)]
    imported = [*heavy, "transformers.utils", "torch.nested._internal", "json.decoder"]
    assert uncovered_imports(imported, {"torch", "transformers"}) == ["transformers.models"]


class Ran(NamedTuple):
    """A finished pytest run: its pid (the cell process), exit code and output."""

    pid: int
    returncode: int
    output: str


def run_planted(tmp_path: Path, *modules: str, args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Ran:
    """pytest over planted case modules copied to ``tmp_path/cases``, run to its end."""
    cases = tmp_path / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for name in modules:
        (cases / f"{name}.py").write_text((PLANTED / "cases" / f"{name}.py").read_text())
    command = [
        sys.executable, "-m", "pytest", str(cases), "-p", "bugmatrix.cell.plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
        "--bugmatrix-timeout", "2", "--bugmatrix-run-file", str(tmp_path / "run.json"), *args,
    ]  # fmt: skip
    process_env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{PLANTED}", **(env or {})}
    with subprocess.Popen(command, cwd=tmp_path, env=process_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        output, _ = proc.communicate(timeout=300)
    return Ran(proc.pid, proc.returncode, output)


def results(tmp_path: Path) -> dict[str, VariantRecord]:
    return {r.id: r for r in load_run_file(tmp_path / "run.json").results}


def _fresh_interpreter_threads() -> str:
    return subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()


@NEEDS_TORCH
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs: with one, torch has no intra-op pool to break")
def test_a_child_runs_parallel_torch_ops_and_a_parallel_op_in_the_parent_would_hang_it(tmp_path: Path) -> None:
    """The child gets a fresh interpreter's thread count and its pool works; the control plants a parallel op in the
    cell process (at import) and the same child then never returns from its matmul (GNU OpenMP after fork): timeout."""
    env = {"PLANTED_EXPECTED_THREADS": _fresh_interpreter_threads()}
    run_planted(tmp_path / "clean", "parallel", env=env)
    record = results(tmp_path / "clean")["parallel::parallel_after_fork[cpu]"]
    assert record.outcome == "fixed", record.message
    run_planted(tmp_path / "control", "parallel", "parallel_in_parent", env=env)
    control = results(tmp_path / "control")["parallel::parallel_after_fork[cpu]"]
    assert control.outcome == "timeout" and "did not stop itself" in control.message, control


def _spied_calls(spy: Path, pid: int) -> tuple[list[str], list[str]]:
    lines = [line.split() for line in spy.read_text().splitlines()] if spy.exists() else []
    return [name for who, name in lines if int(who) == pid], [name for who, name in lines if int(who) != pid]


@NEEDS_TORCH
def test_the_cell_process_never_touches_cuda(tmp_path: Path) -> None:
    """The fork runner asks CUDA (availability, device) only in children; the control runs the variants in the cell
    process (--bugmatrix-forks 0), where the same spy sees the calls — so it would see them in the fork runner too.

    Without a GPU this checks the calls, not a CUDA context: a CUDA variant on a real GPU is untested here.
    """
    spy = tmp_path / "spy.txt"
    forked = run_planted(tmp_path / "fork", "needs_cuda", args=("-p", "cuda_spy", "-k", "cuda"), env={"PLANTED_CUDA_SPY": str(spy)})
    parent, children = _spied_calls(spy, forked.pid)
    assert parent == [] and "_cuda_getDeviceCount" in children, (parent, children)
    run = load_run_file(tmp_path / "fork" / "run.json")
    assert run.environment["cuda_available"] is False and "cuda" in run.environment, "observed (in a child) all the same"
    assert results(tmp_path / "fork")["needs_cuda::on_the_gpu[cuda]"].outcome in ("skipped", "fixed")
    spy.unlink()
    inline = run_planted(
        tmp_path / "inline", "needs_cuda", args=("-p", "cuda_spy", "--bugmatrix-forks", "0"), env={"PLANTED_CUDA_SPY": str(spy)}
    )
    parent, _ = _spied_calls(spy, inline.pid)
    assert "_cuda_getDeviceCount" in parent, "control: in-process, the spy sees the cell process ask CUDA"


@NEEDS_TORCH
def test_a_lazy_import_a_case_declares_is_imported_once_before_forking(tmp_path: Path) -> None:
    """``Case(imports=(...))``: the child finds the module imported (the cell process imported it) and the terminal says so."""
    proc = run_planted(tmp_path, "lazy_import")
    assert results(tmp_path)["lazy_import::finds_it_imported[cpu]"].outcome == "fixed"
    assert "imported once before the variants ran: torch, xml.dom.minidom.parseString" in proc.output, proc.output[-2000:]


@NEEDS_TORCH
@NEEDS_LIGHTNING
@pytest.mark.parametrize("runner", [(), ("--bugmatrix-forks", "0")], ids=["fork", "in-process"])
def test_what_a_library_sets_at_import_is_no_variants_leak(tmp_path: Path, runner: tuple[str, ...]) -> None:
    """Lightning sets PYTORCH_NVML_BASED_CUDA_CHECK when imported: the axis modules are imported before the first
    snapshot, so neither variant that imports it is named, and two runs name the same (no) leakers."""
    leakers = []
    for attempt in ("first", "second"):
        run_planted(
            tmp_path / attempt, "imports_lightning", args=(*runner, "--bugmatrix-timeout", "300"), env={"PYTORCH_NVML_BASED_CUDA_CHECK": ""}
        )
        found = results(tmp_path / attempt)
        assert {r.outcome.value for r in found.values()} == {"fixed"}, found
        leakers.append({k: r.leaked for k, r in found.items() if r.leaked})
    assert leakers == [{}, {}]


def test_pytest_exit_code_5_and_a_bad_forks_value_are_not_hidden(tmp_path: Path) -> None:
    """No variant selected: pytest's own 5. A negative --bugmatrix-forks: a usage error naming the option."""
    none = run_planted(tmp_path / "none", "lazy_import", args=("-k", "no_such_variant"))
    assert none.returncode == pytest.ExitCode.NO_TESTS_COLLECTED
    bad = run_planted(tmp_path / "bad", "lazy_import", args=("--bugmatrix-forks", "-1"))
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR
