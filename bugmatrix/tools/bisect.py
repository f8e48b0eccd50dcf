"""Find the first release where a variant's outcome changes, by running it (each probe through ``run_cell``).

Every release left out (yanked, no wheel for this Python) is said with why: a yanked release can be the real first
affected one. Only a reproduced <-> fixed change is a boundary ``--publish`` writes."""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from bugmatrix.cell.case import Variant
from bugmatrix.cell.descendants import reaping
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runners import chosen_runner
from bugmatrix.documents.run import load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.paths import REFERENCE, output_dir
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.registry import Fetch, fetch_project
from bugmatrix.run.envbuild import cell_venv
from bugmatrix.run.runner import CellSpec, built_python, run_cell
from bugmatrix.tools.cachesize import target_tags
from bugmatrix.tools.repro import variant_cell
from bugmatrix.versions import parse_version

__all__ = ["BisectResult", "Probe", "Skipped", "bisect_versions", "is_boundary", "registry_versions", "run_bisect", "run_variant_in"]

#: The newest glibc a probe's wheel may need: a probe is built on this x86_64 Linux machine, not for the runners.
PROBE_GLIBC_MINOR = 40


@dataclass(frozen=True)
class Skipped:
    """A release in the range that is not probed, and why."""

    version: str
    reason: str


@dataclass(frozen=True)
class Probe:
    """One version tried: its outcome, or why it could not be installed."""

    version: str
    outcome: str
    message: str = ""
    seconds: float = 0.0


@dataclass
class BisectResult:
    """The boundary, with every probe that led to it."""

    variant: str
    package: str
    held: dict[str, str]
    versions: list[str]
    probes: list[Probe] = field(default_factory=list)
    last_before: Probe | None = None
    first_after: Probe | None = None
    environments_built: int = 0
    mode: str = "bisect"
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def boundary(self) -> bool:
        """The change found is reproduced <-> fixed: what ``--publish`` may put where a case cites it."""
        return is_boundary(self.last_before, self.first_after)

    def summary(self) -> str:
        if self.last_before is None or self.first_after is None:
            ends = ", ".join(f"{p.version}: {p.outcome}" for p in self.probes if p.outcome != Outcome.INSTALL_FAILED)
            return f"{self.variant}: no change of outcome across {self.package} {self.versions[0]}..{self.versions[-1]} ({ends})"
        low, high = self.last_before, self.first_after
        change = f"{self.variant}: {self.package} {low.version} is {low.outcome}, {high.version} is {high.outcome}"
        cost = f"[{self.environments_built} environments for {len(self.versions)} releases]"
        if not self.boundary:
            fix = "read the probes' messages, or bisect another range (--from/--to)"
            return f"{change}: a change of outcome, not one between reproduced and fixed, so no boundary {cost}; {fix}"
        between = [s for s in self.skipped if Version(low.version) < Version(s.version) < Version(high.version)]
        warning = "; ".join(f"{self.package} {s.version} lies between and was not run ({s.reason})" for s in between)
        return f"{change} (first change{f' among the releases run; {warning}: it may be the first' if warning else ''}) {cost}"

    def to_json(self) -> dict[str, object]:
        """The result file: every field and ``boundary``."""
        return {**asdict(self), "boundary": self.boundary}


@functools.cache
def _supported(python: str) -> frozenset[Tag]:
    return frozenset(target_tags(python, glibc_minor=PROBE_GLIBC_MINOR))


def _wheel_tags(filename: str) -> frozenset[Tag]:
    try:
        return parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return frozenset()


def _why_not(files: Sequence[Mapping[str, object]], python: str | None) -> str | None:
    """Why a release's files cannot be probed here (None: they can): yanked, another Python, no wheel for this one."""
    if files and all(f.get("yanked") for f in files):
        reasons = sorted({str(f.get("yanked_reason") or "").strip() for f in files} - {""})
        return "yanked" + (f": {'; '.join(reasons)}" if reasons else "")
    if python is None or not files:
        return None
    live = [f for f in files if not f.get("yanked")]
    requires = {str(f.get("requires_python") or "") for f in live} - {""}
    try:
        if requires and not any(SpecifierSet(spec).contains(python) for spec in requires):
            return f"requires Python {' or '.join(sorted(requires))}, this bisect runs {python}"
    except (InvalidSpecifier, InvalidVersion):
        pass  # a malformed requires_python is the installer's to judge
    names = [str(f.get("filename", "")) for f in live]
    # an sdist builds here (slowly): probed, and the environment says it was built from source
    if any(_wheel_tags(n) & _supported(python) if n.endswith(".whl") else n.endswith((".tar.gz", ".zip")) for n in names):
        return None
    return f"no wheel for Python {python} on x86_64 Linux, and no sdist"


def registry_versions(
    distribution: str, *, low: str | None, high: str | None, pre: bool = False, fetch: Fetch | None = None, python: str | None = None
) -> tuple[list[str], list[Skipped]]:
    """Released versions between ``low`` and ``high`` (inclusive) that ``python`` can install, and those left out (with why)."""
    found, left_out = [], []
    for text, files in dict((fetch or fetch_project)(distribution).get("releases") or {}).items():
        version = parse_version(text)
        if version is None or version.is_devrelease or version.local or version.post is not None or (version.is_prerelease and not pre):
            continue  # not releases (as registry.release_versions)
        if (low and version < Version(low)) or (high and version > Version(high)):
            continue
        reason = _why_not(list(files or []), python)
        if reason is not None:
            left_out.append(Skipped(str(version), reason))
        elif files:
            found.append(version)
    if not found:
        msg = f"no {distribution} releases between {low or 'the first'} and {high or 'the latest'}; widen --from/--to"
        raise BugmatrixError(msg)
    return [str(v) for v in sorted(found)], sorted(left_out, key=lambda s: Version(s.version))


#: The two readings a boundary lies between: a bug's presence and its absence.
OPPOSITES = (Outcome.REPRODUCED.value, Outcome.FIXED.value)


def is_boundary(last_before: Probe | None, first_after: Probe | None) -> bool:
    """The pair reads one outcome and its opposite (reproduced <-> fixed): a boundary a case may cite, not just a change."""
    return last_before is not None and first_after is not None and {last_before.outcome, first_after.outcome} == set(OPPOSITES)


def bisect_versions(
    versions: list[str], probe: Callable[[str], Probe], *, linear: bool = False
) -> tuple[list[Probe], Probe | None, Probe | None]:
    """Binary search for the reproduced <-> fixed boundary: (every probe, the last release before it, the first after).

    Anchored at an end reading reproduced or fixed (the newest where both do), so old releases failing another way are
    searched through, not mistaken for the boundary; install failures are stepped over. ``linear`` probes all."""
    probes: dict[str, Probe] = {}

    def run(index: int) -> Probe:
        version = versions[index]
        if version not in probes:
            probes[version] = probe(version)
        return probes[version]

    def usable(indices: Iterable[int]) -> int | None:
        return next((i for i in indices if run(i).outcome != Outcome.INSTALL_FAILED), None)

    if linear:
        pairs = list(itertools.pairwise(p for p in map(run, range(len(versions))) if p.outcome != Outcome.INSTALL_FAILED))
        found = next((p for p in pairs if is_boundary(*p)), None) or next((p for p in pairs if p[0].outcome != p[1].outcome), None)
        return list(probes.values()), *(found or (None, None))
    lo, hi = usable(range(len(versions))), usable(reversed(range(len(versions))))
    if lo is None or hi is None or lo >= hi or run(lo).outcome == run(hi).outcome:
        return list(probes.values()), None, None
    anchor_high = run(hi).outcome in OPPOSITES
    anchor = run(hi).outcome if anchor_high else run(lo).outcome
    while hi - lo > 1 and anchor in OPPOSITES:
        mid = (lo + hi) // 2
        chosen = usable(sorted(range(lo + 1, hi), key=lambda i: abs(i - mid)))
        if chosen is None:
            break  # everything in between fails to install: the boundary is as narrow as it gets
        if (run(chosen).outcome == anchor) == anchor_high:
            hi = chosen
        else:
            lo = chosen
    return list(probes.values()), run(lo), run(hi)


def run_variant_in(root: Path, matrix: Matrix, pins: Mapping[str, str], variant: Variant, timeout: float = 900) -> tuple[Probe, bool]:
    """Build (or reuse a planned cell's lock and venv) the env for ``pins`` and run one variant there: (probe, built?)."""
    label = ",".join(f"{k}={v}" for k, v in pins.items())
    started = time.perf_counter()
    timed_out = False

    def execute(command: Sequence[str], env: Mapping[str, str]) -> int:
        nonlocal timed_out
        code, timed_out = run_probe(command, root, env, timeout)
        return code

    cid, extra = variant_cell(matrix, variant, pins)
    spec = CellSpec(cid, pins, extra=extra, runner=chosen_runner(workers=1))
    venv = cell_venv(root, cid) if built_python(root, cid) else root / ".nox" / "bisect" / cid  # a planned cell's reused
    with tempfile.TemporaryDirectory() as tmp:
        run_file = Path(tmp) / "run.json"
        done = run_cell(matrix, spec, run_file, execute=execute, root=root, venv=venv, select=[VariantId.parse(variant.id).node()])
        results = load_run_file(run_file).results if done.environment is not None and run_file.exists() else []
    seconds = round(time.perf_counter() - started, 1)
    if done.install_failed is not None:
        return Probe(label, Outcome.INSTALL_FAILED.value, done.install_failed.splitlines()[-1], seconds), True
    built = bool(done.environment and done.environment.built)
    if results:
        return Probe(label, results[0].outcome.value, results[0].message, seconds), built
    if timed_out:
        return Probe(label, Outcome.TIMEOUT.value, f"no result after {timeout:g}s", seconds), built
    return Probe(label, Outcome.CRASHED.value, "no result recorded", seconds), built


def run_probe(command: Sequence[str], root: Path, env: Mapping[str, str], timeout: float) -> tuple[int, bool]:
    """Run one probe's pytest: (its exit code, whether it outlived ``timeout``); all it started is killed and reaped after.

    The variants' children may have sessions of their own: this process is their subreaper while the probe runs."""
    with (
        reaping("after the probe ended"),
        subprocess.Popen(
            list(command), cwd=root, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        ) as proc,
    ):
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(), True


def default_out(variant: str, package: str, *, publish: bool = False) -> Path:
    """``build/reports/bisect/<variant>--<package>.json``; published: ``reports/bisect/...``, where cases cite it as evidence."""
    slug = re.sub(r"[^A-Za-z0-9_]+", "-", variant).strip("-")
    return (REFERENCE if publish else output_dir()) / "bisect" / f"{slug}--{package}.json"


def run_bisect(args: argparse.Namespace, matrix: Matrix, variant: Variant, held: dict[str, str], own: Sequence[str] = ()) -> int:
    """The ``bisect`` subcommand: probe, print, write the result file; ``own``: the case's ``Case(versions=...)`` of the axis."""
    axes = dict.fromkeys([*variant.axes, *(a for a in matrix.held_axes if a != matrix.interpreter)])
    if args.package not in axes:
        msg = f"{variant.id} does not depend on {args.package!r} (its axes: {', '.join(axes)}); bisect one of those"
        raise BugmatrixError(msg)
    distribution = matrix.providers({**held, args.package: held.get(args.package, matrix.base[args.package])})[args.package][0]
    python = held.get(matrix.interpreter, matrix.base.get(matrix.interpreter))
    if args.versions:
        versions, skipped, where = args.versions, [], "the --versions given"
    else:
        low = args.low or min([*matrix.axes[args.package].versions, *own], key=Version)
        start = "--from" if args.low else f"the matrix's first {args.package} release,"
        where = f"from {start} {low} to {f'--to {args.high}' if args.high else 'the latest'}; --from/--to for another range"
        versions, skipped = registry_versions(distribution, low=low, high=args.high, pre=args.pre, python=python)
    others = {k: v for k, v in held.items() if k != args.package}
    result = BisectResult(variant.id, args.package, others, versions, mode="linear" if args.linear else "bisect", skipped=skipped)

    def probe(version: str) -> Probe:
        found, built = run_variant_in(args.root, matrix, {**held, args.package: version}, variant, timeout=args.timeout)
        result.environments_built += 1
        print(f"  {args.package}=={version}: {found.outcome} ({found.seconds:.0f}s{', new env' if built else ', reused env'})", flush=True)
        return replace(found, version=version)

    print(
        f"{variant.id}: {result.mode} over {len(versions)} {args.package} releases {versions[0]}..{versions[-1]} ({where}), "
        f"holding {result.held}"
    )
    for left_out in skipped:
        print(f"  not run: {args.package}=={left_out.version}: {left_out.reason}")
    result.probes, result.last_before, result.first_after = bisect_versions(versions, probe, linear=args.linear)
    for p in (p for p in result.probes if p.outcome == Outcome.INSTALL_FAILED):
        print(f"  skipped {args.package}=={p.version}: cannot be installed ({p.message})")
    print(result.summary())
    publish = args.publish and result.boundary
    out = args.out or default_out(variant.id, args.package + ("-linear" if args.linear else ""), publish=publish)
    write_json_atomic(out, result.to_json())
    print(f"wrote {out}")
    if args.publish and not result.boundary:
        ends = [p for p in (result.last_before, result.first_after) if p is not None]
        found = ", ".join(f"{args.package} {p.version} {p.outcome}" for p in ends) or "no change of outcome"
        fix = "bisect a range whose ends read reproduced and fixed (--from/--to)"
        msg = f"--publish refused: {found}: not a reproduced <-> fixed change, so no boundary is published (the result is in {out}); {fix}"
        raise BugmatrixError(msg)
    return 0
