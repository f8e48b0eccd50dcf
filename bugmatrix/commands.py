"""Subcommands beyond ``plan``: report, bisect, repro (registered on the CLI parser)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bugmatrix.errors import BugmatrixError

__all__ = ["register"]


def _held_pins(args: argparse.Namespace, variant_id: str) -> tuple[object, dict[str, str], tuple[str, ...]]:
    """The matrix, the pins held fixed, and the variant's declared axes."""
    from bugmatrix.bisect import parse_variant_id
    from bugmatrix.discover import discover_variants, projections
    from bugmatrix.matrix import load_matrix
    from bugmatrix.plan import find_cell, plan_all

    matrix = load_matrix(args.matrix)
    case, name, device = parse_variant_id(variant_id)
    declared = discover_variants(args.cases)
    match = next((v for v in declared if v.case == case and v.name == name and device in v.devices), None)
    if match is None:
        known = ", ".join(sorted({f"{v.case}::{v.name}[{d}]" for v in declared for d in v.devices})[:6])
        msg = f"unknown variant {variant_id!r}; known variants include {known}, ..."
        raise BugmatrixError(msg)
    if getattr(args, "cell", None):
        pins = dict(find_cell(plan_all(matrix, projections(declared)), args.cell).pins)
    else:
        pins = {"python": matrix.base["python"], "torch": matrix.base["torch"]}
        pins.update({axis: matrix.base[axis] for axis in match.axes})
    return matrix, pins, match.axes


def _bisect(args: argparse.Namespace) -> int:
    from bugmatrix.bisect import BisectResult, Probe, bisect_versions, default_out, registry_versions, run_variant_in
    from bugmatrix.runfile import write_json_atomic

    matrix, held, axes = _held_pins(args, args.variant)
    if args.package not in (*axes, "torch"):
        msg = f"{args.variant} does not depend on {args.package!r} (its axes: {', '.join(axes)}); bisect one of those"
        raise BugmatrixError(msg)
    versions = (
        _listed_versions(args.versions) if args.versions else registry_versions(args.package, low=args.low, high=args.high, pre=args.pre)
    )
    result = BisectResult(
        args.variant,
        args.package,
        {k: v for k, v in held.items() if k != args.package},
        versions,
        mode="linear" if args.linear else "bisect",
    )

    def probe(version: str) -> Probe:
        found, built = run_variant_in(args.root, matrix, {**held, args.package: version}, args.variant)
        result.environments_built += 1
        outcome = Probe(version, found.outcome, found.message, found.seconds)
        print(
            f"  {args.package}=={version}: {outcome.outcome} ({outcome.seconds:.0f}s{', new env' if built else ', reused env'})", flush=True
        )
        return outcome

    print(
        f"{args.variant}: {result.mode} over {len(versions)} {args.package} releases {versions[0]}..{versions[-1]}, holding {result.held}"
    )
    result.probes, result.last_before, result.first_after = bisect_versions(versions, probe, linear=args.linear)
    skipped = [p for p in result.probes if p.outcome == "install-failed"]
    for p in skipped:
        print(f"  skipped {args.package}=={p.version}: cannot be installed ({p.message})")
    print(result.summary())
    out = args.out or default_out(args.root, args.variant, args.package + ("-linear" if args.linear else ""))
    write_json_atomic(out, result.to_json())
    print(f"wrote {out}")
    return 0


def _listed_versions(text: str) -> list[str]:
    from packaging.version import InvalidVersion, Version

    listed = [v.strip() for v in text.split(",") if v.strip()]
    for version in listed:
        try:
            Version(version)
        except InvalidVersion:
            msg = f"--versions: {version!r} is not a version; list releases like 2.4.1,2.5.1"
            raise BugmatrixError(msg) from None
    if len(listed) < 2:
        msg = "--versions: a bisect needs at least two releases"
        raise BugmatrixError(msg)
    return sorted(listed, key=Version)


def _repro(args: argparse.Namespace) -> int:
    from bugmatrix.repro import export_repro

    matrix, pins, _ = _held_pins(args, args.variant)
    out = export_repro(args.root, matrix, args.variant, pins, args.out, run_dir=args.root / "reports" / "runs")
    print(
        f"wrote {out}/repro.py, requirements.txt, ISSUE.md — run: python -m venv v && v/bin/pip install -r requirements.txt && v/bin/python repro.py"
    )
    return 0


def _report(args: argparse.Namespace) -> int:
    from bugmatrix.report.command import run_report

    return run_report(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the report/bisect/repro subcommands."""
    from bugmatrix.cli import ROOT

    bisect = sub.add_parser("bisect", help="find the first release where a variant's outcome changes")
    bisect.add_argument("variant", help="CASE::VARIANT[DEVICE], e.g. autocast_cache::core[cpu]")
    bisect.add_argument("package", help="the axis to bisect: torch, lightning or transformers")
    bisect.add_argument("--from", dest="low", help="oldest release to consider")
    bisect.add_argument("--to", dest="high", help="newest release to consider")
    bisect.add_argument("--pre", action="store_true", help="include pre-releases")
    bisect.add_argument("--cell", help="hold the other axes at this cell's pins (default: the matrix's base pins)")
    bisect.add_argument("--versions", help="comma-separated versions instead of the registry's list")
    bisect.add_argument("--linear", action="store_true", help="run every release (to check a bisect)")
    bisect.add_argument("--out", type=Path, help="result file (default: reports/bisect/<variant>--<package>.json)")
    bisect.set_defaults(func=_bisect, root=ROOT)

    repro = sub.add_parser("repro", help="export one variant as a standalone script for an upstream issue")
    repro.add_argument("variant")
    repro.add_argument("--cell", help="the cell whose pins to export (default: base pins)")
    repro.add_argument("--out", type=Path, default=ROOT / "repro-out")
    repro.set_defaults(func=_repro, root=ROOT)

    report = sub.add_parser("report", help="merge run files into compat.json, compat.md, index.html")
    report.add_argument("--reports", type=Path, default=ROOT / "reports", help="reports directory (runs/ inside)")
    report.add_argument("--profile", default="smoke", help="profile named in the report header")
    report.add_argument("--baseline", type=Path, help="baseline compat.json (default: <reports>/baseline.json)")
    report.add_argument("--update-baseline", action="store_true", help="write this run as the new baseline")
    report.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a regression is found")
    report.add_argument("--step-summary", type=Path, help="append the summary markdown here ($GITHUB_STEP_SUMMARY)")
    report.set_defaults(func=_report, root=ROOT)
