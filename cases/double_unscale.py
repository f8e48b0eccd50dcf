"""Double ``unscale_``: GradScaler refuses a second unscale, and fp16 parameters.

Symptom (seed 002): ``RuntimeError: unscale_() has already been called on this
optimizer since the last update().`` when user code unscales for gradient
clipping and a framework unscales again before ``step``/``update``; and its
sibling ``ValueError: Attempting to unscale FP16 gradients.`` when the
*parameters* themselves are fp16 under a scaler.

Mechanism: ``GradScaler`` keeps a per-optimizer stage (READY -> UNSCALED ->
STEPPED); ``unscale_`` in stage UNSCALED raises, because dividing twice would
silently shrink the gradients. ``_unscale_grads_`` is called with
``allow_fp16=False``: fp16 master weights lose the small updates the scaler is
there to protect, so it refuses them. Both are guards working as designed; the
bugs were in callers (Lightning #4148 fixed by PR #9606; transformers #24449
fixed by PR #24415), so the core variants are expected to reproduce in every
release and the workarounds to hold in every release.

CPU analog: ``torch.amp.GradScaler("cpu")``, where that API exists.
"""

from __future__ import annotations

import torch

from bugmatrix import CUDA_FP16, Case, Checks, Expect, Signature, SkipVariant
from bugmatrix.cell.checks import grads_finite, lightning, quiet_trainer, tiny_loader

case = Case(
    id="double_unscale",
    title="GradScaler.unscale_ twice before update, and fp16 parameters under a scaler",
    seed="002",
    signature=Signature(
        r"unscale_\(\) has already been called on this optimizer since the last update\(\)",
        r"Attempting to unscale FP16 gradients",
    ),
    evidence=(
        "https://github.com/Lightning-AI/pytorch-lightning/issues/4148",
        "https://github.com/Lightning-AI/pytorch-lightning/pull/9606",
        "https://github.com/huggingface/transformers/issues/24449",
        "https://github.com/huggingface/transformers/pull/24415",
    ),
)

# The scaler is an fp16 tool; on CPU the analog scales fp32 grads of an fp16-autocast model.
CPU_FP16 = ("cpu", "float16")
GUARD = (
    "bisect (reports/bisect/double_unscale-unscale_twice-cpu--torch.json): no change over torch 2.3.0..2.15.0 "
    "(the CPU scaler's first release to the newest); a guard by design"
)
ALWAYS_REPRODUCED = (Expect("reproduced", evidence=GUARD),)
ALWAYS_FIXED = (Expect("fixed", evidence="seed 002: unscale once per step; keep fp32 master weights"),)


def _scaler(device: str) -> torch.amp.GradScaler:
    """``torch.amp.GradScaler(device)``; before torch 2.3 only CUDA had one."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, init_scale=2.0**10)
    if device == "cuda":
        return torch.cuda.amp.GradScaler(init_scale=2.0**10)
    msg = f"torch.amp.GradScaler('cpu') is absent in torch {torch.__version__}"
    raise SkipVariant(msg)


def _scaled_backward(device: str, dtype: torch.dtype, param_dtype: torch.dtype = torch.float32) -> tuple:
    model = torch.nn.Linear(8, 4).to(device=device, dtype=param_dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = _scaler(device)
    x = torch.randn(4, 8, device=device, dtype=param_dtype)
    with torch.autocast(device, dtype=dtype):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    return model, optimizer, scaler


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> Checks:
    before = [p.detach().clone() for p in model.parameters()]
    grads_ok = grads_finite(model)
    scaler.step(optimizer)
    scaler.update()
    moved = any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    return {"grads finite after unscale": grads_ok, "the optimizer step changed the weights": moved}


@case.variant(devices=(CUDA_FP16, CPU_FP16), expect=ALWAYS_REPRODUCED)
def unscale_twice(device: str, dtype: torch.dtype) -> Checks:
    """User unscales for clipping, then something unscales again before ``step``."""
    model, optimizer, scaler = _scaled_backward(device, dtype)
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    return _step(model, optimizer, scaler)


@case.variant(devices=(CUDA_FP16, CPU_FP16), expect=ALWAYS_FIXED, workaround_for="unscale_twice")
def unscale_once(device: str, dtype: torch.dtype) -> Checks:
    """Workaround: one ``unscale_`` per optimizer per step, clip after it."""
    model, optimizer, scaler = _scaled_backward(device, dtype)
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return _step(model, optimizer, scaler)


@case.variant(devices=(CUDA_FP16, CPU_FP16), expect=ALWAYS_REPRODUCED)
def fp16_parameters(device: str, dtype: torch.dtype) -> Checks:
    """The sibling: the model itself is ``.half()`` under a scaler."""
    model, optimizer, scaler = _scaled_backward(device, dtype, param_dtype=torch.float16)
    scaler.unscale_(optimizer)
    return _step(model, optimizer, scaler)


@case.variant(devices=(CUDA_FP16, CPU_FP16), expect=ALWAYS_FIXED, workaround_for="fp16_parameters")
def fp32_master_weights(device: str, dtype: torch.dtype) -> Checks:
    """Workaround: fp32 parameters, fp16 only inside autocast."""
    model, optimizer, scaler = _scaled_backward(device, dtype)
    scaler.unscale_(optimizer)
    return _step(model, optimizer, scaler)


@case.variant(devices=(CUDA_FP16,), axes=("torch", "lightning"), kind="framework", expect=ALWAYS_REPRODUCED)
def lightning_user_unscale(device: str, dtype: torch.dtype) -> Checks:
    """Lightning ``16-mixed`` unscales before ``on_before_optimizer_step``; the user unscales again there."""
    pl = lightning()

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 1)
            self.grads_ok: list[bool] = []

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            return self.net(batch[0]).float().pow(2).mean()

        def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer, *args: object) -> None:
            self.trainer.precision_plugin.scaler.unscale_(optimizer)  # as in Lightning #4148
            self.grads_ok.append(grads_finite(self.net))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    module = Module()
    quiet_trainer(device, precision="16-mixed").fit(module, tiny_loader(torch.randn(4, 8)))
    return {"every step had finite, unscaled grads": bool(module.grads_ok) and all(module.grads_ok)}
