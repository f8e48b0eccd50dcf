"""``python -m bugmatrix check``: each catalogue policy, on fixture catalogues written here (never the live one).

A case that keeps every policy gives no line; each missing piece gives one
line naming the case file and what to add, and exit 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bugmatrix.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"

GOOD = """
from bugmatrix import CPU_BF16, Case, Expect, Signature, Source

case = Case(
    id="good", title="t", signature=Signature("x"), axes=("torch",),
    source=Source("A post", date="2025-05-05"), evidence=("https://github.com/o/r/issues/1",),
)
BOUNDARY = "bisect (reports/bisect/good-core-cpu--torch.json); o/r PR #2"
EXPECT = (Expect("reproduced", torch="<2.3", evidence=BOUNDARY), Expect("fixed", torch=">=2.3", evidence=BOUNDARY))


@case.variant(devices=(CPU_BF16,), expect=EXPECT)
def core(device, dtype):
    return {}


@case.variant(devices=(CPU_BF16,), expect=EXPECT, kind="upstream", counterpart="core")
def upstream_test(device, dtype):
    return {}
"""

BARE = """
from bugmatrix import CPU_BF16, CUDA_FP16, Case, Expect, Signature

case = Case(id="bare", title="t", signature=Signature("x"), axes=("torch",))


@case.variant(devices=(CPU_BF16,))
def core(device, dtype):
    return {}


@case.variant(devices=(CPU_BF16,), expect=(Expect("fixed", torch="<2.0", evidence="bisect (reports/bisect/gone.json)"), Expect("reproduced")))
def other(device, dtype):
    return {}


@case.variant(devices=(CUDA_FP16,), kind="upstream", counterpart="core")
def upstream_test(device, dtype):
    return {}
"""


def project(tmp_path: Path, *cases: tuple[str, str], rows: tuple[str, ...] = ("good",)) -> Path:
    """A checkout: tiny.toml, the cases, both case tables (with ``rows``) and the one bisect file GOOD cites."""
    root = tmp_path / "project"
    (root / "cases").mkdir(parents=True)
    (root / "reports" / "bisect").mkdir(parents=True)
    (root / "reports" / "bisect" / "good-core-cpu--torch.json").write_text("{}")
    shutil.copy(FIXTURES / "matrix" / "tiny.toml", root / "matrix.toml")
    for name, source in cases:
        (root / "cases" / f"{name}.py").write_text(source)
    (root / "docs").mkdir()
    (root / "docs" / "cases.md").write_text("| case |\n|---|\n" + "".join(f"| `{r}` | x |\n" for r in rows))
    (root / "cases" / "README.md").write_text("| module |\n|---|\n" + "".join(f"| `{r}.py` | x |\n" for r in rows))
    return root


def check(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str]]:
    code = main(["--matrix", str(root / "matrix.toml"), "--cases", str(root / "cases"), "check", *extra])
    out = capsys.readouterr().out.splitlines()
    return code, [line.removeprefix("bugmatrix: check: ") for line in out if line.startswith("bugmatrix: check: ")]


def test_a_case_that_keeps_every_policy_gives_no_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(project(tmp_path, ("good", GOOD)), capsys) == (0, [])


def test_each_missing_piece_is_one_line_naming_the_case_and_what_to_add(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = check(project(tmp_path, ("good", GOOD), ("bare", BARE)), capsys)
    assert code == 1
    assert lines == [
        'cases/bare.py: cites no source document; add source=Source("<title>", date="YYYY-MM-DD", link="https://...") to Case(...)',
        'cases/bare.py: cites no upstream evidence; add evidence=("https://github.com/<org>/<repo>/issues/<n>", ...) to Case(...)',
        "cases/bare.py: upstream variant bare::upstream_test[cuda] has no counterpart 'core' of the case's own on cuda; "
        "name a non-upstream variant declared for cuda in counterpart=",
        "cases/bare.py: bare::core[cpu] expects nothing (every result is 'new'); "
        'add expect=(Expect("reproduced", <axis>="<spec>", evidence=...), ...)',
        "cases/bare.py: bare::other[cpu] cites reports/bisect/gone.json, which is not in the repository; "
        "publish the bisect result there (nox -s bisect -- ... --publish) or correct the path",
        "cases/bare.py: bare::other[cpu] expects reproduced (everywhere) without evidence; "
        'say where it comes from: Expect(..., evidence="bisect (reports/bisect/<file>.json); upstream PR #<n>")',
        "cases/bare.py: profile smoke has no CPU cell where a variant is expected fixed; "
        "list versions where it is fixed in [profiles.smoke] of matrix.toml",
        "cases/bare.py: profile smoke shows none of bare::other[cpu] on both sides of its boundary; "
        "list versions either side of it in [profiles.smoke] of matrix.toml",
        "cases/bare.py: docs/cases.md has no row for bare; add one to its table of cases (see docs/cases.md, How to add a case)",
        "cases/bare.py: cases/README.md has no row for bare; add one to its table of cases (see docs/cases.md, How to add a case)",
    ]


def test_a_policy_can_be_checked_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = check(project(tmp_path, ("bare", BARE), rows=()), capsys, "--policy", "tables")
    assert code == 1 and [line.split(": ", 1)[1][:24] for line in lines] == ["docs/cases.md has no row", "cases/README.md has no r"]


def test_the_default_profile_is_the_first_declared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The boundary policy reads the matrix's default profile, whatever its name: a first profile with torch 2.3.1 only never reproduces."""
    root = project(tmp_path, ("good", GOOD))
    matrix = root / "matrix.toml"
    matrix.write_text(matrix.read_text().replace("[profiles.smoke]", '[profiles.quick]\ntorch = ["2.3.1"]\n\n[profiles.smoke]', 1))
    code, lines = check(root, capsys)
    assert code == 1 and lines[0].startswith("cases/good.py: profile quick has no CPU cell where a variant is expected reproduced")


GPU = """
from bugmatrix import CPU_BF16, CUDA_FP16, Case, Expect, Signature, observed

case = Case(id="gpu", title="t", signature=Signature("x"), axes=("torch",))
RUN = "reports/runs/system-cuda-x.json"


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=(Expect("fixed", device="cpu", evidence="b"), *observed("fixed", device="cuda", evidence=RUN, torch="2.3.1")))
def kept(device, dtype):
    return {}


@case.variant(devices=(CUDA_FP16,), expect=(Expect("fixed", evidence="b"), Expect("reproduced", device="cuda", torch="<2.3", evidence=RUN)))
def inferred(device, dtype):
    return {}
"""


def test_a_gpu_expectation_comes_from_a_committed_run_at_its_releases_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43: a device-agnostic expectation, or a CUDA one over a range, claims what no GPU run observed."""
    root = project(tmp_path, ("gpu", GPU))
    (root / "reports" / "runs").mkdir()
    (root / "reports" / "runs" / "system-cuda-x.json").write_text("{}")
    _, lines = check(root, capsys, "--policy", "expectation")
    assert lines == [
        "cases/gpu.py: gpu::inferred[cuda] expects fixed (everywhere) on every device: nothing run on cuda is its evidence; "
        'limit it with device="cpu", and declare cuda ones from a committed run: '
        '*observed("fixed", device="cuda", evidence="reports/runs/<file>.json", <axis>="<release>")',
        "cases/gpu.py: gpu::inferred[cuda] expects reproduced (torch<2.3) beyond what a committed run on cuda observed; "
        'declare the releases a run file in reports/runs/ holds: *observed("reproduced", device="cuda", '
        'evidence="reports/runs/<file>.json", <axis>="<release>")',
    ]
