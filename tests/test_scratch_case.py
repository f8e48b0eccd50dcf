"""Adding a case changes no harness test's result (issue 44): a clone with scratch cases runs the tests that plan.

A newcomer's fifth case once failed ``tests/test_reuse.py`` (``StopIteration``),
two tests of ``tests/test_slices.py`` and the sixth-case acceptance test,
because they planned from the live ``cases/`` folder. Here the project is
copied, two scratch cases are added the way docs/cases.md says (one file each;
nothing else edited, smoke's committed choice not recomputed), and the harness
tests that plan run in the copy: each must pass there as it does here.

* ``scratch_shared`` spans torch x Lightning, the axes the three torch cases
  span: it joins their cells, so those cells' variant lists and input keys change;
* ``scratch_own`` spans torch x transformers with a release of its own
  (``Case(versions=...)``), a slice no other case has.

No environment is built: these tests plan, key, price and report from files.
About 3 minutes on this project's 2-core machine (-n 2), nearly all of it the
copied tests themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # a copy of the project and minutes of its tests (like the sixth-case test, which so leaves it out)

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns(".git", ".nox", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".venv", "repro-out", "ci-reports")

#: The harness tests that plan (cells, keys, costs, smoke's choice, bisect's range) or read the catalogue to do so.
PLANNING = (
    "tests/test_plan.py",
    "tests/test_slices.py",
    "tests/test_reuse.py",
    "tests/test_case_versions.py",
    "tests/test_case_cost.py",
    "tests/test_matrix.py",
    "tests/test_inputkey.py",
    "tests/test_command_line.py",
    "tests/test_expectation.py",
    "tests/test_axis_isolation.py",
    "tests/test_bisect_logic.py",
    "tests/test_benchmark_stability.py",
)

SCRATCH = {
    "scratch_shared": ("torch", "lightning"),
    "scratch_own": ("torch", "transformers"),
}


def scratch_case(case_id: str, axes: tuple[str, ...]) -> str:
    """A case file as a newcomer writes it: a story, a signature, a variant per device, expectations, a workaround."""
    own = ', versions={"transformers": ("4.51.3",)}' if "transformers" in axes else ""
    return f'''"""A scratch case: added by tests/test_scratch_case.py to a copy of the project, never run."""

from __future__ import annotations

from bugmatrix import CPU_BF16, CUDA_FP16, Case, Expect, Signature, Source

case = Case(
    id="{case_id}",
    title="a scratch case",
    source=Source("a scratch document", note="made up by a test"),
    evidence=("https://example.invalid/scratch",),
    signature=Signature(r"scratch failure"),
    axes={axes!r}{own},
)


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=(Expect("reproduced", torch="<2.11"), Expect("fixed", torch=">=2.11")))
def core(device, dtype):
    raise RuntimeError("scratch failure")


@case.variant(devices=(CPU_BF16,), workaround_for="core", expect=(Expect("fixed"),))
def workaround(device, dtype):
    return {{"it ran": True}}
'''


def test_the_planning_tests_pass_in_a_clone_with_two_new_cases(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=IGNORE)
    for case_id, axes in SCRATCH.items():
        (clone / "cases" / f"{case_id}.py").write_text(scratch_case(case_id, axes), encoding="utf-8")
    # The copy's own conftest chooses its registry cache and resolution, as a fresh checkout's would.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUGMATRIX_")} | {"PYTHONPATH": str(clone)}
    listed = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "plan", "--profile", "nightly", "--variants"],
        cwd=clone, env=env | {"BUGMATRIX_RESOLUTION": str(clone / "tests" / "fixtures" / "resolution.json")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "scratch_shared::core[cpu]" in listed.stdout and "tf4.51.3" in listed.stdout, "the scratch cases are planned there"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *PLANNING, "-m", "not e2e and not browser", "-p", "no:cacheprovider", "-q", "-n", "2", "-rf"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    failed = sorted(set(re.findall(r"^FAILED (\S+?)(?: - |$)", run.stdout, flags=re.M)))
    assert run.returncode == 0 and not failed, f"planning tests that changed with a new case: {failed}\n{run.stdout[-4000:]}"
