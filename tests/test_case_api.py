"""How a case declares itself: Expect, Variant.expectation, Case.variant, and discover agreeing with import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from packaging.specifiers import SpecifierSet

from bugmatrix.cell.case import CPU_BF16, CUDA_FP16, Case, CaseError, Expect, Requires, Source
from bugmatrix.cell.outcomes import Outcome, Signature, Verdict, judge
from bugmatrix.errors import BugmatrixError
from bugmatrix.plan.catalog import load_catalog

CASES = Path(__file__).resolve().parent.parent / "cases"
GRAD = Signature(r"element 0 of tensors does not require grad")


@pytest.mark.parametrize(
    ("installed", "covered"),
    [
        ("2.5.1", True),
        ("2.10.0+cu124", True),  # a CUDA wheel is its release
        ("2.10.0+cpu", True),
        ("2.11.0", False),
        ("2.11.0+cu128", False),  # the local tag does not lift it past the boundary
        ("2.9", True),
    ],
)
def test_expect_compares_base_versions(installed: str, covered: bool) -> None:
    """Specifiers compare versions with the local tag dropped (as Lightning's RunIf does), never strings."""
    assert Expect("reproduced", torch="<2.11").covers({"torch": installed}, "cpu") is covered


@pytest.mark.parametrize("installed", ["2.11.0rc1", "2.11.0.dev20250101+cu128"])
def test_a_prerelease_counts_as_its_release(installed: str) -> None:
    """A release candidate or nightly of 2.11 is judged as 2.11 (base versions, as RunIf): expected fixed, not "new"."""
    assert Expect("fixed", torch=">=2.11").covers({"torch": installed}, "cpu")
    assert not Expect("reproduced", torch="<2.11").covers({"torch": installed}, "cpu")


def test_expect_device_filter() -> None:
    """A device-limited expectation says nothing about the other device."""
    cpu_only = Expect("fixed", torch=">=2.6", device="cpu")
    assert cpu_only.covers({"torch": "2.6.0"}, "cpu")
    assert not cpu_only.covers({"torch": "2.6.0"}, "cuda")
    assert Expect("fixed", torch=">=2.6").covers({"torch": "2.6.0"}, "cuda"), "no device: every device"


def test_expect_multi_axis_needs_every_axis() -> None:
    """Every named axis must hold, and an axis that is not installed is not covered."""
    both = Expect("reproduced", torch="<2.11", lightning="<2.5.5")
    assert both.covers({"torch": "2.5.1", "lightning": "2.0.3"}, "cpu")
    assert not both.covers({"torch": "2.5.1", "lightning": "2.5.5"}, "cpu")
    assert not both.covers({"torch": "2.11.0", "lightning": "2.0.3"}, "cpu")
    assert not both.covers({"torch": "2.5.1"}, "cpu"), "lightning absent: not covered"


def test_expect_without_condition_covers_everything() -> None:
    """``Expect("reproduced")`` is "in every version" (e.g. a guard that never went away)."""
    assert Expect("reproduced").covers({}, "cuda")
    assert Expect("reproduced").outcome is Outcome.REPRODUCED


def test_expect_rejects_a_bad_specifier() -> None:
    """A typo in a boundary fails at import, naming the axis and the text (the grammar Requires shares)."""
    with pytest.raises(CaseError, match=r"Expect\('fixed'\): torch='2\.x' is not a version specifier; write e\.g\. torch=\">=2\.1\""):
        Expect("fixed", torch="2.x")
    with pytest.raises(CaseError, match=r"Requires\(\): lightning='2\.x' is not a version specifier"):
        Requires(lightning="2.x")


def test_expect_rejects_an_unknown_outcome() -> None:
    """Only documented outcomes can be expected."""
    with pytest.raises(ValueError, match="'fixd'"):
        Expect("fixd", torch="<2")


def _case() -> Case:
    case = Case(id="demo", title="demo", signature=GRAD, axes=("torch",))

    @case.variant(
        devices=(CUDA_FP16, CPU_BF16),
        axes=("torch", "lightning"),
        expect=(
            Expect("fixed", torch=">=2.11"),
            Expect("fixed", lightning=">=2.5.5"),
            Expect("reproduced", torch="<2.11", lightning="<2.5.5"),
            Expect("different", device="cuda"),
        ),
    )
    def core(device: str, dtype: object) -> dict[str, bool]:
        """The core program.

        More story here.
        """
        return {"ok": True}

    @case.variant(devices=(CPU_BF16,), workaround_for="core", requires=Requires(torch=">=2.3"))
    def workaround(device: str, dtype: object) -> dict[str, bool]:
        return {"ok": True}

    @case.variant(devices=(CPU_BF16,), kind="framework")
    def framework(device: str, dtype: object) -> dict[str, bool]:
        return {"ok": True}

    return case


@pytest.mark.parametrize(
    ("versions", "outcome"),
    [
        ({"torch": "2.11.0", "lightning": "2.0.3"}, Outcome.FIXED),  # first entry
        ({"torch": "2.5.1", "lightning": "2.5.5"}, Outcome.FIXED),  # second entry
        ({"torch": "2.5.1", "lightning": "2.0.3"}, Outcome.REPRODUCED),  # third entry
        ({"torch": "2.11.0", "lightning": "2.6.6"}, Outcome.FIXED),  # first and second: first wins
    ],
)
def test_expectation_is_first_match(versions: dict[str, str], outcome: Outcome) -> None:
    """Expectations are read top to bottom; the first that covers the versions applies."""
    found = _case().variants[1].expectation(versions)
    assert found is not None and found.outcome is outcome


def test_expectation_uses_the_variant_device() -> None:
    """The catch-all for cuda only applies to the cuda variant."""
    cuda, cpu = _case().variants[:2]
    versions = {"torch": "2.5.1", "lightning": "2.0.3"}
    assert cuda.expectation(versions).outcome is Outcome.REPRODUCED  # type: ignore[union-attr]
    assert cuda.expectation({"torch": "2.5.1"}).outcome is Outcome.DIFFERENT  # type: ignore[union-attr]
    assert cpu.expectation({"torch": "2.5.1"}) is None


def test_no_expectation_is_new() -> None:
    """Where nothing covers the environment the outcome is recorded and flagged "new", not judged."""
    variant = _case().variants[1]
    expectation = variant.expectation({"torch": "2.5.1"})  # lightning missing: nothing covers it
    assert expectation is None
    assert judge(Outcome.REPRODUCED, None) is Verdict.NEW


def test_variant_registers_once_per_device() -> None:
    """One body, one Variant per declared (device, dtype), with stable ids."""
    variants = _case().variants
    assert [v.id for v in variants] == [
        "demo::core[cuda]",
        "demo::core[cpu]",
        "demo::workaround[cpu]",
        "demo::framework[cpu]",
    ]
    cuda, cpu = variants[:2]
    assert (cuda.device, cuda.dtype, cpu.device, cpu.dtype) == ("cuda", "float16", "cpu", "bfloat16")
    assert cuda.fn is cpu.fn and cpu.axes == ("torch", "lightning")
    assert cpu.doc == "The core program.", "the first docstring line, for the report"


def test_variant_kind_and_requirements() -> None:
    """kind defaults to core, is workaround where workaround_for is set, and can be declared."""
    core, _, workaround, framework = (v for v in _case().variants)
    assert (core.kind, workaround.kind, framework.kind) == ("core", "workaround", "framework")
    assert workaround.workaround_for == "core" and workaround.requires.versions == {"torch": SpecifierSet(">=2.3")}
    assert workaround.axes == ("torch",), "the case's axes are its variants' default"
    assert workaround.doc == ""


def test_decorator_returns_the_function() -> None:
    """The decorated function stays callable as written (cases reuse bodies)."""
    case = Case(id="demo", title="demo", signature=GRAD)

    def body(device: str, dtype: object) -> dict[str, bool]:
        return {"ran on " + device: True}

    assert case.variant(devices=(CPU_BF16,))(body) is body
    assert case.variants[0].fn("cpu", None) == {"ran on cpu": True}


PLANTED_CONSTANTS = """
from bugmatrix import Case, Signature

GPU_HALF = ("cuda", "float16")  # a name that does not say CUDA in capitals the old reader looked for
CPU_ANALOG = ("cpu", "bfloat16")
DEVICES = (GPU_HALF, CPU_ANALOG)
AXES = ("torch", "lightning")
case = Case(id="constants", title="t", signature=Signature("x"))


@case.variant(devices=DEVICES, axes=AXES)
def v(device, dtype):
    return {"ok": True}
"""


def _write_case(tmp_path: Path, name: str, source: str) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir(exist_ok=True)
    (cases / f"{name}.py").write_text(source)
    return cases


def test_module_level_constants_are_read_as_pytest_reads_them(tmp_path: Path) -> None:
    """DEVICES/AXES constants and a GPU_HALF-style name: the device is what the declaration says, not what its text looks like."""
    (cuda, cpu) = load_catalog(_write_case(tmp_path, "constants", PLANTED_CONSTANTS)).variants
    assert (cuda.id, cuda.device, cuda.dtype) == ("constants::v[cuda]", "cuda", "float16")
    assert (cpu.id, cpu.device, cpu.dtype) == ("constants::v[cpu]", "cpu", "bfloat16")
    assert cuda.axes == cpu.axes == ("torch", "lightning")


def test_the_loader_needs_no_torch(tmp_path: Path) -> None:
    """nox's interpreter has no torch: the real cases load there, and torch is not left half-imported."""
    code = (
        "import sys; sys.modules['torch'] = None\n"  # as if not installed: `import torch` raises
        "import importlib.abc\n"
        "from pathlib import Path\n"
        "from bugmatrix.plan.catalog import load_catalog\n"
        f"print(len(load_catalog(Path({str(CASES)!r})).variants))\n"
    )
    # A sys.modules None entry makes imports fail; the loader's finder is asked only where no module is found at all,
    # so run in a fresh interpreter whose path has no torch instead.
    done = subprocess.run(
        [sys.executable, "-S", "-c", code.replace("sys.modules['torch'] = None", "sys.path[:] = [p for p in sys.path if 'site-packages' not in p] + [" + repr(_packaging_dir()) + "]")],
        capture_output=True, text=True, env={"PYTHONPATH": str(CASES.parent)}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) >= 35


def _packaging_dir() -> str:
    import packaging

    return str(Path(packaging.__file__).resolve().parent.parent)


def test_two_dtypes_on_one_device_get_distinct_ids() -> None:
    """(cpu, bfloat16) and (cpu, float16): two results, two ids, never one silently lost."""
    case = Case(id="demo", title="demo", signature=GRAD)
    case.variant(devices=(CPU_BF16, ("cpu", "float16"), CUDA_FP16))(lambda device, dtype: {})
    assert [v.id for v in case.variants] == ["demo::<lambda>[cpu-bfloat16]", "demo::<lambda>[cpu-float16]", "demo::<lambda>[cuda]"]


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ((CPU_BF16, CPU_BF16), r"declares \('cpu', 'bfloat16'\) twice; list each"),
        ((("gpu", "float16"),), r"device 'gpu' is unknown"),
        ((("cpu", "half"),), r"dtype 'half' is not a dtype name"),
        ((), r"declares no devices"),
    ],
)
def test_bad_declarations_fail_at_import_in_one_line(devices: tuple, message: str) -> None:
    """A declaration the harness could not record faithfully is refused where it is written, naming case and variant."""
    case = Case(id="demo", title="demo", signature=GRAD)

    def v(device: str, dtype: object) -> dict[str, bool]:
        return {}

    with pytest.raises(CaseError, match="case 'demo', variant 'v': " + message):
        case.variant(devices=devices)(v)


def test_a_variant_name_declared_twice_is_refused() -> None:
    case = Case(id="demo", title="demo", signature=GRAD)
    case.variant(devices=(CPU_BF16,))(_body)
    with pytest.raises(CaseError, match="variant '_body': is declared twice"):
        case.variant(devices=(CUDA_FP16,))(_body)


def _body(device: str, dtype: object) -> dict[str, bool]:
    return {}


def test_case_id_must_be_the_file_name(tmp_path: Path) -> None:
    """A crash record only knows the file: the case id must be the file's name."""
    cases = _write_case(tmp_path, "other_name", PLANTED_CONSTANTS)
    with pytest.raises(BugmatrixError, match=r"Case\(id='constants'\) must equal the file name 'other_name'"):
        load_catalog(cases)


def test_the_catalog_agrees_with_pytest(case_modules: dict[str, ModuleType]) -> None:
    """The planner's catalog and pytest's import of the real cases register the same variants."""
    catalog = {(v.id, v.axes, v.device, v.dtype) for v in load_catalog(CASES).variants}
    imported = {
        (v.id, v.axes, v.device, v.dtype)
        for m in case_modules.values()
        for c in vars(m).values()
        if isinstance(c, Case)
        for v in c.variants
    }
    assert catalog == imported


def test_an_upstream_variant_names_its_counterpart() -> None:
    """``kind="upstream"`` variants carry the case variant they should agree with; others carry None."""
    case = Case(id="c", title="t", signature=GRAD)

    @case.variant(devices=(CPU_BF16,))
    def core(device: str, dtype: object) -> dict[str, bool]:
        return {"ok": True}

    @case.variant(devices=(CUDA_FP16, CPU_BF16), kind="upstream", counterpart="core")
    def upstream_test(device: str, dtype: object) -> dict[str, bool]:
        return {"ok": True}

    assert [(v.name, v.kind, v.counterpart) for v in case.variants] == [
        ("core", "core", None),
        ("upstream_test", "upstream", "core"),
        ("upstream_test", "upstream", "core"),
    ]


@pytest.mark.parametrize(
    ("requires", "installed", "reasons"),
    [
        (Requires(lightning=">=2.1"), {"lightning": "2.0.3"}, ["needs lightning>=2.1 (installed 2.0.3)"]),
        (Requires(lightning=">=2.1"), {"lightning": "2.1.4+local"}, []),
        (Requires(torch=">=2.3", numpy="<2"), {"torch": "2.5.1", "numpy": "2.2.6"}, ["needs numpy<2 (installed 2.2.6)"]),
        (Requires(accelerate=">=1"), {}, ["needs accelerate>=1 (not installed here)"]),
        (Requires(api="torch.amp.GradScaler"), {"torch": "2.0.1"}, []),  # the api is checked where it can be imported
    ],
)
def test_requires_takes_any_axis_and_names_the_installed_version(requires: Requires, installed: dict, reasons: list) -> None:
    """``Requires(<axis>=<specifier>)`` in Expect's grammar; each unmet need says what is installed (issue 24 item 3)."""
    assert requires.unmet(installed) == reasons


def test_a_case_cites_its_source_by_title_date_and_link() -> None:
    """A Source is a citation anyone can follow; a path, a non-date or an empty title is refused in one line."""
    source = Source("PyTorch Lightning中混合精度训练与梯度计算的陷阱分析", date="2025-05-05", note="Chinese blog post; no link known")
    assert source.cite() == '"PyTorch Lightning中混合精度训练与梯度计算的陷阱分析" (2025-05-05)'
    assert Source("t", link="https://example.org/post").cite() == '"t", https://example.org/post'
    with pytest.raises(CaseError, match=r"Source\(link='\.\./shared/seeds/000\.txt'\) is not a web address"):
        Source("t", link="../shared/seeds/000.txt")
    with pytest.raises(CaseError, match=r"Source\(date='May 2025'\) is not a date; write it as YYYY-MM-DD"):
        Source("t", date="May 2025")
    with pytest.raises(CaseError, match=r"Source\(title=\.\.\.\) is empty"):
        Source(" ")


def test_a_seed_outside_the_repository_is_refused() -> None:
    """``seed="000"`` pointed at ../shared/seeds/, which no clone has; ``seed="none"`` was accepted silently (issue 23)."""
    for seed in ("000", "none"):
        with pytest.raises(CaseError, match=rf"case 'demo': seed='{seed}' points outside the repository; cite the document as source="):
            Case(id="demo", title="demo", signature=GRAD, seed=seed)
    with pytest.raises(CaseError, match=r"source='blog' is not a Source"):
        Case(id="demo", title="demo", signature=GRAD, source="blog")  # type: ignore[arg-type]


def test_the_case_axes_are_the_default_and_a_variant_may_span_none() -> None:
    """``Case(axes=...)`` is what a variant spans unless it says; with neither, it spans no axis (it runs in every cell)."""
    case = Case(id="demo", title="demo", signature=GRAD, axes=("torch",))
    case.variant(devices=(CPU_BF16,))(_body)
    case.variant(devices=(CPU_BF16,), axes=("torch", "lightning"))(_other)
    assert [v.axes for v in case.variants] == [("torch",), ("torch", "lightning")]
    bare = Case(id="bare", title="bare", signature=GRAD)
    bare.variant(devices=(CPU_BF16,))(_body)
    assert bare.variants[0].axes == ()
    with pytest.raises(CaseError, match=r"axes=\['torch'\] is not a tuple of axis names"):
        Case(id="demo", title="demo", signature=GRAD, axes=["torch"])  # type: ignore[arg-type]


def _other(device: str, dtype: object) -> dict[str, bool]:
    return {}
