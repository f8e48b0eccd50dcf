"""Run files name paths as any checkout reads them: relative to the checkout, installed code from its package onward.

The committed reference is read on other machines (the GPU runs came from a
baked image in ``/opt/torch/.venv``); a path of the machine that ran a cell
says nothing to anyone else (bugmatrix/cell/recording.py, Portable).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bugmatrix.cell.recording import Portable, import_roots
from tests.test_faults import NEEDS_TORCH, ROOT, recorded, run_cases

RUNS = ROOT / "reports" / "runs"
#: The commit before the committed reference's paths were rewritten (main's, so every clone of this history has it).
BEFORE_REWRITE = "f6113ce"
#: An absolute path of a machine in recorded text: a checkout, a venv, an image; the GPU runs' hand-made placeholder.
MACHINE_PATH = re.compile(r"/(?:work|opt|root|home|tmp)/[^\s\"']*|<carried-wheels[^>]*>/")
#: What the rewrite may delete from a text: a path prefix ending at a directory separator (a piece of one after a cut).
PATH_PIECE = re.compile(r"[^\s\"']*/")


def test_a_traceback_reads_from_the_checkout_and_from_each_package_on() -> None:
    portable = Portable.of("/work/final", ["/work/final/.nox/cell-a/lib/python3.11/site-packages", "/tmp/target"])
    text = (
        'File "/work/final/cases/encoder_bf16_eval.py", line 3\n'
        'File "/work/final/.nox/cell-a/lib/python3.11/site-packages/torch/nn/modules/module.py", line 9\n'
        'File "/tmp/target/pytorch_lightning/core/module.py", line 1\n'
        'File "/usr/lib/python3.11/contextlib.py", line 7'
    )
    assert portable.text(text) == (
        'File "cases/encoder_bf16_eval.py", line 3\n'
        'File "torch/nn/modules/module.py", line 9\n'
        'File "pytorch_lightning/core/module.py", line 1\n'
        'File "/usr/lib/python3.11/contextlib.py", line 7'
    ), "a venv inside the checkout is an import root first; the standard library stays as it is"
    assert portable.text("cases/x.py and torch/y.py") == "cases/x.py and torch/y.py", "rewriting twice changes nothing"
    cut = '[1,696 characters cut] … hon3.11/site-packages/torch/a.py", line 1\n  File "/work/final/cases/b.py"'
    assert portable.text(cut) == '[1,696 characters cut] … torch/a.py", line 1\n  File "cases/b.py"', (
        "a log cut mid-path keeps no piece of it"
    )


def test_import_roots_are_the_directories_that_hold_distributions(tmp_path: Path) -> None:
    (tmp_path / "site" / "torch-2.11.0.dist-info").mkdir(parents=True)
    (tmp_path / "code").mkdir()
    assert import_roots([str(tmp_path / "site"), str(tmp_path / "code"), str(tmp_path / "absent"), ""]) == (str(tmp_path / "site"),)
    assert any(root.endswith("site-packages") for root in import_roots()), "this interpreter's site-packages is one"


@NEEDS_TORCH
def test_a_run_file_records_no_path_of_the_machine_that_ran_it(tmp_path: Path) -> None:
    """A variant that fails inside an installed package: its log names the case and the package from the checkout and the package on."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "paths.py").write_text(
        "from packaging.version import Version\n"
        "from bugmatrix import CPU_BF16, Case, Signature\n"
        'case = Case(id="paths", title="paths", signature=Signature(r"Invalid version"))\n'
        "@case.variant(devices=(CPU_BF16,))\n"
        "def raises_in_a_package(device, dtype):\n"
        '    Version("not a version")\n',
        encoding="utf-8",
    )
    proc = run_cases(tmp_path, "-p", "no:xdist")
    record = recorded(tmp_path)["paths::raises_in_a_package[cpu]"]
    assert record.outcome == "reproduced", proc.stdout[-2000:]
    # The checkout is where pytest started (this temporary directory), even inside another project (nox's tmp is).
    assert 'File "cases/paths.py"' in record.log and 'File "packaging/version.py"' in record.log, record.log
    text = (tmp_path / "run.json").read_text(encoding="utf-8")
    assert str(tmp_path) not in text, "the checkout's own path is recorded nowhere"
    assert "site-packages/" not in text, "installed code is named from its package on"
    executable = json.loads(text)["environment"]["executable"]
    assert executable == sys.executable or not executable.startswith("/"), executable


def test_the_committed_reference_names_no_machine_path() -> None:
    """No log or message names a machine's path, and an interpreter inside the checkout is named relative to it."""
    found = {}
    for path in sorted(RUNS.glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        texts = [r[k] for r in run["results"] for k in ("log", "message")]
        if (m := next((m for t in texts if (m := MACHINE_PATH.search(t))), None)) is not None:
            found[path.name] = m.group(0)
        if "/.nox/" in str(run["environment"].get("executable", "")):
            found[path.name] = run["environment"]["executable"]
    assert not found, f"absolute paths in committed run files: {found}"


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)


def _only_paths_deleted(old: str, new: str) -> bool:
    """``new`` is ``old`` with path prefixes deleted, and nothing else (any alignment found proves it: each gap is a path piece)."""
    i = j = 0
    while j < len(new):
        if i < len(old) and old[i] == new[j]:
            i, j = i + 1, j + 1
            continue
        piece = PATH_PIECE.match(old, i)
        # The piece after which old goes on longest as new does: "/work/final/" before "cases/...".
        ends = [i + k + 1 for k, ch in enumerate(old[i : piece.end()] if piece else "") if ch == "/"]
        agree = {
            end: next((n for n, (a, b) in enumerate(zip(old[end : end + 200], new[j : j + 200], strict=False)) if a != b), 200)
            for end in ends
        }
        if not agree or max(agree.values()) == 0:
            return False
        i = max(agree, key=agree.__getitem__)
    return i == len(old) or PATH_PIECE.fullmatch(old, i) is not None


def test_the_rewrite_of_the_reference_changed_paths_only() -> None:
    """Every committed run file that existed before the rewrite is that file with path prefixes deleted: nothing else changed."""
    if _git("cat-file", "-e", f"{BEFORE_REWRITE}^{{commit}}").returncode != 0:
        pytest.skip(f"this clone's history does not hold {BEFORE_REWRITE} (a shallow clone): nothing to compare the reference against")
    compared = 0
    for path in sorted(RUNS.glob("*.json")):
        before = _git("show", f"{BEFORE_REWRITE}:reports/runs/{path.name}")
        if before.returncode != 0:
            continue  # committed after the rewrite
        old, new = json.loads(before.stdout), json.loads(path.read_text(encoding="utf-8"))
        if old.get("finished") != new.get("finished"):
            continue  # a later night replaced this cell's run: another run, not a rewrite
        texts = [("executable", old["environment"].get("executable", ""), new["environment"].get("executable", ""))]
        for previous, now in zip(old["results"], new["results"], strict=True):
            texts += [(f"{now['id']} {k}", previous[k], now[k]) for k in ("log", "message")]
            previous.update(log="", message="")
            now.update(log="", message="")
        old["environment"]["executable"] = new["environment"]["executable"] = ""
        assert old == new, f"{path.name}: the rewrite changed more than the logs, messages and interpreter path"
        changed = [where for where, was, now in texts if not _only_paths_deleted(was, now)]
        assert not changed, f"{path.name}: more than path prefixes changed in {changed[:3]}"
        compared += 1
    if not compared:
        pytest.skip("every committed run file was replaced by a later night: none is a rewrite of its version before it")
