"""``python -m bugmatrix check`` (``nox -s check``): this project's own policies for its catalogue, one line per gap.

The harness runs any valid case; :data:`POLICIES` are the rules *this* project keeps so that its table is evidence.
:func:`constraint_changes` is no policy: a constraint written for old releases can hide the bug a new case is about."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bugmatrix.cell.case import Case, Expect, Variant
from bugmatrix.cell.outcomes import Kind, Outcome
from bugmatrix.plan.catalog import Catalog, load_catalog
from bugmatrix.plan.cells import Cell, plan_all, plan_cells, recompute
from bugmatrix.plan.computed import committed_choices, reference_outcomes
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.releases.tracking import load_resolved_matrix, without_symbolic

__all__ = ["POLICIES", "Gap", "add_arguments", "catalogue_gaps", "constraint_changes", "run"]

POLICIES = ("source", "evidence", "upstream", "expectation", "boundary", "tables", "computed")
#: A result an expectation cites: a bisect's, or a committed run's (the GPU runs' evidence).
CITED_FILE = re.compile(r"reports/(?:bisect|runs)/[\w.\-]+\.json")
#: A committed run: the only evidence for an expectation on a device other than the CPU.
RUN_FILE = re.compile(r"reports/runs/[\w.\-]+\.json")
README_TABLES = ("docs/cases.md", "cases/README.md")
#: What to add, for the gaps whose fix names nothing of the case's own.
ADD_UPSTREAM = 'add one running upstream\'s own test or snippet: @case.variant(..., kind="upstream", counterpart="<variant>")'
ADD_EXPECT = 'add expect=(Expect("reproduced", <axis>="<spec>", evidence=...), ...)'
ADD_EVIDENCE = 'say where it comes from: Expect(..., evidence="bisect (reports/bisect/<file>.json); upstream PR #<n>")'
PUBLISH_CITED = "publish the bisect result there (nox -s bisect -- ... --publish) or correct the path"


@dataclass(frozen=True)
class Gap:
    """One policy a case does not keep, and what to add."""

    policy: str
    problem: str
    fix: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}; {self.fix}"


def _source_and_evidence(case: Case) -> Iterator[Gap]:
    if case.source is None:
        yield Gap("source", "cites no source document", 'add source=Source("<title>", date="YYYY-MM-DD", link="https://...") to Case(...)')
    if not any(e.startswith(("https://", "http://")) for e in case.evidence):
        yield Gap("evidence", "cites no upstream evidence", 'add evidence=("https://github.com/<org>/<repo>/issues/<n>", ...) to Case(...)')


def _upstream(case: Case) -> Iterator[Gap]:
    upstream = [v for v in case.variants if v.kind is Kind.UPSTREAM]
    if not upstream:
        yield Gap("upstream", "has no upstream variant", ADD_UPSTREAM)
    own = {(v.name, v.device): v for v in case.variants if v.kind is not Kind.UPSTREAM}
    for variant in upstream:
        if (variant.counterpart or "", variant.device) not in own:
            yield Gap(
                "upstream",
                f"upstream variant {variant.id} has no counterpart {variant.counterpart!r} of the case's own on {variant.device}",
                f"name a non-upstream variant declared for {variant.device} in counterpart=",
            )


def _when(expect: Expect) -> str:
    return ", ".join(f"{axis}{spec}" for axis, spec in expect.when.items()) or "everywhere"


def _where(cases_dir: Path, case: Case, root: Path) -> str:
    path = cases_dir / f"{case.id}.py"
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _expectations(case: Case, root: Path) -> Iterator[Gap]:
    for variant in case.variants:
        if variant.device == "cpu" and not variant.expect:
            yield Gap("expectation", f"{variant.id} expects nothing (every result is 'new')", ADD_EXPECT)
        if variant.device != "cpu":
            yield from _device_expectations(variant)
        for expect in variant.expect:
            if not expect.evidence.strip():
                yield Gap("expectation", f"{variant.id} expects {expect.outcome.value} ({_when(expect)}) without evidence", ADD_EVIDENCE)
            for cited in CITED_FILE.findall(expect.evidence):
                if not (root / cited).is_file():
                    yield Gap("expectation", f"{variant.id} cites {cited}, which is not in the repository", PUBLISH_CITED)


def _device_expectations(variant: Variant) -> Iterator[Gap]:
    """A GPU variant's expectations name their device, cite a committed run on it and pin exactly the releases it ran."""
    for expect in variant.expect:
        when = _when(expect)
        observed = (
            f'*observed("{expect.outcome.value}", device="{variant.device}", evidence="reports/runs/<file>.json", <axis>="<release>")'
        )
        if expect.device is None:
            yield Gap(
                "expectation",
                f"{variant.id} expects {expect.outcome.value} ({when}) on every device: nothing run on {variant.device} is its evidence",
                f'limit it with device="cpu", and declare {variant.device} ones from a committed run: {observed}',
            )
        elif expect.device == variant.device and (
            not RUN_FILE.search(expect.evidence) or any(not str(spec).startswith("==") for spec in expect.when.values()) or not expect.when
        ):
            yield Gap(
                "expectation",
                f"{variant.id} expects {expect.outcome.value} ({when}) beyond what a committed run on {variant.device} observed",
                f"declare the releases a run file in reports/runs/ holds: {observed}",
            )


def _boundary(case: Case, profile: str, cells: list[Cell]) -> Iterator[Gap]:
    expected: dict[str, dict[Outcome, set[str]]] = {}
    for variant in (v for v in case.variants if v.device == "cpu"):
        sides = expected.setdefault(variant.id, {Outcome.REPRODUCED: set(), Outcome.FIXED: set()})
        # the CPU cells it runs in, as far as the host can tell (an ``api`` requirement is checked in the cell)
        for cell in (c for c in cells if variant.id in c.variants and not variant.requires.unmet(c.pins)):
            found = variant.expectation(cell.pins)
            if found is not None and found.outcome in sides:
                sides[found.outcome].add(cell.id)
    for outcome in (Outcome.REPRODUCED, Outcome.FIXED):
        if not any(sides[outcome] for sides in expected.values()):
            yield Gap(
                "boundary",
                f"profile {profile} has no CPU cell where a variant is expected {outcome.value}",
                f"list versions where it is {outcome.value} in [profiles.{profile}] of matrix.toml",
            )
    declared = [v for v in case.variants if v.device == "cpu" and {e.outcome for e in v.expect} >= {Outcome.REPRODUCED, Outcome.FIXED}]
    crossed = [v for v in declared if all(expected[v.id][o] for o in (Outcome.REPRODUCED, Outcome.FIXED))]
    if declared and not crossed:
        yield Gap(
            "boundary",
            f"profile {profile} shows none of {', '.join(v.id for v in declared)} on both sides of its boundary",
            f"list versions either side of it in [profiles.{profile}] of matrix.toml",
        )


def _tables(case: Case, root: Path) -> Iterator[Gap]:
    for table in README_TABLES:
        path = root / table
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if f"| `{case.id}` |" not in text and f"| `{case.id}.py` |" not in text:
            yield Gap("tables", f"{table} has no row for {case.id}", "add one to its table of cases (see docs/cases.md, How to add a case)")


def _computed(declared: Matrix | None, catalog: Catalog, root: Path) -> dict[str, list[Gap]]:
    """case -> a gap per computed profile whose committed choice for it differs from the recomputation (keyed by case id)."""
    if declared is None or not declared.computed:
        return {}
    matrix = without_symbolic(declared)
    reference = reference_outcomes(root / "reports" / "runs")
    found: dict[str, list[Gap]] = {}
    for profile, path in matrix.computed.items():
        committed = committed_choices(path)
        for choice in recompute(matrix, profile, catalog, reference):
            if committed.get(choice.case) != choice.cells:
                held = ", ".join(committed.get(choice.case, ())) or "none"
                problem = f"{path.name} holds {held} for it in profile {profile}, recomputed: {', '.join(choice.cells)}"
                fix = f"run python -m bugmatrix plan --compute {profile} --write and commit {path.name}"
                found.setdefault(choice.case, []).append(Gap("computed", problem, fix))
    return found


def catalogue_gaps(matrix: Matrix, catalog: Catalog, cases_dir: Path, root: Path, declared: Matrix | None = None) -> list[Gap]:
    """Every policy any case of the catalogue does not keep, in case order (``declared``: the matrix as written, for ``computed``)."""
    profile = matrix.default_profile
    cells = [c for c in plan_cells(matrix, profile, catalog) if c.device == "cpu"]
    computed = _computed(declared, catalog, root)
    gaps = []
    for case in catalog.cases:
        found = [
            *_source_and_evidence(case),
            *_upstream(case),
            *_expectations(case, root),
            *_boundary(case, profile, cells),
            *_tables(case, root),
        ]
        gaps += [replace(g, where=_where(cases_dir, case, root)) for g in [*found, *computed.get(case.id, ())]]
    return gaps


def constraint_changes(matrix: Matrix, catalog: Catalog, cells: Sequence[Cell], cases_dir: Path, root: Path) -> list[str]:
    """One line per case and constraint that changes its CPU cells (or that its environment takes over), with how many."""
    lines = []
    for case in catalog.cases:
        ids = {v.id for v in case.variants}
        mine = [c for c in cells if c.device == "cpu" and ids & set(c.variants)]
        counts: Counter[str] = Counter()
        for cell in mine:
            dropped = {text for _, text in matrix.taken_over(cell.pins, cell.extra)}
            for constraint in matrix.matching_constraints(cell.pins):
                changes = [f"requires {r}" for r in constraint.requires if r not in dropped]
                changes += [f"installs {d} for {a}" for a, d in constraint.distribution.items() if a in cell.pins]
                if changes:
                    counts[f"{matrix.describe(constraint)} {', '.join(changes)}"] += 1
            counts.update(cell.overrides)
        lines += [f"{_where(cases_dir, case, root)}: {what} in {n} of its {len(mine)} cells" for what, n in counts.items()]
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix check`` options."""
    parser.add_argument("--policy", action="append", choices=POLICIES, help="check only these policies (repeatable; default: all)")


def run(args: argparse.Namespace) -> int:
    """Print one line per gap (exit 1), or what was checked (exit 0)."""
    matrix = load_resolved_matrix(args.matrix)
    catalog = load_catalog(args.cases, matrix)
    root = args.cases.resolve().parent  # the checkout the cases live in: its READMEs and reports/bisect/
    gaps = catalogue_gaps(matrix, catalog, args.cases.resolve(), root, load_matrix(args.matrix))
    gaps = [g for g in gaps if not args.policy or g.policy in args.policy]
    for line in constraint_changes(matrix, catalog, plan_all(matrix, catalog), args.cases.resolve(), root):
        print(f"bugmatrix: constraint: {line}")  # not a gap: what a case author must see
    for gap in gaps:
        print(f"bugmatrix: check: {gap}")
    checked = ", ".join(args.policy or POLICIES)
    print(f"{len(catalog.cases)} cases, {len(catalog.variants)} variants: {len(gaps)} gap(s) in {checked}")
    return 1 if gaps else 0
