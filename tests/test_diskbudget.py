"""BUGMATRIX_DISK=lean: which cells may drop the torch cache, and what counts as the torch stack."""

from __future__ import annotations

import pytest

from bugmatrix.run.diskbudget import heavy_distributions, is_lean, needed_later

ORDER = [
    ("py310-torch2.14.1", ["torch==2.14.1", "lightning==2.6.6"]),
    ("py311-torch2.0.1", ["torch==2.0.1", "numpy<2"]),
    ("py311-torch2.14.1", ["torch==2.14.1", "transformers==4.57.6"]),
    ("py312-torch2.15.0", ["Torch==2.15.0"]),
]


@pytest.mark.parametrize(
    ("cell", "later"),
    [("py310-torch2.14.1", True), ("py311-torch2.0.1", False), ("py311-torch2.14.1", False), ("py312-torch2.15.0", False), ("nope", True)],
)
def test_the_cache_is_kept_while_a_later_cell_pins_the_same_heavy_release(cell: str, later: bool) -> None:
    """Compared by the heavy distributions' exact pins (a shared lightning pin does not keep torch's wheels)."""
    assert needed_later(ORDER, cell) is later


def test_the_torch_stack_is_torch_triton_and_the_cuda_libraries() -> None:
    names = [
        "torch",
        "nvidia_cublas_cu12",
        "nvidia-nccl-cu12",
        "triton",
        "numpy",
        "lightning",
        "torchmetrics",
        "cuda-bindings",
        "packaging",
    ]
    assert heavy_distributions(names) == ["cuda-bindings", "nvidia-cublas-cu12", "nvidia-nccl-cu12", "torch", "triton"]


@pytest.mark.parametrize(("value", "lean"), [("lean", True), (" LEAN ", True), ("", False), ("keep", False)])
def test_lean_is_opt_in(monkeypatch: pytest.MonkeyPatch, value: str, lean: bool) -> None:
    monkeypatch.setenv("BUGMATRIX_DISK", value)
    assert is_lean() is lean
