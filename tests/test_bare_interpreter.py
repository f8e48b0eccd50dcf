"""Every nox session works from an interpreter holding only nox and uv, as the README and the nightly install them.

The nightly's first job ran ``nox -s plan`` in setup-python's 3.11 with only nox
and uv installed, and died on ``import jinja2`` (issue 42); the tests passed
because the tests' own venv (and this machine's Python) had jinja2. Here nox runs
from a venv made with ``nox`` and ``uv`` alone, and each session nox lists is
exercised cheaply on fixtures: the committed reference, an empty reports
directory, ``--help``. The sessions that build a cell (``cell(...)``,
``report-<profile>``) run from the same venv in
``tests/test_e2e.py::test_the_main_job_leaves_a_clean_checkout_clean``; ``tests``
runs from one in ``.ci/run``. A session this file does not cover fails
:func:`test_every_session_nox_lists_is_covered_here`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.barenox import bare_env
from tests.test_filing import FAKE_GH

ROOT = Path(__file__).resolve().parent.parent
#: The committed reference: a real report directory (the full profile of 2026-11-24) the site and issues read.
REFERENCE_NIGHT = "2026-11-24"


@dataclass(frozen=True)
class Use:
    """One session as this test runs it: nox's arguments ({tmp}: the test's directory), the exit code and a line it must print."""

    session: str
    argv: tuple[str, ...]
    code: int = 0
    says: str = ""


USES = (
    Use("-l", ("-l",), says="cell("),
    Use("plan", ("-s", "plan", "--", "--profile", "nightly", "--json", "--resolve", "--out", "{tmp}/plan.json"), says='"include"'),
    Use("check", ("-s", "check")),
    Use("lock", ("-s", "lock", "--", "--check")),
    Use("reresolve", ("-s", "reresolve", "--", "--profile", "smoke"), says="re-resolved"),
    Use("reresolve-", ("-s", "reresolve-smoke"), says="re-resolved"),
    Use(
        "fresh(",
        (
            "-s",
            "fresh(py311-torch2.15.0-pl2.6.6)",
        ),
        says="no sibling run",
    ),
    Use("run", ("-s", "run", "--", "--help"), says="--profile"),
    Use("bisect", ("-s", "bisect", "--", "--help"), says="--from"),
    Use("repro", ("-s", "repro", "--", "--help"), says="--cell"),
    Use("stability", ("-s", "stability", "--", "--help"), says="--repeat"),
    Use("benchmark", ("-s", "benchmark", "--", "--help"), says="--full"),
    Use("report", ("-s", "report", "--", "--baseline", "{tmp}/missing.json"), code=2, says="report: exit 2 (bad input)"),
    Use(
        "site",
        ("-s", "site", "--", "--reports", "reports", "--out", "{tmp}/site", "--date", REFERENCE_NIGHT, "--profile", "full"),
        says="site",
    ),
    Use(
        "issues",
        (
            "-s",
            "issues",
            "--",
            "--bodies",
            "{tmp}/bodies",
            "--compat",
            "reports/compat.json",
            "--repo",
            "o/r",
            "--night",
            REFERENCE_NIGHT,
            "--dry-run",
        ),
        says="0 finding(s)",
    ),
    Use("system", ("-s", "system"), code=1, says="has no pytest"),
    Use("lint", ("-s", "lint")),
    Use("gpu-kit", ("-s", "gpu-kit", "--", "--help"), says="--pin"),
)
#: Sessions run from a bare interpreter elsewhere: where, and why not here.
ELSEWHERE = {
    "cell(": "tests/test_e2e.py::test_the_main_job_leaves_a_clean_checkout_clean (builds a real cell)",
    "report-": "tests/test_e2e.py::test_the_main_job_leaves_a_clean_checkout_clean (the main job's report)",
    "tests": ".ci/run (a fresh venv with nox and uv only runs the README's test command)",
}


def nox(venv: Path, argv: tuple[str, ...], tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    args = [a.replace("{tmp}", str(tmp)) for a in argv]
    # A copy of the tests' fixed answer for "latest": `plan --resolve` writes the new one where it read it, never here.
    resolution = tmp / "resolution.json"
    if not resolution.exists():
        shutil.copy(os.environ["BUGMATRIX_RESOLUTION"], resolution)
    environment = bare_env(venv, BUGMATRIX_REPORTS=str(tmp / "reports"), BUGMATRIX_RESOLUTION=str(resolution), **env)
    return subprocess.run(
        [str(venv / "bin" / "nox"), *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("use", USES, ids=[u.session for u in USES])
def test_a_session_runs_from_an_interpreter_with_only_nox_and_uv(use: Use, bare_nox: Path, tmp_path: Path) -> None:
    (tmp_path / "bodies").mkdir()
    gh = tmp_path / "bin" / "gh"  # issues --dry-run looks the open issues up: a stand-in gh answers
    gh.parent.mkdir()
    gh.write_text(FAKE_GH.format(python=bare_nox / "bin" / "python"))
    gh.chmod(0o755)
    fake = {"FAKE_GH_STATE": str(tmp_path / "gh.json"), "FAKE_GH_LOG": str(tmp_path / "gh.log")}
    run = nox(bare_nox, use.argv, tmp_path, **fake, PATH=f"{gh.parent}:{bare_env(bare_nox)['PATH']}")
    said = run.stdout + run.stderr
    assert run.returncode == use.code, said[-3000:]
    assert "ModuleNotFoundError" not in said and "Traceback" not in said, said[-3000:]
    assert use.says in said, said[-3000:]
    if use.session == "plan":
        assert json.loads(run.stdout)["include"], "stdout is the CI matrix alone"


def test_every_session_nox_lists_is_covered_here(bare_nox: Path, tmp_path: Path) -> None:
    listed = nox(bare_nox, ("-l",), tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {line[2:].split()[0] for line in listed.stdout.splitlines() if line[:2] in ("* ", "- ")}
    covered = {u.session for u in USES} | set(ELSEWHERE)
    uncovered = sorted(n for n in names if n not in covered and not any(n.startswith(c) for c in covered if c.endswith(("(", "-"))))
    assert not uncovered, f"sessions no test runs from a bare interpreter: {uncovered}"


def _covered(session: str) -> bool:
    names = {u.session for u in USES} | set(ELSEWHERE)
    return session in names or any(session.startswith(n) for n in names if n.endswith(("(", "-")))


def test_the_workflow_installs_only_nox_and_uv_and_calls_only_sessions_covered_here() -> None:
    """Every job installs what the README installs and nothing else, runs nox in an interpreter the harness supports
    (pyproject's requires-python; a 3.10 cell's job keeps 3.11 as the default and 3.10 beside it for the cell's venv),
    and calls only sessions the tests above run from such an interpreter."""
    import re
    import tomllib

    from packaging.specifiers import SpecifierSet

    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text(encoding="utf-8"))
    host = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"])
    sessions: set[str] = set()
    for name, job in workflow["jobs"].items():
        scripts = [s.get("run", "") for s in job.get("steps", [])]
        if not any("nox" in s for s in scripts):
            continue
        installs = [line.strip() for s in scripts for line in s.splitlines() if "pip install" in line]
        assert installs == ['python -m pip install "nox>=2025.2.9" "uv>=0.4"'], f"{name}: {installs}"
        setup = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
        assert len(setup) == 1, name
        default = str(setup[0]["with"]["python-version"]).split()[-1]  # the last one listed is `python` on PATH
        assert default in host, f"{name}: nox runs on Python {default}, outside the harness's {host}"
        for script in scripts:
            sessions |= {m.strip("\"'") for m in re.findall(r"\bnox -s (\S+)", script)}
    # "$SESSION" is the plan's cell(<id>) entry, "fresh($CELL)" its fresh sibling.
    named = {"cell(" if s == '"$SESSION"' or s == "$SESSION" else s for s in sessions}
    assert named >= {"plan", "reresolve", "cell(", "report", "site", "issues"}, named
    uncovered = sorted(s for s in named if not _covered(s))
    assert not uncovered, f"the workflow calls sessions no test runs from a bare interpreter: {uncovered}"
