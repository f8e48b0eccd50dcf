"""Fault injection: a crash, a hang, an interrupted run, an unbuildable cell.

Each fault must end in its documented outcome with every other result kept.
The planted case modules in fixtures/planted/cases are copied into a temporary
``cases/`` directory and run by a real pytest in a subprocess: with the fork
runner (the default: a process per variant), in the pytest process itself
(``--bugmatrix-forks 0``) and with real xdist workers. Faults are injected at
chosen points (a planted variant, a wrapped build step), never by racing a
timer; a cell's time is bounded by the harness's own timeouts, and the
subprocess limits here only stop a broken harness from hanging the suite.
Running variants needs torch (the harness seeds it before every variant); the
collection and install-failure tests do not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cell.cellspec import SCHEMA as SPEC_SCHEMA
from bugmatrix.cell.runfile import VariantRecord, load_run_file
from bugmatrix.files import write_json_atomic
from bugmatrix.run.envbuild import STAMP, InstallFailed, ensure_environment, uv_command
from bugmatrix.run.runner import CellSpec, record_install_failure

NEEDS_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch: the plugin seeds it before every variant")
NEEDS_XDIST = pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist: cells run their cases with -n")

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "planted" / "cases"
TIMEOUT = "2"
EARLIER = "recorded by an earlier, interrupted run"


def plant(tmp_path: Path, *modules: str) -> Path:
    """Copy the named planted modules into ``tmp_path/cases`` (the plugin collects files whose parent is ``cases``)."""
    cases = tmp_path / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for name in modules:
        shutil.copy(PLANTED / f"{name}.py", cases)
    return cases


def run_cases(tmp_path: Path, *args: str, limit: float = 120) -> subprocess.CompletedProcess[str]:
    """pytest over the planted cases with the plugin, as a cell session runs it (no conftest here: ``-p``)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "cases"), "-p", "bugmatrix.cell.plugin", "-p", "no:cacheprovider",
         "--bugmatrix-timeout", TIMEOUT, "--bugmatrix-cell", "planted", "--bugmatrix-run-file", str(tmp_path / "run.json"), *args],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=limit, check=False,
    )  # fmt: skip


def recorded(tmp_path: Path) -> dict[str, VariantRecord]:
    return {r.id: r for r in load_run_file(tmp_path / "run.json").results}


@NEEDS_TORCH
@NEEDS_XDIST
def test_crash_and_hang_under_xdist_lose_nothing(tmp_path: Path) -> None:
    """os.abort() in one worker is `crashed`, a hang is `timeout`, and every other variant is still recorded."""
    plant(tmp_path, "planted", "planted_abort")
    proc = run_cases(tmp_path, "-n", "2")
    results = recorded(tmp_path)
    assert {k: (r.outcome, r.verdict) for k, r in results.items()} == {
        "planted::reproduces[cpu]": ("reproduced", "as-expected"),
        "planted::fixed[cpu]": ("fixed", "as-expected"),
        "planted::hangs[cpu]": ("timeout", "new-failure-mode"),
        "planted::checks_nothing[cpu]": ("different", "new-failure-mode"),
        "planted_abort::aborts[cpu]": ("crashed", "new-failure-mode"),
    }, proc.stdout[-3000:]
    assert "crashed while running" in results["planted_abort::aborts[cpu]"].message
    assert results["planted::hangs[cpu]"].message == f"variant still running after {TIMEOUT}s"
    assert results["planted::reproduces[cpu]"].signature_matched
    assert proc.returncode == 1, "outcomes that contradict their expectation fail the pytest run"
    run = load_run_file(tmp_path / "run.json")
    assert run.finished and run.cell == "planted", "the run file is closed even after a worker died"


@NEEDS_TORCH
@pytest.mark.parametrize("forks", ["0", "2"])
def test_timeout_without_xdist(tmp_path: Path, forks: str) -> None:
    """The SIGALRM timeout cuts a hang (60 s sleep, 2 s limit) in the pytest process and in a forked child; the run goes on."""
    plant(tmp_path, "planted")
    proc = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-forks", forks, limit=45)
    assert {k: r.outcome for k, r in recorded(tmp_path).items()} == {
        "planted::reproduces[cpu]": "reproduced",
        "planted::fixed[cpu]": "fixed",
        "planted::hangs[cpu]": "timeout",
        "planted::checks_nothing[cpu]": "different",
    }, proc.stdout[-3000:]
    assert recorded(tmp_path)["planted::hangs[cpu]"].message == f"variant still running after {TIMEOUT}s"
    assert "timeout swallowed" not in (tmp_path / "run.json").read_text(), "the variant's except Exception caught the timeout"


@NEEDS_TORCH
def test_a_run_killed_midway_keeps_what_it_recorded(tmp_path: Path) -> None:
    """In the pytest process itself an abort kills pytest: every variant recorded before it survives, and the run file names the one it ran."""
    plant(tmp_path, "planted", "planted_abort")  # planted.py is collected (and run) before planted_abort.py
    proc = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-forks", "0", "-k", "not hangs", limit=60)
    assert proc.returncode == -signal.SIGABRT, "the pytest process itself died"
    assert {k: r.outcome for k, r in recorded(tmp_path).items()} == {
        "planted::reproduces[cpu]": "reproduced",
        "planted::fixed[cpu]": "fixed",
        "planted::checks_nothing[cpu]": "different",
    }
    run = load_run_file(tmp_path / "run.json")
    assert run.finished == "" and not run.complete, "never closed: a resume can tell it was interrupted"
    assert run.running == ["planted_abort::aborts[cpu]"], "the variant that was running when the process died is named"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
    resumed = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-forks", "0", "-k", "not hangs", "--bugmatrix-resume", limit=60)
    assert resumed.returncode in (1, 5), resumed.stdout[-2000:]  # nothing left to run: 5 (no tests ran), as pytest says
    run = load_run_file(tmp_path / "run.json")
    aborted = {r.id: r for r in run.results}["planted_abort::aborts[cpu]"]
    assert (aborted.outcome, aborted.kind, aborted.expected) == ("crashed", "core", "fixed"), aborted
    assert "died while running this variant" in aborted.message
    assert run.complete and run.running == []


def _interrupted_run_file(tmp_path: Path) -> None:
    """A run file as an interrupted run leaves it: two variants recorded, not finished."""
    earlier = [
        {"id": f"planted::{name}[cpu]", "case": "planted", "variant": name, "device": "cpu", "kind": "core", "workaround_for": None,
         "outcome": outcome, "expected": "fixed", "verdict": verdict, "signature_matched": False, "message": EARLIER, "duration_s": 1.0}
        for name, outcome, verdict in (("fixed", "fixed", "as-expected"), ("hangs", "timeout", "new-failure-mode"))
    ]  # fmt: skip
    write_json_atomic(
        tmp_path / "run.json",
        {"schema": "bugmatrix.run/1", "cell": "planted", "pins": {}, "environment": {}, "started": "2026-01-01T00:00:00+00:00",
         "finished": "", "install": {"status": "ok", "reason": ""}, "results": earlier},
    )  # fmt: skip


@NEEDS_TORCH
def test_resume_skips_what_is_recorded(tmp_path: Path) -> None:
    """--bugmatrix-resume deselects recorded variants, keeps their records, and runs only the rest."""
    plant(tmp_path, "planted")
    _interrupted_run_file(tmp_path)
    proc = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-resume", limit=60)
    assert "2 deselected" in proc.stdout, proc.stdout[-2000:]
    results = recorded(tmp_path)
    assert set(results) == {"planted::reproduces[cpu]", "planted::fixed[cpu]", "planted::hangs[cpu]", "planted::checks_nothing[cpu]"}
    assert results["planted::fixed[cpu]"].message == results["planted::hangs[cpu]"].message == EARLIER
    assert results["planted::reproduces[cpu]"].outcome == "reproduced"
    assert load_run_file(tmp_path / "run.json").finished, "the resumed run closes the file"


@NEEDS_TORCH
@NEEDS_XDIST
def test_resume_skips_what_is_recorded_under_xdist(tmp_path: Path) -> None:
    """Cell sessions always pass -n: resuming must deselect there too (else recorded variants, hangs included, run again)."""
    plant(tmp_path, "planted")
    _interrupted_run_file(tmp_path)
    run_cases(tmp_path, "-n", "1", "--bugmatrix-resume", "-k", "fixed", "-q", limit=60)
    # (xdist's summary does not count what workers deselect: the kept record is the evidence)
    assert recorded(tmp_path)["planted::fixed[cpu]"].message == EARLIER, "the recorded variant ran again"


def test_resume_from_a_corrupt_run_file_is_one_line(tmp_path: Path) -> None:
    """A truncated run file met by --bugmatrix-resume is a one-line usage error naming the file."""
    plant(tmp_path, "planted")
    (tmp_path / "run.json").write_text('{"schema": "bugmatrix.run/1", "resu')
    proc = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-resume", "-q", limit=60)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERNAL_ERROR)
    assert len(lines) == 1 and str(tmp_path / "run.json") in lines[0] and "not valid JSON" in lines[0], lines[:5]


def test_plugin_registers_once_with_both_conftest_and_dash_p() -> None:
    """From the repository root the root conftest loads the plugin; an extra ``-p bugmatrix.cell.plugin`` must not add a second copy."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/fixtures/planted/cases/planted.py", "-p", "bugmatrix.cell.plugin", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", "--collect-only", "--trace-config"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PLUGIN registered: <module 'conftest' from '" + str(ROOT / "conftest.py") in proc.stdout, "the root conftest was loaded"
    assert proc.stdout.count("PLUGIN registered: <module 'bugmatrix.cell.plugin'") == 1
    assert proc.stdout.count("PLUGIN registered: <bugmatrix.cell.recording.RunState") == 1
    assert "4 tests collected" in proc.stdout, "each variant collected once"


def test_collect_only_records_nothing(tmp_path: Path) -> None:
    """Listing variants runs none: no run file is written (it would be an empty 'system' cell in the next report)."""
    plant(tmp_path, "planted")
    proc = run_cases(tmp_path, "-p", "no:xdist", "--collect-only", limit=60)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert not (tmp_path / "run.json").exists()


def _venv(tmp_path: Path) -> Path:
    """An empty venv of this interpreter, as nox's uv backend creates for a cell."""
    venv = tmp_path / "venv"
    subprocess.run([*uv_command(), "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=120, capture_output=True)
    return venv


def test_unresolvable_cell_is_install_failed_with_the_resolver_reason(tmp_path: Path) -> None:
    """An impossible pin raises InstallFailed carrying uv's reason; the recorded run file keeps it and loads cleanly."""
    venv = _venv(tmp_path)
    with pytest.raises(InstallFailed) as info:
        ensure_environment(venv, "3.11", ["torch==0.0.1"], ["torch"])
    reason = str(info.value)
    assert "torch==0.0.1" in reason and "unsatisfiable" in reason, reason
    assert not (venv / STAMP).exists(), "a failed build must not be stamped as reusable"
    run_file = tmp_path / "runs" / "py311-torch0.0.1.json"
    record_install_failure(run_file, CellSpec("py311-torch0.0.1", {"python": "3.11", "torch": "0.0.1"}), reason)
    run = load_run_file(run_file)
    assert run.install == {"status": "failed", "reason": reason}
    assert (run.cell, run.pins, run.results) == ("py311-torch0.0.1", {"python": "3.11", "torch": "0.0.1"}, [])
    assert json.loads(run_file.read_text())["schema"] == "bugmatrix.run/3"


def test_importable_but_broken_package_is_install_failed(tmp_path: Path) -> None:
    """Installed is not enough: the cell's modules must import, else install-failed says which one and why."""
    with pytest.raises(InstallFailed, match="does not import: import no_such_module: ModuleNotFoundError"):
        ensure_environment(_venv(tmp_path), "3.11", ["packaging"], ["packaging", "no_such_module"])


def test_failed_download_is_install_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that cannot be reached (a closed port on loopback) is install-failed, naming where it failed."""
    venv = _venv(tmp_path)
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("UV_HTTP_TIMEOUT", "5")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")  # a refused connection is final; retries only add backoff
    with pytest.raises(InstallFailed) as info:
        ensure_environment(venv, "3.11", ["packaging==24.1"], ["packaging"])
    assert "127.0.0.1" in str(info.value) or "connect" in str(info.value).lower()


REAL_CASES = ("autocast_cache", "encoder_bf16_eval")
#: The planted module and the real variants each process-wide leak of a_leaks_first would flip if it reached them (measured in one process without
#: the harness's isolation, torch 2.15.0): float64 default dtype -> encoder core, padding_mask and fast_path_off read
#: `different`; grad disabled -> autocast core reads `reproduced`; the MHA fast path off -> padding_mask reads `fixed`.
#: The cwd and environment leaks are checked where the leaker names them. Four variants, not the cases' thirty: the same
#: check in a fifth of the time. Every planted module is named here: a planted variant the selection drops is a KeyError,
#: not a pass.
REAL_SELECTION = ("-k", "core or padding_mask or fast_path_off or a_leaks_first or a_process_faults")


def _outcomes_with(
    tmp_path: Path, *planted: str, runner: tuple[str, ...] = ("-n", "1")
) -> tuple[dict[str, VariantRecord], subprocess.CompletedProcess[str]]:
    """The real cases (plus planted modules), planted ones first (files collect in name order); default: ONE xdist worker."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cases = plant(tmp_path, *planted)
    for name in REAL_CASES:
        shutil.copy(ROOT / "cases" / f"{name}.py", cases)
    proc = run_cases(tmp_path, *runner, *REAL_SELECTION, limit=600)
    return recorded(tmp_path), proc


@pytest.fixture(scope="module")
def clean_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The real cases' outcomes in a clean run (one xdist worker, nothing planted): what every faulty run must equal."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("xdist") is None:
        pytest.skip("needs torch and pytest-xdist")
    clean, proc = _outcomes_with(tmp_path_factory.mktemp("clean"))
    assert clean, proc.stdout[-3000:]
    return {k: r.outcome.value for k, r in clean.items()}


@pytest.fixture(scope="module")
def xdist_leaks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, VariantRecord], subprocess.CompletedProcess[str]]:
    """The real cases run after a_leaks_first's variants in ONE xdist worker (variants in the worker's own process)."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("xdist") is None:
        pytest.skip("needs torch and pytest-xdist")
    where = tmp_path_factory.mktemp("dirty")
    results, proc = _outcomes_with(where, "a_leaks_first")
    return where, results, proc


LEAKS = ("grad mode True -> False", "default dtype torch.float32 -> torch.float64", "MHA fast path True -> False", "cwd", "PLANTED_LEAK")


def test_a_leaking_variant_changes_no_other_outcome_and_is_named(
    clean_outcomes: dict[str, str], xdist_leaks: tuple[Path, dict[str, VariantRecord], subprocess.CompletedProcess[str]]
) -> None:
    """float64 + no_grad + fast path off + cwd/env, left behind by one variant in a shared process: every real outcome is as in a clean run."""
    _, dirty, proc = xdist_leaks
    assert {k: dirty[k].outcome.value for k in clean_outcomes} == clean_outcomes, proc.stdout[-3000:]
    leaked = dirty["a_leaks_first::a_leaks[cpu]"].leaked
    for what in LEAKS:
        assert any(what in line for line in leaked), (what, leaked)
    assert all(not r.leaked for k, r in dirty.items() if not k.startswith("a_leaks_first")), "only the leaker is marked"


def test_keyboard_interrupt_and_system_exit_are_results_not_the_end_of_the_cell(
    xdist_leaks: tuple[Path, dict[str, VariantRecord], subprocess.CompletedProcess[str]],
) -> None:
    """Each gets its own recorded outcome, and every other variant of the cell is recorded too."""
    where, results, proc = xdist_leaks
    assert results["a_leaks_first::b_interrupts[cpu]"].outcome == "different"
    assert "KeyboardInterrupt" in results["a_leaks_first::b_interrupts[cpu]"].message
    assert results["a_leaks_first::c_exits[cpu]"].outcome == "different"
    assert "SystemExit: 3" in results["a_leaks_first::c_exits[cpu]"].message
    run = load_run_file(where / "run.json")
    assert run.complete and set(run.selected) == set(results), proc.stdout[-3000:]


#: What each planted process fault must be recorded as under the fork runner: (outcome, words in its message or leaked).
PROCESS_FAULTS = {
    "a_process_faults::exits[cpu]": ("crashed", "the variant's process exited with code 3 before reporting a result"),
    "a_process_faults::is_killed[cpu]": ("crashed", "the variant's process was killed by signal 9 (SIGKILL) before reporting a result"),
    "a_process_faults::hangs_in_c[cpu]": ("timeout", f"variant still running after {TIMEOUT}s and it did not stop itself"),
    "a_process_faults::leaves_a_thread[cpu]": ("fixed", "non-daemon thread 'planted-leak' still running"),
    "a_process_faults::sets_float64[cpu]": ("fixed", "default dtype torch.float32 -> torch.float64"),
    "a_process_faults::lowers_rlimit_as[cpu]": ("fixed", "RLIMIT_AS unlimited"),
}


def test_every_process_fault_stays_on_its_variant(tmp_path: Path, clean_outcomes: dict[str, str]) -> None:
    """The fork runner (the default): os._exit, SIGKILL, a hang SIGALRM cannot stop, a leaked thread, float64, a lowered
    RLIMIT_AS and the in-process leaks — each recorded on its own variant, every real outcome as in a clean run, the cell complete."""
    dirty, proc = _outcomes_with(tmp_path, "a_process_faults", "a_leaks_first", runner=("-n", "0"))
    assert {k: dirty[k].outcome.value for k in clean_outcomes} == clean_outcomes, proc.stdout[-3000:]
    for variant_id, (outcome, words) in PROCESS_FAULTS.items():
        record = dirty[variant_id]
        assert record.outcome == outcome and any(words in text for text in (record.message, *record.leaked)), record
    leaked = dirty["a_leaks_first::a_leaks[cpu]"].leaked
    assert all(any(what in line for line in leaked) for what in LEAKS), leaked
    innocent = [k for k, r in dirty.items() if r.leaked and not k.startswith(("a_leaks_first::a_leaks", "a_process_faults"))]
    assert innocent == [], "only the leakers are marked"
    run = load_run_file(tmp_path / "run.json")
    assert run.complete and set(run.selected) == set(dirty) and run.running == [], proc.stdout[-3000:]
    assert proc.returncode == 1, "outcomes that contradict their expectation fail the pytest run; nothing else ended it"


#: A variant that exits, one that leaves a thread, and planted.py's four: what issue 22's "-n 0" acceptance runs.
EXIT_AND_THREAD = ("-k", "not hangs and not is_killed and not sets_float64 and not lowers_rlimit_as")


@NEEDS_TORCH
@NEEDS_XDIST
def test_dash_n_0_with_an_exit_and_a_thread_leak_completes(tmp_path: Path) -> None:
    """``-n 0``: the fork runner completes in one run; in the pytest process itself (``--bugmatrix-forks 0``) the exit ends
    the process, a resume records it as crashed and goes past it, and the process exits despite the leaked thread."""
    plant(tmp_path / "fork", "a_process_faults", "planted")
    forked = run_cases(tmp_path / "fork", "-n", "0", *EXIT_AND_THREAD)
    results = recorded(tmp_path / "fork")
    assert load_run_file(tmp_path / "fork" / "run.json").complete and len(results) == 5, forked.stdout[-3000:]
    assert "exited with code 3" in results["a_process_faults::exits[cpu]"].message

    plant(tmp_path / "inline", "a_process_faults", "planted")
    died = run_cases(tmp_path / "inline", "-n", "0", "--bugmatrix-forks", "0", *EXIT_AND_THREAD)
    assert died.returncode == 3, "os._exit(3) ended the pytest process"
    assert load_run_file(tmp_path / "inline" / "run.json").running == ["a_process_faults::exits[cpu]"]
    resumed = run_cases(tmp_path / "inline", "-n", "0", "--bugmatrix-forks", "0", "--bugmatrix-resume", *EXIT_AND_THREAD)
    run = load_run_file(tmp_path / "inline" / "run.json")
    assert run.complete and run.running == [], resumed.stdout[-3000:]
    inline = {r.id: r for r in run.results}
    assert inline["a_process_faults::exits[cpu]"].outcome == "crashed"
    assert {k: r.outcome for k, r in inline.items() if "exits" not in k} == {k: r.outcome for k, r in results.items() if "exits" not in k}
    assert inline["a_process_faults::leaves_a_thread[cpu]"].leaked == ("non-daemon thread 'planted-leak' still running",)
    assert (
        "exiting without waiting for 1 non-daemon thread(s) still running: 'planted-leak' (left by a_process_faults::leaves_a_thread[cpu])"
        in resumed.stderr
    )
    assert resumed.returncode == 1, "pytest's own exit status (an outcome differs from its expectation), not a hang"


#: Where a build is killed: a half-installed new venv, before its import check, between the two renames, inside the
#: final removal of the replaced venv. The build script wraps that step and SIGKILLs its own process group there.
KILL_POINTS = ("install", "import-check", "swap", "cleanup")

_KILLER = """
import os, pathlib, shutil, signal, subprocess
point, real_run, real_rename, real_rmtree, swapped = {point!r}, subprocess.run, pathlib.Path.rename, shutil.rmtree, []

def die():
    os.killpg(os.getpgid(0), signal.SIGKILL)

def run(command, *args, **kwargs):
    if point == "install" and "pip" in command:
        site = next(pathlib.Path(command[command.index("--python") + 1]).parent.parent.glob("lib/python*/site-packages"))
        (site / "numpy").mkdir(exist_ok=True)
        (site / "numpy" / "__init__.py").write_text("raise ImportError('half installed')")
        die()
    if point == "import-check" and "-c" in command:
        die()
    return real_run(command, *args, **kwargs)

def rename(self, target):
    moved = real_rename(self, target)
    if point == "swap" and str(target).endswith(".old"):
        die()
    swapped.append(target)
    return moved

def rmtree(path, *args, **kwargs):
    if point == "cleanup" and len(swapped) == 2 and str(path).endswith(".old"):
        real_rmtree(pathlib.Path(path) / "lib")
        die()
    return real_rmtree(path, *args, **kwargs)

subprocess.run, pathlib.Path.rename, shutil.rmtree = run, rename, rmtree
"""


def _build_script(
    venv: Path, requirements: list[str], modules: tuple[str, ...] = ("numpy", "packaging"), kill_at: str | None = None
) -> str:
    return (
        "import sys; sys.path.insert(0, {!r})\n"
        "from pathlib import Path\n"
        "{}"
        "from bugmatrix.run.envbuild import ensure_environment\n"
        "ensure_environment(Path({!r}), {!r}, {!r}, {!r})\n"
    ).format(
        str(ROOT), _KILLER.format(point=kill_at) if kill_at else "", str(venv),
        f"{sys.version_info.major}.{sys.version_info.minor}", requirements, list(modules),
    )  # fmt: skip


def _versions(python: Path) -> list[str]:
    return subprocess.run(
        [str(python), "-c", "import numpy, packaging; print(numpy.__version__, packaging.__version__)"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_a_build_killed_at_any_moment_heals_on_the_next_run(tmp_path: Path, kill_at: str) -> None:
    """SIGKILL the whole process group of a real build at a chosen step; the old venv is whole until the swap, and the
    next run ends with a complete, importable venv and no leftovers."""
    venv = tmp_path / "venv"
    old, new = ["packaging==24.1", "numpy==2.1.3"], ["packaging==24.2", "numpy==2.2.6"]
    subprocess.run([sys.executable, "-c", _build_script(venv, old)], check=True, timeout=300)
    killed = subprocess.run(
        [sys.executable, "-c", _build_script(venv, new, kill_at=kill_at)], start_new_session=True, timeout=300, check=False
    )
    assert killed.returncode == -signal.SIGKILL, f"the build was not killed at {kill_at}"
    python = venv / "bin" / "python"
    if kill_at in ("install", "import-check"):
        assert _versions(python) == ["2.1.3", "24.1"], "the old venv is untouched until the new one is whole"
    subprocess.run([sys.executable, "-c", _build_script(venv, new)], check=True, timeout=300)
    assert _versions(python) == ["2.2.6", "24.2"]
    # The lock builds take turns on stays (an empty file; a lock, not a leftover build)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv.lock", "venv"], "no half build and no half-deleted old venv"


def test_a_kill_while_the_replaced_venv_was_being_deleted_leaves_nothing_behind(tmp_path: Path) -> None:
    """The window CI once hit: killed inside the final rmtree of ``venv.old``; the venv is current, the leftovers must still go."""
    venv = tmp_path / "venv"
    requirements = ["packaging==24.2"]
    script = _build_script(venv, requirements, ("packaging",))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    for leftover in ("venv.old", "venv.new"):
        (tmp_path / leftover / "lib").mkdir(parents=True)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv.lock", "venv"]


@NEEDS_TORCH
@pytest.mark.parametrize(
    ("variant", "workers", "expected", "hangs"),
    [("leaves_a_thread", "0", "fixed", False), ("leaves_a_thread", "1", "fixed", False), ("hangs", "1", None, True)],
)
def test_a_bisect_probe_that_outlives_its_limit_keeps_its_result_and_leaves_nothing_running(
    tmp_path: Path, variant: str, workers: str, expected: str | None, hangs: bool
) -> None:
    """A leaked non-daemon thread no longer keeps a probe alive: in the pytest process (0) it exits once the run file is
    final, in a forked child (1) the child ends. A hang past the probe's limit (the plugin's own timeout is set longer)
    has its whole process group killed. Either way the recorded result counts and nothing is left running.
    """
    from bugmatrix.cell.runners import Fork
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.run.command import CellSpec, cell_env, pytest_command, write_spec
    from bugmatrix.tools.bisect import run_probe

    cases = plant(tmp_path, "planted_thread")
    run_file = tmp_path / "probe.json"
    spec = CellSpec("bisect", None, runner=Fork(int(workers)))
    command = pytest_command(
        sys.executable, spec, write_spec(load_matrix(ROOT / "matrix.toml"), spec, run_file), targets=[f"{cases / 'planted_thread.py'}::{variant}[cpu]"],
        extra=["-p", "bugmatrix.cell.plugin", "--bugmatrix-timeout", "300"],
    )  # fmt: skip
    _, timed_out = run_probe(command, ROOT, cell_env(ROOT), timeout=15)
    results = load_run_file(run_file).results if run_file.exists() else []
    record = results[0] if results else None
    assert timed_out is hangs
    assert (record.outcome.value if record else None) == expected
    left = subprocess.run(["pgrep", "-f", str(cases / "planted_thread.py")], capture_output=True, text=True, check=False).stdout
    assert not left.strip(), f"probe processes left running: {left}"


def test_an_interpreter_uv_cannot_see_is_found_in_pyenv_and_a_missing_one_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyenv's inactive versions are invisible to uv; the newest micro release there is used, and none is install-failed."""
    from bugmatrix.run.envbuild import find_interpreter

    for micro in ("2", "10"):
        exe = tmp_path / "versions" / f"3.97.{micro}" / "bin" / "python3.97"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert find_interpreter("3.97") == str(tmp_path / "versions" / "3.97.10" / "bin" / "python3.97")
    with pytest.raises(InstallFailed) as info:
        find_interpreter("3.96")
    assert "\n" not in str(info.value) and "no Python 3.96 interpreter" in str(info.value) and "exclude" in str(info.value)


@NEEDS_TORCH
def test_the_run_file_records_what_latest_resolved_to(tmp_path: Path) -> None:
    """The spec's ``requested`` (the runner writes it for tracked axes) lands in the run file as requested + resolved."""
    plant(tmp_path, "planted")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "pins": {"python": "3.11", "torch": "2.15.0"}, "requested": {"torch": "latest"}}))
    proc = run_cases(tmp_path, "-p", "no:xdist", "-k", "reproduces", "--bugmatrix-spec", "spec.json")
    assert proc.returncode in (0, 1), proc.stdout[-2000:]
    assert load_run_file(tmp_path / "run.json").tracked == {"torch": {"requested": "latest", "resolved": "2.15.0"}}
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "requested": ["torch"]}))
    bad = run_cases(tmp_path, "-p", "no:xdist", "--bugmatrix-spec", str(spec))
    assert f"--bugmatrix-spec {spec}: requested: ['torch'] is not an object of str -> str;" in bad.stderr, bad.stderr[-2000:]


def test_a_planned_cell_runs_exactly_its_planned_variants(tmp_path: Path) -> None:
    """The spec's ``variants`` (issue 33): the plan's list chooses (an id the cell does not have is no error); a bad list is one line."""
    plant(tmp_path, "planted")
    spec = tmp_path / "spec.json"
    listed = ["planted::fixed[cpu]", "planted::nope[cpu]"]
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "axes": ["torch"], "variants": listed}))
    proc = run_cases(tmp_path, "-p", "no:xdist", "--collect-only", "-q", "--bugmatrix-spec", "spec.json", limit=60)
    assert proc.returncode == 0, proc.stdout[-2000:]
    collected = [line for line in proc.stdout.splitlines() if "::" in line]  # node ids: relative to the rootdir pytest chose
    assert len(collected) == 1 and collected[0].endswith("cases/planted.py::fixed[cpu]"), collected
    spec.write_text(json.dumps({"schema": SPEC_SCHEMA, "variants": "planted::fixed[cpu]"}))
    bad = run_cases(tmp_path, "-p", "no:xdist", "--collect-only", "--bugmatrix-spec", str(spec), limit=60)
    assert bad.returncode != 0 and f"--bugmatrix-spec {spec}: variants: 'planted::fixed[cpu]' is not a list of str or null" in bad.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's prctl(PR_SET_CHILD_SUBREAPER)")
def test_a_variant_that_leaves_a_process_and_crashes_is_crashed_and_names_it(tmp_path: Path) -> None:
    """Default fork runner: a forked child, or a setsid grandchild, outliving a crashed variant is found, killed and named."""
    plant(tmp_path, "planted_orphans")
    # One child at a time: with two, orphans of variants ending together can be named under the first reaped (known, issue 34).
    run_cases(tmp_path, "-n", "0", "--bugmatrix-forks", "1")
    run = load_run_file(tmp_path / "run.json")
    assert run.complete, "the run file is closed"
    results = {r.id: r for r in run.results}
    for name in ("leaves_child", "leaves_setsid_grandchild"):
        result, pid = results[f"planted_orphans::{name}[cpu]"], int((tmp_path / f"orphans-{name}.txt").read_text())
        assert result.outcome == "crashed", result
        assert any(line.startswith(f"process {pid} ") for line in result.leaked), result.leaked
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
