"""The GPU kit's script (``run.py`` in a kit): run the cases once per carried version, on a box that reaches no registry.

Runs with the box's own Python (3.10+, pytest and pip; standard library and the kit's harness only). Each run's wheels
go into a fresh ``--target`` directory first on ``PYTHONPATH``; ``cases/`` runs as cell ``system-<device>-<label>``.
Exit: 0 every run left its run file; 1 a run was refused or did not finish; 2 the box lacks what the kit needs."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from importlib import metadata, util
from pathlib import Path
from typing import Any

try:  # one line rather than a traceback
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from bugmatrix.cell.axes import parse_spec, set_active_spec
    from bugmatrix.cell.cellspec import CellOptions
    from bugmatrix.cell.environment import describe_environment, observe_environment
    from bugmatrix.files import write_text_atomic
    from bugmatrix.versions import installed_version
except ImportError as missing:
    print(
        f"run.py: error: {missing.name} is not importable by {sys.executable}; run run.py with the Python that has torch and pytest",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

__all__ = ["SCHEMA", "cell_device", "main", "unmet"]

KIT = Path(__file__).resolve().parent
SCHEMA = "bugmatrix.kit/1"
#: ``--isolated``: the box's pip configuration (an index, other find-links) stays out.
PIP = ("-m", "pip", "--isolated", "install", "--no-index", "--no-deps", "--no-compile", "--disable-pip-version-check")
#: The cases as the runner starts a cell (bugmatrix/run/command.py), its fork runner included.
PYTEST = ("-m", "pytest", "cases", "-p", "no:cacheprovider", "-q", "-rs")


class Refused(Exception):
    """The box lacks what the kit needs: one line, exit 2."""


def check_box(kit_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """kit.json (checked for its schema) and its runs packed for this Python, once the device runtime, pytest and pip are found."""
    try:
        kit = json.loads((kit_dir / "kit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"{kit_dir / 'kit.json'}: cannot read it ({exc}); run run.py from an unpacked kit (nox -s gpu-kit makes one)"
        raise Refused(msg) from None
    if not isinstance(kit, dict) or kit.get("schema") != SCHEMA:
        msg = f"{kit_dir / 'kit.json'}: not a {SCHEMA} kit; pack it again with this checkout's nox -s gpu-kit"
        raise Refused(msg)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    runs = [r for r in kit["runs"] if r["python"] == python]
    if not runs:
        packed = ", ".join(sorted({r["python"] for r in kit["runs"]}))
        msg = f"this is Python {python} ({sys.executable}) and the kit was packed for {packed}; pack it again with --python {python}"
        raise Refused(msg)
    spec = kit["axis_spec"]
    providers = spec["axes"].get(spec.get("device_runtime") or "", [])
    if providers and not any(installed_version(d) for d, _ in providers):
        names = ", ".join(d for d, _ in providers)
        msg = f"{names} is not installed for {sys.executable}; run run.py with the Python that has it (the kit carries none)"
        raise Refused(msg)
    for module in ("pytest", "pip"):
        if util.find_spec(module) is None:
            fix = "python -m ensurepip adds pip offline" if module == "pip" else "run run.py with the Python that has the stack and pytest"
            msg = f"{module} is not importable by {sys.executable}; {fix}"
            raise Refused(msg)
    return kit, runs


def cell_device(environment: dict[str, Any]) -> str:
    """``cuda-h200`` from "NVIDIA H200" (the GPU's name, lowercased, without the vendor), ``cpu`` where no GPU is seen."""
    if not environment.get("cuda_available"):
        return "cpu"
    words = [w for w in re.findall(r"[a-z0-9]+", str(environment.get("gpu") or "").lower()) if w != "nvidia"]
    return "cuda-" + ("-".join(words) or "gpu")


def describe_box(out: Path, kit: dict[str, Any]) -> tuple[str, str]:
    """Write environment.txt (the box before any carried wheel); (the cell id's device part, the stack)."""
    set_active_spec(parse_spec(kit["axis_spec"]))
    environment = observe_environment()
    lines = [
        f"date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {socket.gethostname()}",
        f"python: {sys.version.split()[0]} ({sys.executable}), {environment['platform']}",
        f"stack: {describe_environment(environment)}",
        "distributions: " + ", ".join(f"{n} {v}" for n, v in environment["distributions"].items()),
    ]
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=False)
        lines += ["", smi.stdout.rstrip()]
    write_text_atomic(out / "environment.txt", "\n".join(lines) + "\n")
    return cell_device(environment), describe_environment(environment)


def unmet(target: Path, run: dict[str, Any]) -> list[str]:
    """What the carried distributions and the version's native requirements need that this Python lacks (extras not followed)."""
    carried = {canonicalize_name(text.partition("==")[0]) for text in run["install"]}
    wanted = [(text, f"{run['axis']} {run['version']}") for text in run["requires"]]
    for dist in metadata.distributions(path=[str(target)]):
        wanted += [(text, f"{dist.metadata['Name']} {dist.version}") for text in dist.requires or []]
    problems = []
    for text, who in wanted:
        requirement = Requirement(text)
        elsewhere = requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})  # for another platform or an extra
        if elsewhere or canonicalize_name(requirement.name) in carried:
            continue
        have = installed_version(requirement.name)
        if have is None or not requirement.specifier.contains(have, prereleases=True):
            problems.append(f"{who} needs {requirement.name}{requirement.specifier or ''}, and this Python has {have or 'none'}")
    return list(dict.fromkeys(problems))


def summary(run_file: Path) -> str:
    """``27 fixed, 20 reproduced, 8 skipped (55 as-expected)``: what the run file holds."""
    results = json.loads(run_file.read_text(encoding="utf-8"))["results"]
    outcomes = Counter(r["outcome"] for r in results)
    verdicts = Counter(r.get("verdict") or "?" for r in results)
    return ", ".join(f"{n} {o}" for o, n in outcomes.most_common()) + " (" + ", ".join(f"{n} {v}" for v, n in verdicts.most_common()) + ")"


def _logged(command: list[str], log: Any, **kwargs: Any) -> int:
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False, **kwargs).returncode


def run_one(kit: dict[str, Any], run: dict[str, Any], out: Path, device: str, pytest_args: list[str]) -> tuple[bool, str]:
    """Install the run's wheels, check the box, run the cases as the run's cell: (left a run file, one line)."""
    cell = f"system-{device}-{run['label']}"
    run_file, log_path, spec = out / "runs" / f"{cell}.json", out / "logs" / f"{cell}.log", out / "spec" / f"{cell}.json"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"bugmatrix-kit-{run['label']}-") as target, log_path.open("w", encoding="utf-8") as log:
        if _logged([sys.executable, *PIP, "--find-links", str(KIT / "wheels"), "--target", target, *run["install"]], log):
            return False, f"{cell}: pip could not install the kit's wheels offline; see {log_path}"
        problems = unmet(Path(target), run)
        if problems:
            log.write("refused: " + "; ".join(problems) + "\n")
            more = f" (and {len(problems) - 1} more in {log_path})" if len(problems) > 1 else ""
            return False, f"{cell}: refused: {problems[0]}{more}; install it in the image, or leave this version out"
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        origin = {"date": now, "commit": kit["made"]["commit"], "run": f"local {socket.gethostname()} (GPU kit)"}
        options = CellOptions(cell, str(run_file), axis_spec=run["axis_spec"], origin=origin, cell_deadline_s=kit.get("cell_deadline_s"))
        write_text_atomic(spec, json.dumps(options.to_json(), indent=1) + "\n")
        path = os.pathsep.join(filter(None, [target, str(KIT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "0"}  # as the runner gives a cell (bugmatrix/run/command.py)
        code = _logged([sys.executable, *PYTEST, "--bugmatrix-spec", str(spec), *pytest_args], log, cwd=KIT, env=env)
    # 0: every outcome as expected; 1: some differ (recorded, for the report to read); anything else stopped the cell.
    if code not in (0, 1) or not run_file.is_file():
        return False, f"{cell}: pytest exited {code} without a run file; see {log_path}"
    return True, f"{cell}: {summary(run_file)} -> {run_file}"


def main(argv: list[str] | None = None) -> int:
    """Check the box, describe it, then each run in turn; one line per run."""
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=KIT / "results", help="where runs/, logs/ and environment.txt go (default %(default)s)")
    parser.add_argument("--only", default="", help="only these runs, by label (pl2.0.3,pl2.0.7); default: every run packed for this Python")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (-k EXPR narrows every run)")
    args = parser.parse_args(argv)
    try:
        kit, runs = check_box(KIT)
        only = {label.strip() for label in args.only.split(",") if label.strip()}
        unknown = only - {r["label"] for r in runs}
        if unknown:
            msg = f"--only {args.only}: no run {sorted(unknown)[0]} for this Python; the kit has {', '.join(r['label'] for r in runs)}"
            raise Refused(msg)
        device, stack = describe_box(args.out, kit)
    except Refused as exc:
        print(f"run.py: error: {exc}", file=sys.stderr)
        return 2
    chosen = [r for r in runs if not only or r["label"] in only]
    print(f"box: {stack}; {len(chosen)} run(s): {', '.join(r['label'] for r in chosen)} -> {args.out}", flush=True)
    done = [run_one(kit, r, args.out, device, args.pytest_args) for r in chosen]
    for ok, line in done:
        print(line if ok else f"run.py: {line}", file=sys.stdout if ok else sys.stderr)
    return 0 if all(ok for ok, _ in done) else 1


if __name__ == "__main__":
    sys.exit(main())
