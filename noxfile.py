# /// script
# dependencies = ["nox>=2025.2.9", "packaging>=23", "jinja2>=3.1", "msgspec>=0.18"]
# [tool.nox]
# script-venv-backend = "uv"
# ///
"""bugmatrix sessions: one per matrix cell (and its re-resolved sibling), plus system, report, site, issues, plan, lock, reresolve, bisect, repro, stability, benchmark, tests, lint.

``nox`` alone runs the smoke profile and writes the report under build/reports
(git ignores it); ``nox -l`` lists every cell. Cells come from matrix.toml and
the cases' declared axes, planned once when this file is loaded (a fraction of
a second; no case is run and torch is not imported). A broken matrix.toml or
case file is one line on stderr: the cell sessions are then left out, and every
session that needs no plan (lint, tests, plan, lock, ...) is still listed and
runs, so ``nox -s lint`` can point at the broken file.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bugmatrix.cell.runners import Xdist, default_workers
from bugmatrix.documents.lane import load_reresolved
from bugmatrix.errors import EXIT_MEANINGS, WRITE_EXIT_CODE, BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import output_dir
from bugmatrix.plan.cells import Cell, plan_cells, plan_document
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.releases.tracking import Planned, load_plan, tracked_for
from bugmatrix.report.history import reuse_facts
from bugmatrix.run.command import pytest_command, run_file_path, write_spec
from bugmatrix.run.envbuild import fresh_venv
from bugmatrix.run.reuse import ReusePolicy, reuse_policy, split_reuse_options
from bugmatrix.run.runner import CellRun, CellSpec, Environment, release, run_cell

nox.needs_version = ">=2025.2.9"  # nox.project.dependency_groups
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_venv = "yes"

PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
#: What the harness needs outside a cell (pyproject's dependencies), plus uv, which it builds cells with. The
#: interpreter nox is started from holds only nox and uv (the README's and the workflow's `pip install nox uv`); the
#: script block at the top of this file (nox's PEP 723 script mode) has nox load this file, and run every python=False
#: session, in a uv venv of its own holding pyproject's dependencies (tests/test_documents.py keeps the two lists
#: equal). Every session that runs the harness's CLI gets a small venv of these (``tools``), the way the report always has.
TOOLS = [*PYPROJECT["project"]["dependencies"], *nox.project.dependency_groups(PYPROJECT, "host")]


def _error(exc: BugmatrixError) -> None:
    print(f"bugmatrix: error: {exc}", file=sys.stderr)


def _load_matrix() -> Matrix | None:
    try:
        return load_matrix(Path(os.environ.get("BUGMATRIX_MATRIX", ROOT / "matrix.toml")))
    except BugmatrixError as exc:
        _error(exc)
        return None


#: ``nox -l`` only lists: it asks no registry and writes nothing (the saved resolution, the registry cache as it is).
LISTING = bool({"-l", "--list", "--list-sessions"} & set(sys.argv[1:]))


def _plan(declared: Matrix | None) -> Planned | None:
    if declared is None:
        return None
    try:
        # Versions checked against the registry (cached), "latest" made concrete once (the saved resolution when there
        # is one: a nightly's plan job hands it on; none and no registry: the pinned versions, with a warning).
        return load_plan(declared, ROOT / "cases", fallback=True, offline=LISTING)
    except BugmatrixError as exc:
        _error(exc)
        return None


DECLARED = _load_matrix()
# `nox` alone runs the matrix's first profile; with the matrix broken it selects nothing (the line above says why).
nox.options.tags = [DECLARED.default_profile if DECLARED else "no-matrix"]
PLANNED = _plan(DECLARED)
CELLS = {cell.id: cell for cell in PLANNED.cells} if PLANNED else {}
#: The interpreter the host sessions (tests, lint, benchmark) use: the matrix's base, else nox's own.
BASE_PYTHON = DECLARED.base[DECLARED.interpreter] if DECLARED else None


def planned(session: nox.Session) -> Planned:
    """The plan, for the sessions that need it; a broken matrix or case ends the session with the line printed above."""
    if PLANNED is None:
        session.error("no plan: matrix.toml or a case file is broken (the line above says where); `nox -s plan` repeats it")
    return PLANNED


def cell_tags(cell: Cell) -> list[str]:
    """CPU cells are tagged by profile; CUDA twins by gpu-<profile> (a GPU runner selects those)."""
    return [p if cell.device == "cpu" else f"gpu-{p}" for p in cell.profiles]


def spec_of(plan: Planned, cell: Cell) -> CellSpec:
    """What the runner needs of a planned cell: its pins and variants, with what tonight's ``latest`` chose for it."""
    return CellSpec.of(cell, tracked_for(plan.declared, plan.resolution, cell.pins, cell.profiles))


def session_reuse(session: nox.Session, plan: Planned) -> tuple[ReusePolicy | None, list[str]]:
    """The reuse policy of a cell session (``$BUGMATRIX_PREVIOUS`` / ``-- --reuse-from DIR``, ``--no-reuse``) and the arguments left for pytest."""
    options, extra = split_reuse_options(session.posargs)
    try:
        return reuse_policy(plan.matrix.file.reuse.max_age_days, options, warn=session.warn, history_of=reuse_facts), extra
    except BugmatrixError as exc:
        session.error(str(exc))


def run_planned_cell(session: nox.Session, spec: CellSpec, run_file: Path, *, venv: Path | None = None) -> CellRun:
    """The cell and fresh sessions: reuse or run through the one runner, saying which and why; install failures recorded."""
    plan = planned(session)
    policy, extra = session_reuse(session, plan)

    def prepared(environment: Environment) -> None:
        if environment.unlocked:
            session.warn(f"installing unlocked (the registry's versions of today): {environment.unlocked}")
        how = "built the cell's environment" if environment.built else "reused the environment (pins unchanged)"
        session.log(how + (f" from {environment.lock}" if environment.lock else ""))

    def execute(command: list[str], env: dict[str, str]) -> int:
        # 1 = an outcome differs from its expectation: recorded, and judged by `report`.
        session.run(*command, env=env, external=True, success_codes=[0, 1])
        return 0

    done = run_cell(
        plan.matrix,
        spec,
        run_file,
        execute=execute,
        junit=run_file.parent.parent / "junit" / f"{spec.id}.xml",
        venv=venv,
        extra=extra,
        prepared=prepared,
        reuse=policy,
        log=session.log,
    )
    if done.install_failed:
        session.warn(f"install-failed, recorded: {done.install_failed.splitlines()[-1]}")
    require_finished(session, spec.id, done)
    return done


def require_finished(session: nox.Session, cell_id: str, done: CellRun) -> None:
    """A run whose run file is not its whole record fails the session, whatever pytest's exit code said (issue 45)."""
    if done.unfinished:
        session.error(f"{cell_id}: the cell did not finish: {done.unfinished}")


@nox.session(python=False)
@nox.parametrize("cell_id", [nox.param(c.id, id=c.id, tags=cell_tags(c)) for c in CELLS.values()])
def cell(session: nox.Session, cell_id: str) -> None:
    """Build (or reuse) one pinned environment with uv and run the cases in it, or reuse a previous run of the same inputs."""
    plan = planned(session)
    spec = spec_of(plan, CELLS[cell_id])
    done = None
    try:
        done = run_planned_cell(session, spec, run_file_path(output_dir(), cell_id))
    finally:
        # BUGMATRIX_DISK=lean: a whole profile within the disk (bugmatrix/run/diskbudget.py); a reused cell added nothing to give back.
        cleaned = [] if done is not None and done.reused else release(plan.matrix, spec, [spec_of(plan, c) for c in plan.cells])
        if cleaned:
            session.log("lean: removed the venv; cleaned from the uv cache: " + ", ".join(cleaned))


def _reresolve_session(profile: str) -> None:
    @nox.session(name=f"reresolve-{profile}", tags=[f"fresh-{profile}"])
    def reresolve_profile(session: nox.Session) -> None:
        run_cli(session, "reresolve", "--profile", profile)

    reresolve_profile.__doc__ = (
        f"The re-resolve lane of the {profile} profile: each cell resolved against today's registry (metadata only)."
    )


for _profile in DECLARED.profiles if DECLARED else ():
    _reresolve_session(_profile)


def fresh_tags(cell: Cell) -> list[str]:
    """``fresh-<profile>`` (CUDA twins: ``gpu-fresh-<profile>``): ``nox -t nightly fresh-nightly`` is the nightly with its lane."""
    return [f"fresh-{p}" if cell.device == "cpu" else f"gpu-fresh-{p}" for p in cell.profiles]


@nox.session(python=False)
@nox.parametrize("cell_id", [nox.param(c.id, id=c.id, tags=fresh_tags(c)) for c in CELLS.values()])
def fresh(session: nox.Session, cell_id: str) -> None:
    """Run a cell in tonight's fresh resolution (the re-resolve lane's lock), beside its locked run: only when its resolution moved."""
    plan = planned(session)
    lane = output_dir() / "fresh"
    try:
        record = load_reresolved(lane)
        found = record.by_cell.get(cell_id.removesuffix("-cuda")) if record else None  # a CUDA twin installs its CPU cell's lock
    except BugmatrixError as exc:
        session.error(str(exc))
    if found is None or found.status != "moved":
        said = "not re-resolved (run nox -s reresolve-<profile> first)" if found is None else f"its fresh resolution is {found.status}"
        session.log(f"{cell_id}: {said}; no sibling run")
        return
    session.log(f"{cell_id}: moved below its lock: {', '.join(found.moved)}")
    spec = dataclasses.replace(spec_of(plan, CELLS[cell_id]), locks=lane / "locks")
    venv = fresh_venv(ROOT, cell_id)
    done = None
    try:
        done = run_planned_cell(session, spec, lane / "runs" / f"{cell_id}.json", venv=venv)
    finally:
        reused = done is not None and done.reused
        cleaned = [] if reused else release(plan.matrix, spec, [spec_of(plan, c) for c in plan.cells], venv=venv)
        if cleaned:
            session.log("lean: removed the venv; cleaned from the uv cache: " + ", ".join(cleaned))


@nox.session(python=False)
def system(session: nox.Session) -> None:
    """Run the cases in the current environment as it is (a GPU runner's baked image): no installs."""
    if importlib.util.find_spec("pytest") is None:  # else pytest's "No module named pytest" would read as a finished cell
        session.error(
            f"system: {sys.executable} has no pytest: the system cell runs the cases in the interpreter nox runs in, as it is "
            '(a GPU runner\'s baked image: run `python -m pytest cases/` there); to build an environment use nox -s "cell(<id>)"'
        )

    def execute(command: list[str], env: dict[str, str]) -> int:
        session.run(*command, env=env, success_codes=[0, 1])
        return 0

    done = run_cell(
        planned(session).matrix,
        CellSpec("system", None),
        run_file_path(output_dir(), "system"),
        execute=execute,
        extra=session.posargs,
        log=session.log,
    )
    require_finished(session, "system", done)


def run_cli(session: nox.Session, command: str, *args: str) -> None:
    """``python -m bugmatrix COMMAND ARGS`` in the session's tools venv (:data:`TOOLS`); the CLI's exit code is nox's.

    nox would turn every failing command into its own exit 1 (the code for a regression): the last line says which exit
    of the CLI it was (2: bad input, 3: could not write) and nox exits with that code.
    """
    session.install(*TOOLS)
    try:
        # stderr=None: the CLI's own streams, not nox's default of stderr into stdout; stdout is a product (plan --json is
        # the CI matrix the workflow reads, issues' lines its summary) and must hold nothing else.
        session.run("python", "-m", "bugmatrix", command, *args, env={"PYTHONPATH": str(ROOT)}, stderr=None)
    except CommandFailed as failed:
        code = failed.return_code
        meaning = EXIT_MEANINGS.get(code, "an unexpected failure")
        session.log(f"{command}: exit {code} ({meaning}); the CLI (python -m bugmatrix {command}) keeps the code")
        sys.exit(code)


@nox.session(name="run")
def run_profile(session: nox.Session) -> None:
    """A profile's cells side by side (up to $BUGMATRIX_JOBS at once), then its report: -- [--profile P] [--jobs N] (= nox -t P)."""
    run_cli(session, "run", *session.posargs)
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--profile", default=DECLARED.default_profile if DECLARED else "")
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--cell", action="append")
    parser.add_argument("-h", "--help", action="store_true")
    known, _ = parser.parse_known_args(session.posargs)
    if not (known.gpu or known.cell or known.help):  # a partial run's report would list the rest as missing
        session.notify(f"report-{known.profile}")


@nox.session
def plan(session: nox.Session) -> None:
    """Print a profile's cells (--json: the CI matrix for the nightly workflow; --out FILE: the plan document)."""
    run_cli(session, "plan", *session.posargs)


def write_plan(session: nox.Session, profile: str) -> Path:
    """The plan the report checks completeness against: the cells ``nox -t <profile>`` runs, beside their run files.

    Those are the CPU cells; CUDA twins carry the ``gpu-<profile>`` tag and run on
    GPU runners, so listing them here would report every one of them missing.
    """
    plan = planned(session)
    path = output_dir() / f"plan-{profile}.json"
    cells = [c for c in plan_cells(plan.matrix, profile, plan.catalog) if profile in cell_tags(c)]
    try:
        write_json_atomic(path, plan_document(plan.matrix, profile, cells, plan.resolution.to_json()))
    except OSError as exc:  # a full disk, a read-only checkout: one line, as the CLI says it
        session.error(
            f"report: exit {WRITE_EXIT_CODE} (could not write): {path}: {exc.strerror or exc}; free space or pass another directory"
        )
    return path


def run_report(session: nox.Session, *args: str) -> None:
    """``python -m bugmatrix report`` over this checkout's output directory, in the session's tools venv."""
    run_cli(session, "report", "--reports", str(output_dir()), *args)


@nox.session
def report(session: nox.Session) -> None:
    """Merge run files into compat.json, compat.md and index.html; diff against the baseline; append to the history (-- --profile P ...)."""
    run_report(session, *session.posargs)


def _profile_report(profile: str) -> None:
    @nox.session(name=f"report-{profile}", tags=[profile])
    def profile_report(session: nox.Session) -> None:
        run_report(session, "--profile", profile, "--plan", str(write_plan(session, profile)), *session.posargs)

    profile_report.__doc__ = f"The report of the {profile} profile, with every planned result accounted for (runs after its cells)."


for _profile in DECLARED.profiles if DECLARED else ():
    _profile_report(_profile)


@nox.session
def lock(session: nox.Session) -> None:
    """(Re)create the missing or stale locks of every planned cell under locks/: -- [--profile P] [--check] [--era]."""
    run_cli(session, "lock", *session.posargs)


@nox.session
def reresolve(session: nox.Session) -> None:
    """Resolve a profile's cells again against today's registry: what moved below the locks, and locks.patch (-- --profile P)."""
    run_cli(session, "reresolve", *session.posargs)


@nox.session
def bisect(session: nox.Session) -> None:
    """Find the first release where a variant's outcome flips: -- VARIANT PACKAGE [--from V] [--to V]."""
    run_cli(session, "bisect", *session.posargs)


@nox.session
def repro(session: nox.Session) -> None:
    """Export a variant as a standalone repro.py + requirements.txt + ISSUE.md: -- VARIANT --cell ID."""
    run_cli(session, "repro", *session.posargs)


@nox.session
def check(session: nox.Session) -> None:
    """This project's policies for its catalogue (source, upstream evidence and variant, boundaries in smoke): one line per gap."""
    run_cli(session, "check", *session.posargs)


@nox.session
def site(session: nox.Session) -> None:
    """The GitHub Pages site from a report: -- --reports DIR --date D --out DIR [--previous SITE] [--profile P]."""
    run_cli(session, "site", *session.posargs)


@nox.session
def issues(session: nox.Session) -> None:
    """File the report's issue bodies on GitHub (gh): -- --bodies DIR --compat FILE --repo O/R --night D [--dry-run]."""
    run_cli(session, "issues", *session.posargs)


@nox.session
def stability(session: nox.Session) -> None:
    """Run one cell's cases N times (-- --repeat 20 [--cell ID]) and report any outcome that varies."""
    run_cli(session, "stability", *session.posargs)


def ensure_chromium(session: nox.Session) -> None:
    """Debian's chromium for the HTML report's browser test (which skips, saying why, without it)."""
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.run("bash", "-c", "apt-get update -qq && apt-get install -y -qq chromium >/dev/null", external=True, success_codes=[0, 100])


def ensure_axe(session: nox.Session) -> None:
    """axe-core's browser bundle for the site's accessibility test: one npm tarball unpacked into build/axe (skips without npm)."""
    if (ROOT / "build" / "axe" / "package" / "axe.min.js").is_file() or not shutil.which("npm"):
        return
    command = "mkdir -p build/axe && cd build/axe && npm pack axe-core --silent >/dev/null && tar xzf axe-core-*.tgz"
    session.run("bash", "-c", command, external=True, success_codes=[0, 1, 2])


def base_stack(session: nox.Session) -> list[str]:
    """Requirements of the newest stack (every axis at its base pin), the harness's, and the test tools (pyproject's ``test`` group)."""
    if DECLARED is None:
        session.error("matrix.toml is broken (the line above says where); the tests install its base pins")
    return [*DECLARED.requirements_for(DECLARED.base), *TOOLS, *nox.project.dependency_groups(PYPROJECT, "test")]


def test_targets(posargs: list[str]) -> list[str]:
    """``tests cases``, unless the arguments name paths or node ids of their own (then only those run)."""
    named = [a for a in posargs if not a.startswith("-") and (ROOT / a[: a.find("::")] if "::" in a else ROOT / a).exists()]
    return [] if named else ["tests", "cases"]


@nox.session(python=BASE_PYTHON)
def tests(session: nox.Session) -> None:
    """The harness's tests, the cases in this env, and an end-to-end mini-matrix through nox (-- PATHS/NODE IDS narrows it)."""
    session.install(*base_stack(session))
    ensure_chromium(session)
    ensure_axe(session)
    # The runner's own command builder (xdist over the tests; the cases run as the system cell of this venv). A cell's
    # deadline is for the cells of a matrix, not for the session that tests the harness: on a loaded machine the suite
    # may take longer than any cell, and the deadline would kill it mid-run (no summary line; issue 42).
    run_file = run_file_path(Path(session.create_tmp()), "system")
    # loadgroup: a module whose tests share an expensive fixture (a built mini-matrix, a grown copy of the project) marks
    # itself xdist_group and runs on one worker, so the fixture is built once, not once per worker.
    targets, extra = test_targets(session.posargs), ["--dist", "loadgroup", "--durations=10", *session.posargs]
    harness = dataclasses.replace(DECLARED, cell_deadline_s=None)
    spec = CellSpec("system", None, runner=Xdist(default_workers()))
    command = pytest_command("python", spec, write_spec(harness, spec, run_file), targets=targets, extra=extra)
    session.run(*command, env={"PYTHONPATH": str(ROOT)})


@nox.session(python=BASE_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the harness, cases, tests and noxfile (bugmatrix/cell/ for the oldest Python a cell runs)."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "--diff", ".")


@nox.session(python=BASE_PYTHON)
def benchmark(session: nox.Session) -> None:
    """Measure env builds (uv vs virtualenv+pip), each smoke cell on both runners vs its floor, report speed, disk; print ratios."""
    session.install(*TOOLS, *nox.project.dependency_groups(PYPROJECT, "benchmark"))
    session.run("python", "-m", "bugmatrix", "benchmark", *session.posargs, env={"PYTHONPATH": str(ROOT)})


@nox.session(name="gpu-kit")
def gpu_kit(session: nox.Session) -> None:
    """Pack the cases, the harness and pure-Python wheels for a GPU box with no registry: -- --pin AXIS=V,V [--python 3.12] [--out DIR]."""
    run_cli(session, "gpu-kit", *session.posargs)
