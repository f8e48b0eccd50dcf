"""TransformerEncoder bf16 eval: the fused fast path ignores autocast and mixes dtypes.

Symptom (seed 004): Lightning ``precision="bf16-mixed"`` trains fine, then
validation fails with ``RuntimeError: mat1 and mat2 must have the same dtype,
but got BFloat16 and Float``. Training mode is unaffected.

Mechanism: in ``eval()`` under ``no_grad`` the encoder layers take a fused
"fast path" (``torch._transformer_encoder_layer_fwd``) that reads the fp32
weights directly. The guard that should leave the fast path under autocast
only asked about CUDA autocast, so CPU bf16 autocast fed bf16 activations
into fp32 weights. torch 2.0/2.1 word the same failure ``expected scalar type
BFloat16 but found Float``. With a ``src_key_padding_mask`` the encoder first
packs the batch into a nested tensor, and that path still mixes dtypes in the
newest torch we run (reported upstream as pytorch/pytorch#107663).

Upstream: pytorch/pytorch#132613 (and #82783, #107663),
Lightning-AI/pytorch-lightning#19980. Boundaries by ``nox -s bisect``.
"""

from __future__ import annotations

import torch

from bugmatrix import CPU_BF16, CUDA_BF16, Case, Checks, Expect, Requires, Signature
from bugmatrix.cell.checks import finite, lightning, quiet_trainer, tiny_loader

case = Case(
    id="encoder_bf16_eval",
    title="TransformerEncoder eval fast path under bf16 autocast: dtype mismatch",
    seed="004",
    signature=Signature(
        r"mat1 and mat2 must have the same dtype",
        r"expected scalar type (BFloat16|Half|Float) but found (Float|BFloat16|Half)",
    ),
    evidence=(
        "https://github.com/pytorch/pytorch/issues/132613",
        "https://github.com/pytorch/pytorch/issues/107663",
        "https://github.com/pytorch/pytorch/issues/82783",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/19980",
    ),
)

BOUNDARY = "bisect (reports/bisect/encoder_bf16_eval-core-cpu--torch.json): first fixed torch 2.6.0 on CPU; pytorch/pytorch#132613"
# CUDA expectations are not declared: no GPU run has recorded them yet, so a
# CUDA outcome is shown as "new" in the report instead of being guessed.
EXPECT_CPU = (
    Expect("reproduced", torch="<2.6", device="cpu", evidence=BOUNDARY),
    Expect("fixed", torch=">=2.6", device="cpu", evidence=BOUNDARY),
)


def _encoder(device: str) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2).to(device).eval()


def _eval_checks(encoder: torch.nn.Module, x: torch.Tensor, out: torch.Tensor, dtype: torch.dtype, **kwargs: object) -> Checks:
    with torch.no_grad():
        reference = encoder(x.float(), **kwargs)
    return {
        # The fused path returns bf16; the composite path ends in LayerNorm,
        # which autocast runs in fp32. Both are autocast's own, valid choices.
        f"output dtype is {dtype} or float32": out.dtype in (dtype, torch.float32),
        "output is finite": finite(out),
        "output matches the fp32 result (atol 0.1)": bool(torch.allclose(out.float(), reference, atol=0.1)),
    }


@case.variant(devices=(CUDA_BF16, CPU_BF16), expect=EXPECT_CPU)
def core(device: str, dtype: torch.dtype) -> Checks:
    """Encoder in eval mode, no_grad, bf16 autocast: the fast path runs."""
    encoder, x = _encoder(device), torch.randn(2, 5, 16, device=device)
    with torch.no_grad(), torch.autocast(device, dtype=dtype):
        out = encoder(x)
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=False):
        return _eval_checks(encoder, x, out, dtype)


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    expect=(
        Expect(
            "reproduced",
            device="cpu",
            evidence=(
                "bisect (reports/bisect/encoder_bf16_eval-padding_mask-cpu--torch.json): no change over torch 2.0.0..2.15.0, "
                "every nightly cell agrees; pytorch/pytorch#107663 (open)"
            ),
        ),
    ),
)
def padding_mask(device: str, dtype: torch.dtype) -> Checks:
    """Same, with a ``src_key_padding_mask``: the nested-tensor fast path."""
    encoder, x = _encoder(device), torch.randn(2, 5, 16, device=device)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    with torch.no_grad(), torch.autocast(device, dtype=dtype):
        out = encoder(x, src_key_padding_mask=mask)
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=False):
        checks = _eval_checks(encoder, x, out, dtype, src_key_padding_mask=mask)
    return checks


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    requires=Requires(api="torch.backends.mha.set_fastpath_enabled"),
    workaround_for="core",
    expect=(Expect("fixed", evidence="seed 004 workaround: no fast path, autocast applies to every matmul"),),
)
def fast_path_off(device: str, dtype: torch.dtype) -> Checks:
    """Workaround: ``torch.backends.mha.set_fastpath_enabled(False)`` around the eval."""
    encoder, x = _encoder(device), torch.randn(2, 5, 16, device=device)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), torch.autocast(device, dtype=dtype):
            out = encoder(x)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=False):
        return _eval_checks(encoder, x, out, dtype)


def _validate(device: str, precision: str) -> Checks:
    pl = lightning()

    class EncoderModule(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = _encoder("cpu")
            self.head = torch.nn.Linear(16, 1)
            self.dtypes: list[torch.dtype] = []

        def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            out = self.head(self.encoder(batch[0]))
            self.dtypes.append(out.dtype)
            loss = out.float().pow(2).mean()
            self.log("val_loss", loss)
            return loss

    module = EncoderModule()
    metrics = quiet_trainer(device, precision=precision).validate(module, tiny_loader(torch.randn(4, 5, 16)), verbose=False)
    loss = metrics[0]["val_loss"] if metrics else float("nan")
    return {
        "validation ran every batch in bf16": len(module.dtypes) == 2 and all(d == torch.bfloat16 for d in module.dtypes),
        "validation loss is finite": bool(torch.isfinite(torch.tensor(float(loss)))),
    }


@case.variant(devices=(CUDA_BF16, CPU_BF16), axes=("torch", "lightning"), kind="framework", expect=EXPECT_CPU)
def lightning_validate(device: str, dtype: torch.dtype) -> Checks:
    """The seed's setup: ``Trainer(precision="bf16-mixed").validate`` through the encoder."""
    return _validate(device, "bf16-mixed")


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    axes=("torch", "lightning"),
    # Trainer(precision="bf16-true") arrived in Lightning 2.1 (2.0.x rejects the flag).
    requires=Requires(min_lightning="2.1"),
    workaround_for="lightning_validate",
    expect=(Expect("fixed", evidence="seed 004 workaround: weights and inputs are both bf16"),),
)
def bf16_true(device: str, dtype: torch.dtype) -> Checks:
    """Seed workaround: ``precision="bf16-true"``, so weights and inputs share one dtype."""
    return _validate(device, "bf16-true")
