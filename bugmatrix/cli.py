"""Command line: ``python -m bugmatrix plan|run|lock|reresolve|report|bisect|repro|check|stability|benchmark|cachesize|site|issues``.

Every subcommand is a thin layer over a library function; a BugmatrixError anywhere is printed here as one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from bugmatrix import values
from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.files import check_output_dir, check_output_file, write_json_atomic
from bugmatrix.paths import ROOT, output_dir

if TYPE_CHECKING:
    from bugmatrix.cell.case import Case, Variant
    from bugmatrix.plan.catalog import Catalog
    from bugmatrix.plan.matrix import Matrix
    from bugmatrix.releases.tracking import Planned

__all__ = ["build_parser", "main"]

#: Subcommands that live in their own module, under bugmatrix/ (``add_arguments(parser)`` + ``run(args) -> int``).
TOOLS = (
    ("run", "tools.run_profile", "run a profile's cells side by side (up to $BUGMATRIX_JOBS at once) into <reports>/runs/"),
    ("check", "tools.check", "this project's policies for its catalogue (source, evidence, upstream variant, boundary in smoke...)"),
    ("stability", "tools.stability", "run one cell's cases N times and report any outcome that varies"),
    ("benchmark", "tools.benchmark", "measure env builds, reuse vs floor, report speed, disk; print ratios"),
    ("cachesize", "tools.cachesize", "what a nightly downloads cold and what its uv caches hold (nothing downloaded)"),
    ("gpu-kit", "tools.gpukit", "pack the cases, the harness and pure-Python wheels of axis versions for a GPU box with no registry"),
    ("site", "publish.site", "the GitHub Pages site: tonight's report at the root and under its date, past nights kept"),
    ("issues", "publish.filing", "file the report's issue bodies on GitHub: one issue per finding, never a duplicate"),
)


def _versions(text: str) -> list[str]:
    listed = [values.version(v.strip()) for v in text.split(",") if v.strip()]
    if len(listed) < 2:
        msg = "a bisect needs at least two releases, e.g. 2.4.1,2.5.1"
        raise argparse.ArgumentTypeError(msg)
    return sorted(listed, key=Version)


def _plan(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output_file(args.out, "--out", forbidden=(args.cases,))
    from bugmatrix.plan.cells import override_notes, plan_document
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.releases.tracking import load_plan

    planned = load_plan(load_matrix(args.matrix), args.cases, refresh=args.resolve)
    matrix, resolution = planned.matrix, planned.resolution
    args.profile_given = args.profile is not None
    args.profile = args.profile or matrix.default_profile
    for entry in resolution.entries:  # stderr: stdout of --json is the CI matrix alone
        stale = f" (saved {resolution.resolved_at}; registry unreachable)" if resolution.stale else ""
        print(f"resolved: {entry.axis} {entry.requested} = {entry.resolved}{stale}", file=sys.stderr)
    if args.compute or args.cost:
        return _plan_compute(args, planned) if args.compute else _plan_cost(args, planned)
    cells = planned.profile_cells(args.profile)
    for note in override_notes(cells):  # a constraint never masks a case silently: where one's environment wins, it is said
        print(f"note: {note}", file=sys.stderr)
    if args.out:
        write_json_atomic(args.out, plan_document(matrix, args.profile, cells, resolution.to_json()))
    if args.json:
        from bugmatrix.tools.cachesize import cache_key

        # Cells on one torch release and Python share a uv cache; the first of them (a CPU cell) is the one job that saves it.
        savers: dict[str, str] = {}
        include = []
        for c in cells:
            key = cache_key(matrix, c.pins)
            runs_on = list(matrix.file.runner) if c.device == "cuda" else "ubuntu-latest"
            entry = {"cell": c.id, "session": f"cell({c.id})", "python": c.python, "device": c.device, "runs-on": runs_on}
            include.append(entry | {"cache-key": key, "cache-save": savers.setdefault(key, c.id) == c.id})
        print(json.dumps({"include": include}, sort_keys=True))
        return 0
    for c in cells:
        pins = " ".join(f"{k}={v}" for k, v in c.pins.items())
        print(f"{c.id:45} {c.device:5} {pins}")
        if args.variants:
            print("    runs " + ", ".join(c.variants))
    print(f"{len(cells)} cells in profile {args.profile}" + ("" if args.variants else " (--variants: which variants each runs)"))
    return 0


def _plan_compute(args: argparse.Namespace, planned: Planned) -> int:
    """``plan --compute P [--write]``: each case's cells of a computed profile, from the committed reference."""
    from bugmatrix.plan.cells import recompute
    from bugmatrix.plan.computed import reference_outcomes, write_choices
    from bugmatrix.releases.tracking import without_symbolic

    matrix = without_symbolic(planned.declared)
    if args.compute not in matrix.computed:
        computed = ", ".join(matrix.computed) or "none"
        msg = f'--compute {args.compute}: profiles.{args.compute} of {args.matrix} is not computed (computed: {computed}); add computed = "{args.compute}.json"'
        raise BugmatrixError(msg)
    choices = recompute(matrix, args.compute, planned.catalog, reference_outcomes(args.reference))
    for choice in choices:
        print(f"{choice.case}: {', '.join(choice.cells) or 'no cell'} -- {choice.shows} (from {choice.source})")
    cells = {c for choice in choices for c in choice.cells}
    print(f"{len(cells)} CPU cells in profile {args.compute}, chosen among profiles.{matrix.file.within[args.compute]}'s")
    if args.write:
        write_choices(matrix.computed[args.compute], args.compute, matrix.file.within[args.compute], choices)
        print(f"wrote {matrix.computed[args.compute]}")
    return 0


def _plan_cost(args: argparse.Namespace, planned: Planned) -> int:
    """``plan --cost``: cells, environments, lock lines and time, per profile and per case."""
    from bugmatrix.plan.cost import Costs, price, render_cost

    costs = Costs(args.cases.resolve().parent / "locks", args.reference)
    slices = planned.catalog.slices(planned.matrix)
    profiles = [args.profile] if args.profile_given else list(planned.matrix.profiles)
    print("\n".join(render_cost({p: price(planned.profile_cells(p), slices, costs) for p in profiles})))
    return 0


def _catalogued(args: argparse.Namespace) -> tuple[Matrix, Catalog]:
    from bugmatrix.plan.catalog import load_catalog
    from bugmatrix.releases.tracking import load_resolved_matrix

    matrix = load_resolved_matrix(args.matrix)
    return matrix, load_catalog(args.cases, matrix)


def _held_pins(args: argparse.Namespace, variant_id: str) -> tuple[Matrix, Variant, dict[str, str], Case]:
    """The matrix, the variant, the pins to hold (``--cell``'s, or the base pins of its axes) and the variant's case."""
    from bugmatrix.plan.cells import find_cell, plan_all

    matrix, catalog = _catalogued(args)
    variant = catalog.find(variant_id)
    if args.cell:
        pins = dict(find_cell(plan_all(matrix, catalog), args.cell).pins)
        missing = [a for a in variant.axes if a not in pins]
        if missing:
            msg = f"cell {args.cell} does not install {missing[0]}, which {variant_id} needs; pick a cell that pins it"
            raise BugmatrixError(msg)
    else:
        pins = matrix.ordered({a: matrix.base[a] for a in (*matrix.held_axes, *variant.axes)})
    return matrix, variant, pins, next(c for c in catalog.cases if c.id == variant.case_id)


def _bisect(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output_file(args.out, "--out", forbidden=(args.cases,))
    from bugmatrix.tools.bisect import run_bisect

    matrix, variant, held, case = _held_pins(args, args.variant)
    return run_bisect(args, matrix, variant, held, case.versions.get(args.package, ()))


def _repro(args: argparse.Namespace) -> int:
    from bugmatrix.tools.repro import FILES, MANIFEST, export_repro

    check_output_dir(args.out, "--out", manifest=MANIFEST, forbidden=(args.cases,), force=args.force, example="build/repro")
    matrix, variant, pins, _ = _held_pins(args, args.variant)
    out = export_repro(matrix, variant, pins, args.out, run_dir=args.reports / "runs", force=args.force)
    written = ", ".join(name for name in FILES if (out / name).exists())
    run = f"uv venv -p {pins[matrix.interpreter]} v && uv pip install --python v/bin/python -r requirements.txt && v/bin/python repro.py"
    print(f"wrote {out}/{{{written}}} — run: {run}")
    return 0


def _lock(args: argparse.Namespace) -> int:
    from bugmatrix.plan.cells import plan_all, plan_cells
    from bugmatrix.run.lock import run_lock

    matrix, catalog = _catalogued(args)
    cells = plan_cells(matrix, args.profile, catalog) if args.profile else plan_all(matrix, catalog)
    return run_lock(matrix, cells, args.root, check=args.check, era=args.era)


def _reresolve(args: argparse.Namespace) -> int:
    out = args.out or output_dir() / "fresh"
    check_output_file(out / "resolve.json", "--out", forbidden=(args.cases,))
    from bugmatrix.plan.cells import plan_cells
    from bugmatrix.run.reresolve import reresolve_cells

    matrix, catalog = _catalogued(args)
    cells, say = plan_cells(matrix, args.profile, catalog), functools.partial(print, flush=True)
    reresolve_cells(matrix, cells, args.root, out, as_of=args.as_of, held=dict(args.hold), jobs=args.jobs, say=say, profile=args.profile)
    return 0  # what moved or failed is the report's finding


def _report(args: argparse.Namespace) -> int:
    """``--issue-bodies`` adds the publish stage's output to the report's."""
    from bugmatrix.orchestrate import report
    from bugmatrix.report.options import ReportOptions

    options = ReportOptions.from_args(args)
    if args.issue_bodies is not None:
        from bugmatrix.publish.bodies import issue_bodies_output

        bodies = issue_bodies_output(
            args.issue_bodies, site_url=args.site_url or "", run_url=args.run_url or "", matrix=args.matrix, cases=args.cases
        )
        options = dataclasses.replace(options, extra=(bodies,))
    return report(options)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage text is one ``-h`` away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(USAGE_EXIT_CODE, f"bugmatrix: error: {self.prog}: {message}; see {self.prog} -h\n")


def _command(sub: argparse._SubParsersAction, name: str, help_text: str, func: Callable[..., int]) -> Callable[..., object]:
    """Add subcommand ``name`` run by ``func``; its ``add_argument``."""
    parser = sub.add_parser(name, help=help_text)
    parser.set_defaults(func=func)
    return parser.add_argument


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command`` given, only that tool's module is imported (the others may need jinja2)."""
    parser = _Parser(prog="python -m bugmatrix", description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.toml", help="matrix file (default: %(default)s)")
    parser.add_argument("--cases", type=Path, default=ROOT / "cases", help="case directory (default: %(default)s)")
    parser.set_defaults(root=ROOT)
    sub = parser.add_subparsers(dest="command", required=True)

    add = _command(sub, "plan", "print the cells of a profile", _plan)
    add("--profile", type=values.profile, help="a [profiles.<name>] of the matrix (default: the first one declared)")
    add("--json", action="store_true", help='GitHub Actions matrix: {"include": [...]}')
    add("--variants", action="store_true", help="also list the variants each cell runs")
    add("--out", type=Path, help="also write the plan document (the report's completeness check) here")
    add("--resolve", action="store_true", help="ask the registry what 'latest' is now (default: reuse the saved resolution)")
    add("--cost", action="store_true", help="cells, environments, lock lines and time per profile (or --profile) and per case")
    what = "each case's cells of a computed profile (e.g. smoke), from the reference runs"
    add("--compute", type=values.profile, metavar="PROFILE", help=what)
    add("--write", action="store_true", help="with --compute: commit the choice to the profile's file (computed = ...)")
    reference = ROOT / "reports" / "runs"
    add("--reference", type=values.existing_dir, default=reference, help="the committed reference's run files (default: %(default)s)")

    add = _command(sub, "bisect", "find the first release where a variant's outcome changes", _bisect)
    add("variant", help="CASE::VARIANT[DEVICE], e.g. autocast_cache::core[cpu]")
    add("package", help="the axis to bisect, e.g. torch, lightning or transformers")
    add("--from", dest="low", type=values.version, help="oldest release to consider")
    add("--to", dest="high", type=values.version, help="newest release to consider")
    add("--pre", action="store_true", help="include pre-releases")
    add("--cell", type=values.name, help="hold the other axes at this cell's pins (default: the matrix's base pins)")
    add("--versions", type=_versions, help="comma-separated versions instead of the registry's list")
    add("--linear", action="store_true", help="run every release (to check a bisect)")
    add("--timeout", type=values.seconds, default=900.0, help="seconds one probe may take before it is a timeout")
    add("--out", type=Path, help="result file (default: <reports>/bisect/<variant>--<package>.json)")
    add("--publish", action="store_true", help="write the result into reports/bisect/ (committed), where a case cites it as evidence")

    add = _command(sub, "repro", "export one variant as a standalone script for an upstream issue", _repro)
    add("variant", type=values.name)
    add("--cell", type=values.name, help="the cell whose pins to export (default: base pins)")
    add("--out", type=Path, default=ROOT / "build" / "repro", help="an empty or bugmatrix-written directory")
    add("--force", action="store_true", help="overwrite files this command did not write")
    add("--reports", type=values.existing_dir, default=output_dir(), help="where run files are (for the observed outcome)")

    add = _command(sub, "lock", "(re)create the committed locks of the planned cells under locks/", _lock)
    add("--profile", type=values.profile, help="only this [profiles.<name>]'s cells (default: every profile's)")
    add("--check", action="store_true", help="only say which locks are missing or stale (exit 1 if any)")
    add("--era", action="store_true", help="resolve each cell as the registry stood a day after its newest pin (uv --exclude-newer)")

    what = "resolve a profile's cells again against today's registry (metadata only): what moved below the locks"
    add = _command(sub, "reresolve", what, _reresolve)
    add("--profile", type=values.profile, default="nightly")
    add("--out", type=Path, help="where resolve.json, the fresh locks and locks.patch go (default: <reports>/fresh)")
    add("--as-of", type=values.moment, help="resolve as the registry stood then (uv --exclude-newer), not as it is now")
    what = "resolve this distribution as the registry stood then (repeatable; uv --exclude-newer-package)"
    add("--hold", type=values.held, action="append", default=[], metavar="DIST=TIMESTAMP", help=what)
    add("--jobs", type=values.count, default=4, help="cells resolved at once (default 4: the resolver waits on the registry)")

    for name, module, help_text in TOOLS:
        tool = sub.add_parser(name, help=help_text)
        if command not in (None, name):
            continue
        imported = importlib.import_module(f"bugmatrix.{module}")
        imported.add_arguments(tool)
        tool.set_defaults(func=imported.run)

    add = _command(sub, "report", "merge run files into compat.json, compat.md, index.html", _report)
    add("--reports", type=Path, default=output_dir(), help="reports directory, runs/ inside (default: %(default)s)")
    what = "profile of these runs (default: the plan's; else the baseline's when every cell is one of its cells; else ad-hoc-<digest>)"
    add("--profile", type=values.profile, help=what)
    add("--plan", type=Path, help="plan document (nox writes it): planned results absent from the runs are shown as missing")
    add("--baseline", type=Path, help="baseline compat.json (default: reports/baseline.json)")
    add("--update-baseline", action="store_true", help="write this run as the new baseline (reports/baseline.json)")
    add("--publish", action="store_true", help="copy this report and its run files into reports/, the committed reference")
    what = "exit 1 when a result is missing or regressed, or a cell (of the baseline, or of a new release) does not install"
    add("--fail-on-regression", action="store_true", help=what)
    add("--step-summary", type=Path, help="append the summary markdown here ($GITHUB_STEP_SUMMARY)")
    what = "regenerate the table between the markers in this README: with --publish from this report, else from reports/compat.json alone"
    add("--readme", type=Path, help=what)
    add("--history", type=Path, help="history of past nights, appended to (default: <reports>/history.jsonl)")
    add("--date", help="this night's date in the history, YYYY-MM-DD (default: today, UTC); for re-runs and tests")
    add("--issue-bodies", type=Path, metavar="DIR", help="also write one GitHub issue body per finding here (a dry run: nothing is sent)")
    add("--site-url", help="where the Pages site is published (the issue bodies link the night's page and files there)")
    add("--run-url", help="the workflow run, linked by the issue bodies where there is no site")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input is one line on stderr and exit code 2 (3: an output could not be written)."""
    pre = _Parser(prog="python -m bugmatrix", add_help=False)  # which subcommand: only its tool module is imported
    for option in ("--matrix", "--cases"):
        pre.add_argument(option)
    pre.add_argument("command", nargs="?")
    parser = build_parser(pre.parse_known_args(argv)[0].command)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BugmatrixError as exc:
        print(f"bugmatrix: error: {exc}", file=sys.stderr)
        return exc.exit_code
