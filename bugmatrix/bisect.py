"""Find the first release where a variant's outcome changes, by running it.

Versions come from the registry (PyPI's JSON API: yanked releases and, unless
asked, pre-releases left out). The other axes are held at a cell's pins (or
the matrix's base pins). Both ends are run, then a binary search runs about
log2(n) more environments; each environment is built with uv and reused when
it already exists (a bisect env, or the nox venv of a planned cell with the
same pins). A release that cannot be installed is skipped and reported, never
treated as an outcome.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from bugmatrix.envbuild import InstallFailed, cell_venv, prepare_environment, uv_command
from bugmatrix.errors import BugmatrixError
from bugmatrix.matrix import Matrix
from bugmatrix.plan import cell_id, import_modules, requirements_for
from bugmatrix.versions import AXIS_DISTRIBUTIONS

__all__ = ["BisectResult", "Probe", "bisect_versions", "env_dir", "registry_versions", "run_variant_in"]

VARIANT_ID = re.compile(r"^(?P<case>\w+)::(?P<name>\w+)\[(?P<device>\w+)\]$")
PYPI_JSON = "https://pypi.org/pypi/{name}/json"


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

    def summary(self) -> str:
        if self.last_before is None or self.first_after is None:
            ends = ", ".join(f"{p.version}: {p.outcome}" for p in self.probes if p.outcome != "install-failed")
            return f"{self.variant}: no change of outcome across {self.package} {self.versions[0]}..{self.versions[-1]} ({ends})"
        return (
            f"{self.variant}: {self.package} {self.last_before.version} is {self.last_before.outcome}, "
            f"{self.first_after.version} is {self.first_after.outcome} (first change) "
            f"[{self.environments_built} environments for {len(self.versions)} releases]"
        )

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def parse_variant_id(text: str) -> tuple[str, str, str]:
    match = VARIANT_ID.match(text)
    if not match:
        msg = f"{text!r} is not a variant id; write CASE::VARIANT[DEVICE], e.g. autocast_cache::core[cpu]"
        raise BugmatrixError(msg)
    return match["case"], match["name"], match["device"]


def registry_versions(
    axis: str, *, low: str | None, high: str | None, pre: bool = False, fetch: Callable[[str], dict] | None = None
) -> list[str]:
    """Released versions of an axis package between ``low`` and ``high`` (inclusive)."""
    if axis not in AXIS_DISTRIBUTIONS:
        msg = f"{axis!r} is not a package axis; use one of {', '.join(AXIS_DISTRIBUTIONS)}"
        raise BugmatrixError(msg)
    fetch = fetch or _fetch_json
    releases = fetch(AXIS_DISTRIBUTIONS[axis][0]).get("releases", {})
    found = []
    for text, files in releases.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not files or all(f.get("yanked") for f in files) or version.is_devrelease or (version.is_prerelease and not pre):
            continue
        if version.local or version.post is not None:
            continue  # post releases repackage a release; they don't change behaviour
        if (low and version < Version(low)) or (high and version > Version(high)):
            continue
        found.append(version)
    if not found:
        msg = f"no {axis} releases between {low or 'the first'} and {high or 'the latest'}; widen --from/--to"
        raise BugmatrixError(msg)
    return [str(v) for v in sorted(found)]


def _fetch_json(name: str) -> dict:
    try:
        with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=30) as response:  # noqa: S310 - fixed https URL
            return json.load(response)
    except OSError as exc:
        msg = f"cannot read {name}'s release list from the registry ({exc}); check the network or pass --versions"
        raise BugmatrixError(msg) from exc


def bisect_versions(
    versions: list[str], probe: Callable[[str], Probe], *, linear: bool = False
) -> tuple[list[Probe], Probe | None, Probe | None]:
    """Binary search for the first version whose outcome differs from the oldest one's.

    Install failures are skipped (the next untried version inside the interval
    is probed instead). Assumes one change of outcome in the range, as a
    bisect must; ``linear`` probes everything, to check that assumption.
    """
    probes: dict[str, Probe] = {}

    def run(index: int) -> Probe:
        version = versions[index]
        if version not in probes:
            probes[version] = probe(version)
        return probes[version]

    def usable(indices: range) -> int | None:
        for index in indices:
            if run(index).outcome != "install-failed":
                return index
        return None

    if linear:
        for index in range(len(versions)):
            run(index)
        ok = [probes[v] for v in versions if probes[v].outcome != "install-failed"]
        flip = next((i for i in range(1, len(ok)) if ok[i].outcome != ok[0].outcome), None)
        return list(probes.values()), (ok[flip - 1] if flip else None), (ok[flip] if flip else None)
    lo = usable(range(len(versions)))
    hi = usable(range(len(versions) - 1, -1, -1))
    if lo is None or hi is None or lo >= hi or run(lo).outcome == run(hi).outcome:
        return list(probes.values()), None, None
    start = run(lo).outcome
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidates = sorted(range(lo + 1, hi), key=lambda i: abs(i - mid))
        chosen = next((i for i in candidates if run(i).outcome != "install-failed"), None)
        if chosen is None:
            break  # everything in between fails to install: the boundary is as narrow as it gets
        if run(chosen).outcome == start:
            lo = chosen
        else:
            hi = chosen
    return list(probes.values()), run(lo), run(hi)


def env_dir(root: Path, pins: Mapping[str, str]) -> Path:
    """Reuse a planned cell's nox venv when one exists for these pins; else a bisect venv."""
    cid = cell_id(pins)
    nox_venv = cell_venv(root, cid)
    return nox_venv if (nox_venv / "bin" / "python").exists() else root / ".nox" / "bisect" / cid


def run_variant_in(root: Path, matrix: Matrix, pins: Mapping[str, str], variant: str, timeout: float = 600) -> tuple[Probe, bool]:
    """Build (or reuse) the env for ``pins`` and run one variant there; (probe, built?)."""
    case, name, device = parse_variant_id(variant)
    venv = env_dir(root, pins)
    started = time.perf_counter()
    if not (venv / "bin" / "python").exists():
        subprocess.run([*uv_command(), "venv", "-q", "-p", pins["python"], str(venv)], check=True)
    try:
        built = prepare_environment(venv, requirements_for(matrix, pins), import_modules(matrix, pins))
    except InstallFailed as exc:
        return Probe(pins_label(pins), "install-failed", str(exc).splitlines()[-1], time.perf_counter() - started), True
    with tempfile.TemporaryDirectory() as tmp:
        run_file = Path(tmp) / "run.json"
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pytest", f"{root}/cases/{case}.py::{name}[{device}]",
             "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--bugmatrix-cell", "bisect",
             "--bugmatrix-run-file", str(run_file)],
            cwd=root, capture_output=True, text=True, timeout=timeout, check=False,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        )  # fmt: skip
        if not run_file.exists():
            return Probe(pins_label(pins), "crashed", "no run file written", time.perf_counter() - started), built
        record = json.loads(run_file.read_text())["results"][0]
    return Probe(pins_label(pins), record["outcome"], record["message"], round(time.perf_counter() - started, 1)), built


def pins_label(pins: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in pins.items())


def default_out(root: Path, variant: str, package: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_]+", "-", variant).strip("-")
    return root / "reports" / "bisect" / f"{slug}--{package}.json"


if __name__ == "__main__":  # pragma: no cover - use `python -m bugmatrix bisect`
    sys.exit("use: python -m bugmatrix bisect VARIANT PACKAGE")
