"""The GPU kit: the cases, the harness and the wheels of some axis versions, for a GPU box that reaches no registry.

``nox -s gpu-kit -- --pin lightning=2.0.3,2.6.6`` here, ``python3 run.py`` (:mod:`bugmatrix.tools.gpukit_run`) on the
box. uv resolves each version per target Python, wheels only; one that does not, or whose own wheel is native, is
refused and nothing is written. What the box has by definition is left out; ``run.py`` checks the native rest."""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import check_output_dir, write_json_atomic
from bugmatrix.paths import ROOT
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.provenance import origin_now
from bugmatrix.run.lock import DEFAULT_PLATFORM
from bugmatrix.tools.cachesize import Artifact, Unresolvable, resolved_artifacts
from bugmatrix.tools.gpukit_run import SCHEMA
from bugmatrix.versions import parse_version

__all__ = ["DEFAULT_PYTHON", "KitRun", "add_arguments", "pack_kit", "parse_pins", "plan_kit", "run"]

#: The Python of the GPU image the first runs were taken on (docs/gpu.md); ``--python`` names another.
DEFAULT_PYTHON = "3.12"
#: What a cell needs of the checkout, besides the cases directory (``--cases``) and the script.
CHECKOUT = ("bugmatrix", "conftest.py", "matrix.toml", "pyproject.toml")
SCRIPT = Path(__file__).with_name("gpukit_run.py")
DOWNLOAD_TIMEOUT_S = 120


@dataclass(frozen=True)
class KitRun:
    """One run on the box: an axis at one version on one target Python, the wheels it installs and what the box must have."""

    python: str
    axis: str
    version: str
    label: str  # the axis's part of a cell id (pl2.0.3): the run's cell is system-<device>-<label>
    axis_spec: dict[str, Any]  # every axis's providers, this axis's narrowed to the one installed at this version
    carried: tuple[Artifact, ...]
    requires: tuple[str, ...]  # the version's own requirements that are native: the box's must satisfy them
    from_image: tuple[str, ...]  # native dependencies left to the box (run.py checks their versions)

    def to_json(self) -> dict[str, Any]:
        """kit.json's entry, read by run.py: the carried wheels as ``install`` requirements and ``wheels`` file names."""
        own = {name: getattr(self, name) for name in ("python", "axis", "version", "label", "axis_spec")}
        carried = {"install": [f"{a.name}=={a.version}" for a in self.carried], "wheels": [a.filename for a in self.carried]}
        return own | carried | {"requires": list(self.requires), "from_image": list(self.from_image)}


def parse_pins(values: Sequence[str], matrix: Matrix) -> list[tuple[str, str]]:
    """``--pin AXIS=V,V`` (repeatable) -> (axis, version) pairs in the order given."""
    pairs: list[tuple[str, str]] = []
    for value in values:
        axis, sep, versions = value.partition("=")
        if not sep or axis not in matrix.package_axes:
            msg = f"--pin {value}: not AXIS=VERSION[,VERSION...] with AXIS one of {', '.join(matrix.package_axes)} ({matrix.path})"
            raise BugmatrixError(msg)
        for version in filter(None, (v.strip() for v in versions.split(","))):
            if parse_version(version) is None:
                msg = f"--pin {value}: {version!r} is not a version; write a release such as 2.0.3"
                raise BugmatrixError(msg)
            pairs.append((axis, version))
    if not pairs:
        msg = "no version asked for; pass --pin AXIS=VERSION[,VERSION...], e.g. --pin lightning=2.0.3,2.6.6"
        raise BugmatrixError(msg)
    return list(dict.fromkeys(pairs))


def _kit_run(matrix: Matrix, python: str, axis: str, version: str, image: set[str], platform: str) -> KitRun | str:
    """The run of one version on one Python, or why it cannot be carried (one phrase)."""
    pinned = {matrix.interpreter: python, axis: version}
    requested = matrix.requirements_for(pinned, harness=False)
    try:
        resolved = resolved_artifacts(requested, python, platform=platform, only_binary=True)
    except Unresolvable as exc:
        found = re.search(r"Wheels are required for `([^`]+)`", exc.reason)
        why = f"no wheel of {found[1]} fits Python {python} on {platform}" if found else exc.reason
        return f"{axis} {version} cannot install offline on Python {python}: {why}"
    own = canonicalize_name(matrix.providers(pinned)[axis][0])
    explicit = {canonicalize_name(Requirement(r).name): r for r in requested}  # the version's own requirements: always carried
    name = {a.filename: canonicalize_name(a.name) for a in resolved}
    native = [a for a in resolved if not a.pure]
    if any(name[a.filename] == own for a in native):
        wheel = next(a.filename for a in native if name[a.filename] == own)
        return f"{axis} {version} ships native code ({wheel}): the kit carries pure-Python wheels only"
    carried = tuple(a for a in resolved if a.pure and (name[a.filename] in explicit or name[a.filename] not in image))
    requires = tuple(explicit[name[a.filename]] for a in native if name[a.filename] in explicit)
    from_image = tuple(a.name for a in native if name[a.filename] not in image and name[a.filename] not in explicit)
    spec = {"axes": {**matrix.axis_providers(None), **matrix.axis_providers(pinned)}, "device_runtime": matrix.device_runtime}
    return KitRun(python, axis, version, matrix.axes[axis].id_part(version), spec, carried, requires, from_image)


def plan_kit(matrix: Matrix, pins: Sequence[tuple[str, str]], pythons: Sequence[str], platform: str = DEFAULT_PLATFORM) -> list[KitRun]:
    """What each (Python, axis, version) carries, resolved by uv (metadata only); every refusal in one line."""
    # What the box has by definition: the device runtime axis's distributions and the harness's requirements, with their dependencies.
    runtime = matrix.device_runtime
    given = [*(matrix.axes[runtime].distributions if runtime else ()), *matrix.file.harness.requires]
    found: list[KitRun | str] = []
    for python in pythons:
        image = {canonicalize_name(a.name) for a in resolved_artifacts(given, python, platform=platform)}
        found += [_kit_run(matrix, python, axis, version, image, platform) for axis, version in pins]
    refused = [f for f in found if isinstance(f, str)]
    if refused:
        msg = "; ".join(refused) + "; leave it out or pass another --python"
        raise BugmatrixError(msg)
    return [f for f in found if isinstance(f, KitRun)]


def _download(artifact: Artifact, into: Path) -> None:
    try:
        with urllib.request.urlopen(artifact.url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310 - the index URL uv resolved
            data = response.read()
    except (urllib.error.URLError, OSError) as exc:
        msg = f"cannot download {artifact.url} ({getattr(exc, 'reason', exc)}); the kit is packed where the registry is reachable"
        raise BugmatrixError(msg) from None
    if artifact.sha256 and hashlib.sha256(data).hexdigest() != artifact.sha256:
        msg = f"{artifact.url}: its sha256 is not the one uv's resolution names; pack the kit again"
        raise BugmatrixError(msg)
    (into / artifact.filename).write_bytes(data)


def pack_kit(runs: Sequence[KitRun], matrix: Matrix, *, root: Path, cases: Path, out: Path, platform: str = DEFAULT_PLATFORM) -> int:
    """Write the kit into ``out`` all or nothing (built beside it, then moved into place); its size in bytes."""
    check_output_dir(out, "--out", force=(out / "kit.json").is_file(), forbidden=[cases], example="build/gpu-kit")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        wheels = staging / "wheels"
        wheels.mkdir()
        for artifact in {a.filename: a for r in runs for a in r.carried}.values():
            _download(artifact, wheels)
        skip = shutil.ignore_patterns("__pycache__", "*.pyc")
        for source, name in [(cases, "cases"), *((root / n, n) for n in CHECKOUT), (SCRIPT, "run.py")]:
            if source.is_dir():
                shutil.copytree(source, staging / name, ignore=skip)
            else:
                shutil.copy2(source, staging / name)
        manifest = {"schema": SCHEMA, "made": origin_now(root), "platform": platform, "axis_spec": matrix.axis_spec(None)}
        write_json_atomic(staging / "kit.json", manifest | {"cell_deadline_s": matrix.cell_deadline_s, "runs": [r.to_json() for r in runs]})
        size = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old."))
        if out.exists():
            out.rename(old / out.name)
        staging.rename(out)
        shutil.rmtree(old)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return size


#: Option help texts too long for their option's line.
PIN_DESC = "axis versions to carry, one run each (repeatable)"
PYTHON_DESC = "the box's Python(s), comma-separated: what installs offline is decided per Python (default %(default)s)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix gpu-kit`` options."""
    parser.add_argument("--pin", action="append", default=[], metavar="AXIS=V[,V...]", help=PIN_DESC)
    parser.add_argument("--python", default=DEFAULT_PYTHON, help=PYTHON_DESC)
    parser.add_argument("--platform", default=DEFAULT_PLATFORM, help="the box's platform, as uv names it (default %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-kit", help="the kit's directory (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Resolve, refuse or pack; print what each run carries and the kit's size."""
    matrix = load_matrix(args.matrix)
    pythons = [p.strip() for p in args.python.split(",") if p.strip()]
    wrong = [p for p in pythons if not re.fullmatch(r"3\.\d+", p)] or ([] if pythons else [args.python])
    if wrong:
        msg = f"--python {args.python}: {wrong[0]!r} is not a Python minor version; write e.g. 3.12 (or 3.11,3.12)"
        raise BugmatrixError(msg)
    runs = plan_kit(matrix, parse_pins(args.pin, matrix), pythons, args.platform)
    size = pack_kit(runs, matrix, root=args.root, cases=args.cases, out=args.out, platform=args.platform)
    for kit_run in runs:
        native = kit_run.requires + kit_run.from_image
        left = f"; native, left to the box (run.py checks the versions the carried ones require): {', '.join(native)}" if native else ""
        print(f"py{kit_run.python} {kit_run.label}: {len(kit_run.carried)} wheels{left}")
    print(f"kit: {args.out} ({size / 2**20:.1f} MiB); on the box: python3 run.py (docs/gpu.md)")
    return 0
