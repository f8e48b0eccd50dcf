"""``encoder_bf16_eval``'s checks compare real positions only: what the GPU showed, rebuilt on CPU.

On an H200, ``padding_mask[cuda]`` read ``different``: under CUDA bf16 autocast
the encoder stays off the nested-tensor fast path, while the fp32 reference
(no autocast) takes it and returns zeros at padded positions. On CPU the bf16
fast path raises first, so the same situation is built by hand here: the bf16
output with the fast path disabled, the fp32 reference with it enabled.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch", reason="the case's checks run the encoder")

CASE = Path(__file__).resolve().parent.parent / "cases" / "encoder_bf16_eval.py"


def _case() -> ModuleType:
    spec = importlib.util.spec_from_file_location("encoder_bf16_eval_under_test", CASE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _off_the_fast_path(case: ModuleType) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The case's encoder and padded batch; its bf16 output computed with the fast path disabled (CUDA autocast's path)."""
    torch.manual_seed(0)
    encoder, x = case._encoder("cpu"), torch.randn(2, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = encoder(x, src_key_padding_mask=mask)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    return encoder, x, out, mask


def test_the_old_check_reads_different_where_the_new_one_holds() -> None:
    """The fp32 reference takes the fast path (zeros at padded positions); a bf16 output off it agrees at every real one."""
    case = _case()
    encoder, x, out, mask = _off_the_fast_path(case)
    with torch.no_grad():
        reference = encoder(x.float(), src_key_padding_mask=mask)  # fast path on: what _eval_checks' reference does
    assert bool((reference[mask] == 0).all()), "the fast path's reference is zero at padded positions"
    assert not torch.allclose(out.float(), reference, atol=0.1), "the old check (every position) reads different here"
    assert torch.allclose(out.float()[~mask], reference[~mask], atol=0.1), "at real positions the two agree"
    with torch.no_grad():
        checks = case._eval_checks(encoder, x, out, torch.bfloat16, padding=mask)
    assert checks == dict.fromkeys(checks, True), checks


def test_the_new_check_still_fails_where_a_real_position_differs() -> None:
    """Comparing fewer positions is not comparing none: a real position off by 1.0 fails the check."""
    case = _case()
    encoder, x, out, mask = _off_the_fast_path(case)
    wrong = out.clone()
    wrong[1, 2] += 1.0  # the second row's last real position
    with torch.no_grad():
        checks = case._eval_checks(encoder, x, wrong, torch.bfloat16, padding=mask)
    assert not checks["output matches the fp32 result at real positions (atol 0.1)"]
