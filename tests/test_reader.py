"""One guarded reader for every file from outside the run in progress (issue 45, items 5-7).

A FIFO, a device, a symlink to ``/dev/zero`` or a sparse 100 GB file where a run
file, ``nights.json`` or a previous run file belongs is refused in one line
naming it, and nothing waits on it or reads it into memory. The end-to-end
checks run the real command in a child with a memory limit and a time limit:
the old readers hung on a FIFO (the child is killed at the limit, the test
fails) and read ``/dev/zero`` until memory ran out (a MemoryError traceback,
not the one line). A source scan keeps every other reader out of the package.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import LIMITS, read_bytes, read_json, read_text
from tests.sourcescan import ROOT, rel

RUNS = sorted((ROOT / "reports" / "runs").glob("*.json"))
#: Far past every cap: a sparse file takes no disk, and the old readers read it whole.
HUGE = 100 * 1024**3


def _hostile(path: Path, kind: str) -> None:
    """Put a hostile thing at ``path``: a FIFO, a symlink to /dev/zero, a sparse huge file, a directory, a socket."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(HUGE)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()


KINDS = ("fifo", "dev-zero", "huge", "directory", "socket")
SAID = {"fifo": "a FIFO", "dev-zero": "a symlink", "huge": "over the cap", "directory": "a directory", "socket": "a socket"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_reader_refuses_what_is_no_regular_file_in_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "runs.json"
    _hostile(path, kind)
    for read in (read_bytes, read_text, read_json):
        with pytest.raises(BugmatrixError) as info:
            read(path, "run file", fix="re-run its cell")
        message = str(info.value)
        assert message.startswith(f"{path}: ") and SAID[kind] in message and message.endswith("re-run its cell"), message


def test_the_reader_decodes_strictly_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    for content, said in [
        (b'{"a": "\xff"}', "not UTF-8 (byte 0xff at offset 7)"),
        (b'{"duration_s": NaN}', "NaN is not a JSON value"),
        (b'{"a": ', "not valid JSON (line 1 column 7"),
    ]:
        path.write_bytes(content)
        with pytest.raises(BugmatrixError, match=r"^" + str(path)) as info:
            read_json(path, "run file")
        assert said in str(info.value), str(info.value)
    path.write_bytes(b"x" * (LIMITS["manifest"] + 1))
    with pytest.raises(BugmatrixError, match="over the cap of 1,048,576 bytes for a manifest"):
        read_text(path, "manifest")
    (tmp_path / "gone.json").unlink(missing_ok=True)
    with pytest.raises(BugmatrixError, match=r"gone\.json: no such file"):
        read_json(tmp_path / "gone.json", "run file")
    path.write_text('{"ok": [1, 2.5]}')
    assert read_json(path, "run file") == {"ok": [1, 2.5]}


def test_every_committed_document_reads_through_the_reader() -> None:
    """The strict reader takes what this harness writes (no NaN, UTF-8, under every cap): the committed reference as proof."""
    for path in [*RUNS, ROOT / "reports" / "compat.json", ROOT / "reports" / "baseline.json"]:
        read_json(path, "run file" if path.parent.name == "runs" else "compat document")


def _limited() -> None:
    """The child's memory: the old readers' /dev/zero read ends as a MemoryError here, not in the machine's OOM killer."""
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command in a child; a hang is killed at the limit (TimeoutExpired fails the test, which is the point)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, preexec_fn=_limited, check=False)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_hostile_run_file_is_its_cells_finding_and_the_night_is_reported(tmp_path: Path, kind: str) -> None:
    runs = tmp_path / "reports" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(RUNS[0], runs)
    _hostile(runs / "py311-torch9.9.9.json", kind)
    argv = [sys.executable, "-m", "bugmatrix", "report", "--reports", str(runs.parent), "--history", str(tmp_path / "h.jsonl")]
    done = _run(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "unreadable run file of py311-torch9.9.9, its results count as missing" in line]
    assert said and f"{runs}/py311-torch9.9.9.json: " in said[0] and SAID[kind] in said[0], done.stderr[-2000:]
    assert (runs.parent / "compat.json").is_file()


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_hostile_nights_json_in_the_previous_site_is_one_line(tmp_path: Path, kind: str) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for name, text in (("index.html", "<p>n</p>"), ("compat.md", "# n\n"), ("compat.json", '{"commit": "abc1234"}')):
        (reports / name).write_text(text)
    previous = tmp_path / "previous"
    previous.mkdir()
    _hostile(previous / "nights.json", kind)
    argv = [sys.executable, "-m", "bugmatrix", "site", "--reports", str(reports), "--out", str(tmp_path / "site")]
    done = _run([*argv, "--date", "2026-11-25", "--previous", str(previous)], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert f"{previous}/nights.json: " in done.stderr and SAID[kind] in done.stderr and not (tmp_path / "site").exists()


def test_a_fifo_as_a_previous_run_file_runs_the_cell_and_says_why(tmp_path: Path) -> None:
    """Reuse asks the reader too: a FIFO in the previous results is named in the cell's line, and the cell runs."""
    previous = tmp_path / "previous"
    (previous / "runs").mkdir(parents=True)
    cell = json.loads(RUNS[0].read_text())["cell"]
    os.mkfifo(previous / "runs" / f"{cell}.json")
    script = (
        "import sys; from pathlib import Path\n"
        "from bugmatrix.run.inputkey import InputKey\n"
        "from bugmatrix.run.command import CellSpec\n"
        "from bugmatrix.run.reuse import ReusePolicy, decide\n"
        f"decision = decide(ReusePolicy(Path({str(previous)!r}), 7), CellSpec({cell!r}, {{}}), InputKey('sha256:0', {{}}))\n"
        "print(decision.why)\n"
    )
    done = _run([sys.executable, "-c", script], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{cell}.json cannot be read" in done.stdout and "a FIFO" in done.stdout and done.stdout.startswith("runs:"), done.stdout


# --- the scan: no other way of reading a file into the package -------------------------------------------------------------

#: Calls that read (or copy) a file's content.
READS = {"read_text", "read_bytes", "open"}
COPIES = {"copy", "copy2", "copyfile", "copytree"}

#: Where the package reads files without the guarded reader, and why that is no input from outside the run in progress.
ALLOWED = {
    ("bugmatrix/files.py", "read_bytes"): "the guarded reader itself (os.open with O_NOFOLLOW | O_NONBLOCK, after lstat)",
    ("bugmatrix/files.py", "locked_directories"): "opens a directory to flock it; reads nothing",
    ("bugmatrix/cell/axes.py", "spec_from_matrix_file"): "the project's own matrix.toml",
    ("bugmatrix/cell/recording.py", "RunFileLock.acquire"): "the run file's lock file, opened to flock it; reads nothing",
    ("bugmatrix/cell/descendants.py", "_processes"): "/proc/<pid>/stat of this cell's own descendants",
    ("bugmatrix/cell/environment.py", "wheel_builds"): "importlib.metadata of the cell's own installed distributions",
    ("bugmatrix/cell/environment.py", "source_builds"): "importlib.metadata and the RECORD uv wrote into the cell's own venv",
    ("bugmatrix/cell/forkrun.py", "_read"): "a forked child's output, in a temporary directory this cell made",
    ("bugmatrix/cell/forkrun.py", "_redirect_output"): "creates the child's output file in this cell's temporary directory",
    ("bugmatrix/cell/forkrun.py", "ForkPool._poll"): "a forked child's result, in a temporary directory this cell made",
    ("bugmatrix/documents/schemas.py", "stale"): "the project's own generated schema files, compared with what the models give",
    ("bugmatrix/plan/computed.py", "committed_choices"): "the project's own committed <profile>.json beside matrix.toml",
    ("bugmatrix/plan/cost.py", "Costs.__init__"): "the project's own committed locks/",
    ("bugmatrix/plan/matrix.py", "load_matrix"): "the project's own matrix.toml",
    ("bugmatrix/publish/bodies.py", "ReproExporter.export"): "the repro export written just now into its scratch directory",
    ("bugmatrix/publish/bodies.py", "body_files"): "the repro export written just now into its scratch directory",
    ("bugmatrix/publish/nights.py", "_fill_slot"): "pages the site wrote into its own staging directory a moment before",
    ("bugmatrix/tools/gpukit.py", "pack_kit"): "copies the project's own cases, harness and settings into the kit",
    (
        "bugmatrix/tools/gpukit_run.py",
        "check_box",
    ): "the kit's own kit.json, packed by gpu-kit (the script runs on the GPU box, with its Python)",
    ("bugmatrix/tools/gpukit_run.py", "summary"): "the run file this script's pytest wrote a moment before",
    ("bugmatrix/tools/gpukit_run.py", "run_one"): "creates the run's own log file",
    ("bugmatrix/publish/nights.py", "write_history_pages"): "pages the site wrote into its own staging directory a moment before",
    ("bugmatrix/releases/registry.py", "fetch_project"): "an HTTP response (urlopen with a timeout), not a file",
    ("bugmatrix/run/envbuild.py", "flocked"): "its own lock file, opened to flock it",
    (
        "bugmatrix/run/envbuild.py",
        "ensure_environment",
    ): "the project's own committed lock, and the stamp this runner wrote into the cell's own venv",
    ("bugmatrix/run/inputkey.py", "_imported_modules"): "the project's own harness modules",
    ("bugmatrix/run/inputkey.py", "_pytest_settings"): "the project's own pyproject.toml",
    ("bugmatrix/run/lock.py", "read_header"): "the project's own committed locks/",
    ("bugmatrix/run/lock.py", "assembled_lock"): "the project's own committed locks/ and the lock it assembles from them",
    ("bugmatrix/run/lock.py", "run_lock"): "the project's own committed locks/",
    ("bugmatrix/run/lock.py", "assemble_lock"): "the project's own committed locks/",
    ("bugmatrix/run/lock.py", "unused_pieces"): "the project's own committed locks/",
    ("bugmatrix/run/pool.py", "run_job"): "creates the job's own log file",
    ("bugmatrix/run/reresolve.py", "_one"): "the committed lock and the fresh lock uv wrote just now",
    ("bugmatrix/run/reresolve.py", "_committed_changes"): "the project's own committed locks/",
    ("bugmatrix/tools/benchmark/cells.py", "primed_pip_cache"): "the benchmark's own marker in its own cache",
    ("bugmatrix/tools/benchmark/cells.py", "received_bytes"): "/proc/net/dev",
    ("bugmatrix/tools/benchmark/cells.py", "measure_full"): "copies the benchmark's own temporary run",
    ("bugmatrix/tools/benchmark/nightly.py", "_todays_locks"): "copies the project's locks and the fresh locks uv wrote just now",
    ("bugmatrix/tools/benchmark/nightly.py", "moved_candidates"): "the project's own committed locks/",
    ("bugmatrix/tools/benchmark/nightly.py", "_yesterday"): "copies the benchmark's own working locks",
    ("bugmatrix/tools/benchmark/nightly.py", "measure_nightly_reuse"): "copies and reads the benchmark's own working nights",
    ("bugmatrix/tools/check.py", "_tables"): "the project's own README and docs",
    ("bugmatrix/tools/repro.py", "_helper_modules"): "the project's own case helper modules",
    ("bugmatrix/tools/repro.py", "build_script"): "the project's own case file",
    ("bugmatrix/tools/repro.py", "export_repro"): "copies the project's own committed lock",
}


def reads_in(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, enclosing function, call) of every call that reads or copies a file in ``tree``."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, where: tuple[str, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            where = (*where, node.name)
        if isinstance(node, ast.Call):
            func = node.func
            base = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            attr = func.attr if isinstance(func, ast.Attribute) else ""
            if (isinstance(func, ast.Name) and func.id == "open") or attr in READS:
                found.append((node.lineno, ".".join(where), f"{base or '…'}.{attr}(" if attr else "open("))
            elif (base, attr) in {("json", "load"), ("tomllib", "load")} or (base == "shutil" and attr in COPIES):
                found.append((node.lineno, ".".join(where), f"{base}.{attr}("))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, ())
    return found


SOURCES = sorted([*(ROOT / "bugmatrix").rglob("*.py"), ROOT / "noxfile.py"])


def test_every_file_from_outside_is_read_by_the_guarded_reader() -> None:
    """No ``open(``, ``read_text(``, ``read_bytes(``, ``json.load(``, ``shutil.copy*`` outside files.py but where ALLOWED says why."""
    seen, offenders = set(), []
    for path in SOURCES:
        for line, where, call in reads_in(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel(path), where) in ALLOWED:
                seen.add((rel(path), where))
            else:
                offenders.append(f"{rel(path)}:{line} in {where or 'the module'}: {call}")
    assert offenders == [], f"read these with bugmatrix.files.read_json / read_text / read_bytes: {offenders}"
    assert set(ALLOWED) - seen == set(), f"allowed but no longer reading (remove them): {sorted(set(ALLOWED) - seen)}"


def test_the_scan_finds_each_way_of_reading() -> None:
    """The scan can fail: each reading call it looks for, planted in one function, is found there."""
    planted = ast.parse(
        "import json, shutil, tomllib\n"
        "def load(path):\n"
        "    a = json.loads(path.read_text())\n"
        "    b = open(path).read()\n"
        "    c = path.read_bytes()\n"
        "    with path.open() as handle:\n"
        "        d = json.load(handle)\n"
        "    shutil.copyfile(path, 'x')\n"
        "    return tomllib.load(handle)\n"
    )
    assert [(where, call) for _, where, call in reads_in(planted)] == [
        ("load", "path.read_text("), ("load", "open("), ("load", "path.read_bytes("), ("load", "path.open("),
        ("load", "json.load("), ("load", "shutil.copyfile("), ("load", "tomllib.load("),
    ]  # fmt: skip
