"""How many bytes a nightly downloads cold, and what its uv caches hold, without downloading them.

uv resolves each cell for the runners (``--format pylock.toml`` lists each wheel's size); the wheel an installer picks
is the best-ranked tag. An estimate: actions/cache stores a zstd tarball of uv's unpacked wheels, near the zips' size."""

from __future__ import annotations

import argparse
import functools
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from bugmatrix import values
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import load_catalog
from bugmatrix.plan.cells import Cell, plan_cells
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix
from bugmatrix.run.diskbudget import heavy_distributions
from bugmatrix.run.envbuild import uv_command
from bugmatrix.run.lock import DEFAULT_PLATFORM

__all__ = [
    "Artifact",
    "CacheSize",
    "Unresolvable",
    "add_arguments",
    "cache_key",
    "heavy_pins",
    "measure",
    "measure_cells",
    "resolved_artifacts",
    "run",
    "target_tags",
]

#: The CUDA runtime wheels (1.7-3.2 GB per torch release): the workflow cleans them from a saved cache to fit in 10 GB.
TRIMMED = ("nvidia-", "triton", "cuda-")
#: manylinux_2_28 is what uv assumes for x86_64-unknown-linux-gnu (and what ubuntu-latest satisfies).
GLIBC_MINOR = 28
GB = 1e9


@dataclass(frozen=True)
class Artifact:
    """One file an install downloads: a wheel, or an sdist where no wheel fits (its URL and hash: for the GPU kit)."""

    name: str
    version: str
    filename: str
    size: int
    url: str = field(default="", compare=False)
    sha256: str = field(default="", compare=False)

    @property
    def pure(self) -> bool:
        """A wheel with no native code (``py3-none-any``)."""
        wheel = self.filename.endswith(".whl")
        return wheel and all(tag.platform == "any" and tag.abi == "none" for tag in parse_wheel_filename(self.filename)[3])


class Unresolvable(BugmatrixError):
    """uv found no resolution; ``reason`` is uv's own last line."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class CacheSize:
    """Bytes of all jobs, distinct bytes overall, and per cache key (``kept_per_key``: without TRIMMED); ``cached_bytes``: what all
    keys together hold (a file used under two keys is stored twice), ``kept_bytes`` the same without TRIMMED."""

    jobs_bytes: int
    total_bytes: int
    per_key: Mapping[str, int]
    files: int
    kept_per_key: Mapping[str, int]
    cached_bytes: int
    kept_bytes: int


def target_tags(python: str, *, glibc_minor: int = GLIBC_MINOR) -> list[Tag]:
    """Wheel tags for CPython ``python`` on linux x86_64, best first, as an installer ranks them."""
    major, minor = (int(part) for part in python.split(".")[:2])
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(glibc_minor, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    interpreter = f"cp{major}{minor}"
    return [
        *cpython_tags((major, minor), abis=[interpreter, "abi3", "none"], platforms=platforms),
        *compatible_tags((major, minor), interpreter, platforms),
    ]


def _pick(package: Mapping[str, object], rank: Mapping[Tag, int]) -> Artifact | None:
    def score(wheel: Mapping[str, object]) -> int:  # the best tag's rank; len(rank): none fits
        return min((rank[t] for t in parse_wheel_filename(str(wheel["url"]).rsplit("/", 1)[-1])[3] if t in rank), default=len(rank))

    fitting = [w for w in package.get("wheels", []) or [] if score(w) < len(rank)]  # type: ignore[union-attr]
    chosen = min(fitting, key=score) if fitting else package.get("sdist")
    if not isinstance(chosen, Mapping):
        return None
    url, hashes = str(chosen["url"]), chosen.get("hashes") or {}
    sha256 = str(hashes.get("sha256", "")) if isinstance(hashes, Mapping) else ""
    return Artifact(str(package["name"]), str(package["version"]), url.rsplit("/", 1)[-1], int(chosen.get("size", 0)), url, sha256)


def resolved_artifacts(
    requirements: Sequence[str], python: str, *, platform: str = DEFAULT_PLATFORM, only_binary: bool = False
) -> list[Artifact]:
    """The files one environment downloads, resolved by uv for the runners (``only_binary``: wheels only)."""
    command = [*uv_command(), "pip", "compile", "-", "--quiet", "--format", "pylock.toml", "--python-version", python]
    command += ["--python-platform", platform, *(["--only-binary", ":all:"] if only_binary else [])]
    result = subprocess.run(command, input="\n".join(requirements) + "\n", capture_output=True, text=True, check=False)
    if result.returncode != 0:
        reason = ([line.strip() for line in result.stderr.splitlines() if line.strip()][-1:] or ["no output"])[0]
        msg = f"cannot resolve {' '.join(requirements)} for python {python}: {reason}; fix the cell's pins"
        raise Unresolvable(msg, reason)
    rank = {tag: i for i, tag in enumerate(target_tags(python))}
    lock = tomllib.loads(result.stdout)
    return [a for a in (_pick(p, rank) for p in lock.get("packages", [])) if a is not None]


def heavy_pins(matrix: Matrix, pins: Mapping[str, str], *, harness: bool = True) -> list[tuple[str, str]]:
    """(name as required, version) of each heavy distribution (the torch stack) the pins' requirements pin exactly."""
    pinned = (requirement.partition("==") for requirement in matrix.requirements_for(pins, harness=harness))
    return [(name, version) for name, sep, version in pinned if sep and heavy_distributions([name])]


def cache_key(matrix: Matrix, pins: Mapping[str, str]) -> str:
    """``torch-2.15.0-py3.11``: cells pinning the same heavy distributions (most of the bytes) and Python share one uv cache."""
    return "-".join([*(f"{name}-{version}" for name, version in heavy_pins(matrix, pins, harness=False)), f"py{pins[matrix.interpreter]}"])


def measure(environments: Iterable[tuple[str, Sequence[str], str]]) -> CacheSize:
    """Sizes for ``(cache key, requirements, python)`` triples, one per CI job (a cold nightly: each runner starts empty)."""
    resolve = functools.cache(resolved_artifacts)  # a CUDA twin installs exactly what its CPU cell does: resolved once
    jobs = 0
    per_key: dict[str, dict[str, Artifact]] = {}
    for key, requirements, python in environments:
        for artifact in resolve(tuple(requirements), python):
            jobs += artifact.size
            per_key.setdefault(key, {})[artifact.filename] = artifact
    overall = {filename: a.size for files in per_key.values() for filename, a in files.items()}
    held = {k: sum(a.size for a in v.values()) for k, v in per_key.items()}
    kept = {k: sum(a.size for a in v.values() if not a.name.startswith(TRIMMED)) for k, v in per_key.items()}
    return CacheSize(jobs, sum(overall.values()), held, len(overall), kept, sum(held.values()), sum(kept.values()))


def measure_cells(matrix: Matrix, cells: Sequence[Cell]) -> CacheSize:
    """:func:`measure` for planned cells, one CI job each under its :func:`cache_key`."""
    return measure((cache_key(matrix, c.pins), matrix.requirements_for(c.pins), c.python) for c in cells)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix cachesize`` options."""
    parser.add_argument("--profile", type=values.profile, default="nightly", help="the profile whose cells' downloads are counted")


def run(args: argparse.Namespace) -> int:
    """Print the cold download and the cache per key for one profile's cells (CUDA twins included: they are jobs too)."""
    matrix = load_resolved_matrix(args.matrix)
    cells = plan_cells(matrix, args.profile, load_catalog(args.cases, matrix))
    size = measure_cells(matrix, cells)
    for key, value in sorted(size.per_key.items()):
        print(f"{key:24} {value / GB:6.2f} GB, {size.kept_per_key[key] / GB:5.2f} GB without the CUDA runtime wheels")
    print(f"{len(cells)} jobs, {len(size.per_key)} cache keys, {size.files} distinct files")
    print(f"cold nightly, every job downloading: {size.jobs_bytes / GB:.2f} GB; distinct files: {size.total_bytes / GB:.2f} GB")
    print(f"caches saved once per key: {size.cached_bytes / GB:.2f} GB; trimmed of {', '.join(TRIMMED)}: {size.kept_bytes / GB:.2f} GB")
    print("(GitHub keeps 10 GB of caches per repository)")
    return 0
