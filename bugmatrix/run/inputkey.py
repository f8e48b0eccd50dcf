"""A cell's input key: everything its results depend on, hashed, so a later night can tell whether anything moved. Its
parts, kept in the run file, say *what* changed: the lock (versions reach the key only through it), the case files, the
harness (``bugmatrix/cell/**`` and what it imports, pytest's settings), platform, python, gpu."""

from __future__ import annotations

import ast
import functools
import json
import platform
import shutil
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bugmatrix.cell.ids import VariantId
from bugmatrix.documents.run import InputKey
from bugmatrix.files import digest_of, file_digest

__all__ = ["KEY_SCHEMA", "InputKey", "case_files", "differences", "harness_files", "input_key"]

KEY_SCHEMA = "bugmatrix.key/1"
PACKAGE = "bugmatrix"
#: Where pytest's settings live; only that table is part of the key (a ruff setting changes no outcome).
PYTEST_SETTINGS = "pyproject.toml [tool.pytest.ini_options]"
PROBE = (
    "import platform; print(platform.python_implementation(), platform.python_version(),"
    " '(' + ', '.join(platform.python_build()) + ')', platform.python_compiler())"
)


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # a submodule imported by name
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def harness_files(root: Path) -> list[Path]:
    """``bugmatrix/cell/**``, the ``bugmatrix`` modules they import (and their packages), ``conftest.py``."""
    todo = [*sorted((root / PACKAGE / "cell").rglob("*.py")), root / "conftest.py", root / PACKAGE / "__init__.py"]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        for module in _imported_modules(path):
            parts = module.split(".")  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
            for depth in range(1, len(parts) + 1):
                base = root.joinpath(*parts[:depth])
                todo += [base.with_suffix(".py"), base / "__init__.py"]
    return sorted(seen)


def _pytest_settings(root: Path) -> str:
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return "none"
    settings = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("pytest", {}).get("ini_options", {})
    return digest_of(json.dumps(settings, sort_keys=True).encode())


def case_files(root: Path, variants: Iterable[str]) -> list[Path]:
    """The case files the variants come from, plus shared ``cases/_*.py`` helpers; no variants named: every case file."""
    cases = root / "cases"
    named = sorted({VariantId.parse(v).case for v in variants})
    files = [cases / f"{case}.py" for case in named] if named else sorted(cases.glob("[!_]*.py"))
    return [*files, *sorted(cases.glob("_*.py"))]


def _probe(command: list[str], name: str) -> tuple[str, str | None]:
    """(stdout, None), or ("", ``unknown (...)``): a failed probe never matches a key."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"unknown ({name}: {type(exc).__name__})"
    return (done.stdout, None) if done.returncode == 0 else ("", f"unknown ({name} exited {done.returncode})")


@functools.cache
def _interpreter_build(interpreter: str) -> str:
    """``CPython 3.11.7 (main, Dec  4 2023 18:10:11) GCC 12.2.0`` (cached per path: a probe costs a process)."""
    out, failed = _probe([interpreter, "-c", PROBE], interpreter)
    return failed or out.strip()


def _gpu_description() -> str:
    """The GPUs and driver (``nvidia-smi``), ``none`` where there is no ``nvidia-smi``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "none"
    out, failed = _probe([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], "nvidia-smi")
    return failed or "; ".join(line.strip() for line in out.splitlines() if line.strip()) or "none"


def _host_platform() -> str:
    """``Linux-x86_64 glibc 2.39`` (not the kernel: CI images update it weekly)."""
    libc = " ".join(part for part in platform.libc_ver() if part)
    return f"{platform.system()}-{platform.machine()}" + (f" {libc}" if libc else "")


def input_key(
    root: Path, lock: Path, variants: Sequence[str], interpreter: str, *, providers: Mapping[str, Any] | None = None, gpu: str | None = None
) -> InputKey:
    """The key of a cell installed from ``lock``, running ``variants`` on ``interpreter`` (a path) on this machine."""
    parts = {
        "schema": KEY_SCHEMA,
        "lock": file_digest(lock),
        "cases": {p.relative_to(root).as_posix(): file_digest(p) for p in case_files(root, variants) if p.is_file()},
        "harness": {
            **{p.relative_to(root).as_posix(): file_digest(p) for p in harness_files(root)},
            PYTEST_SETTINGS: _pytest_settings(root),
        },
        "platform": _host_platform(),
        "python": _interpreter_build(interpreter),
        "gpu": gpu if gpu is not None else _gpu_description(),
        "providers": json.loads(json.dumps(providers or {})),  # tuples as lists: the form it has once read back
    }
    return InputKey(digest_of(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()), parts)


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What changed between two keys' parts, in words: ``case file cases/x.py changed``, ``python CPython 3.11.7 → 3.11.9``."""
    if before.get("schema") != after.get("schema"):
        return [f"the key's schema changed ({before.get('schema')} → {after.get('schema')})"]
    lines = ["lock changed"] if before.get("lock") != after.get("lock") else []
    for kind, part in (("case file", "cases"), ("harness", "harness")):
        old, new = before.get(part) or {}, after.get(part) or {}
        changed = sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))
        lines += [f"{kind} {name} {'removed' if name not in new else 'added' if name not in old else 'changed'}" for name in changed]
    if before.get("providers") != after.get("providers"):
        lines.append("the distributions or modules providing the axes changed (matrix.toml)")
    return lines + [
        f"{part} {before.get(part)} → {after.get(part)}" for part in ("platform", "python", "gpu") if before.get(part) != after.get(part)
    ]
