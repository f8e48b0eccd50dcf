"""Tests inject faults at chosen points; none races a sleep against a thread or a process, none times itself.

A sleep in a test is a guess at how long something else takes: under load (four
agents on two cores) the guess fails and the test with it, or it passes without
having tested anything. Faults come from a hook, an event or a planted variant
instead (the planted variants' own sleeps *are* the hang under test and live in
tests/fixtures/planted). Speed is the benchmark's to measure (``nox -s
benchmark``), never a wall-clock assertion here.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.glob("*.py") if p.name != "__init__.py")


def _calls(node: ast.AST, names: set[str]) -> list[ast.Call]:
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in names:
                found.append(call)
    return found


def test_no_test_sleeps() -> None:
    """No ``sleep(...)`` in a test module: a fault is injected where the test chooses, not after a guessed delay."""
    offenders = [f"{path.name}:{call.lineno}" for path in _test_modules() for call in _calls(ast.parse(path.read_text()), {"sleep"})]
    assert offenders == [], f"sleeps in tests (inject the fault with a hook, an event or a planted variant): {offenders}"


def test_no_wall_clock_assertions() -> None:
    """No assertion reads a clock: timings belong in the benchmark session, which prints them as ratios."""
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in _test_modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert) and _calls(node, CLOCKS)
    ]
    assert offenders == [], f"wall-clock assertions in tests (measure in the benchmark instead): {offenders}"


def test_the_checks_can_fail() -> None:
    """The two scans find what they look for (a check that cannot fail is a defect)."""
    racy = ast.parse("import time\ntime.sleep(0.2)\nstart = time.monotonic()\nassert time.monotonic() - start < 45\n")
    assert len(_calls(racy, {"sleep"})) == 1
    assert [n for n in ast.walk(racy) if isinstance(n, ast.Assert) and _calls(n, CLOCKS)]
