"""autocast cache: a ``no_grad`` forward poisons the next grad forward in the same region.

Symptom (seed 000): with mixed precision and manual optimization in Lightning,
``manual_backward`` fails with ``RuntimeError: element 0 of tensors does not
require grad and does not have a grad_fn``.

Mechanism: inside an autocast region, casts of leaf fp32 weights that require
grad are cached for the region's lifetime. A forward under ``torch.no_grad()``
fills the cache with casts that have no autograd history; the grad-enabled
forward that follows in the *same* region reuses them, so the output has no
``grad_fn``. Leaving the region clears the cache, hence the workarounds.

Upstream: pytorch/pytorch#65766, #112583, #158232; first attempt PR #113685
(closed), fix PR #165068 ("always create cached tensors with grad enabled").
Lightning-AI/pytorch-lightning#17949, #19810 (manual optimization + autocast),
#20644, fixed on Lightning's side by PR #20921 (its AMP plugin enters autocast
with ``cache_enabled=False``; narrowed later by PR #21616), so the Lightning
variant is also fixed by a new enough Lightning on an affected torch.
Boundaries found by running ``nox -s bisect`` (reports/bisect/).
"""

from __future__ import annotations

import torch

from bugmatrix import CPU_BF16, CUDA_FP16, Case, Checks, Expect, Signature
from bugmatrix.cell.checks import grads_finite, lightning, precision_for, quiet_trainer, tiny_loader

case = Case(
    id="autocast_cache",
    title="no_grad forward inside autocast breaks the next backward",
    seed="000",
    signature=Signature(r"element 0 of tensors does not require grad and does not have a grad_fn"),
    evidence=(
        "https://github.com/pytorch/pytorch/issues/65766",
        "https://github.com/pytorch/pytorch/issues/112583",
        "https://github.com/pytorch/pytorch/issues/158232",
        "https://github.com/pytorch/pytorch/pull/165068",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/17949",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/19810",
        "https://github.com/Lightning-AI/pytorch-lightning/pull/20921",
    ),
)

BOUNDARY = "bisect (reports/bisect/autocast_cache-core-cpu--torch.json): first fixed torch 2.11.0; pytorch/pytorch#165068"
PL_BOUNDARY = (
    "bisect (reports/bisect/autocast_cache-lightning_manual_optimization-cpu--lightning.json): "
    "first fixed Lightning 2.5.5 at torch 2.5.1; Lightning PR #20921 (autocast cache_enabled=False)"
)
EXPECT_TORCH = (
    Expect("reproduced", torch="<2.11", evidence=BOUNDARY),
    Expect("fixed", torch=">=2.11", evidence=BOUNDARY),
)
EXPECT_LIGHTNING = (
    Expect("fixed", torch=">=2.11", evidence=BOUNDARY),
    Expect("fixed", lightning=">=2.5.5", evidence=PL_BOUNDARY),
    Expect("reproduced", torch="<2.11", lightning="<2.5.5", evidence=f"{BOUNDARY}; {PL_BOUNDARY}"),
)
ALWAYS_FIXED = (Expect("fixed", evidence="seed 000 workaround; leaves no stale cast in the cache"),)


def _model_and_input(device: str) -> tuple[torch.nn.Module, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)
    return model, torch.randn(4, 8, device=device)


def _backward(model: torch.nn.Module, out: torch.Tensor) -> Checks:
    out.float().sum().backward()
    return {"every parameter got a finite grad": grads_finite(model)}


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=EXPECT_TORCH)
def core(device: str, dtype: torch.dtype) -> Checks:
    """no_grad forward, then grad forward, in one autocast region."""
    model, x = _model_and_input(device)
    with torch.autocast(device, dtype=dtype):
        with torch.no_grad():
            model(x)
        out = model(x)
    return _backward(model, out)


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=ALWAYS_FIXED, workaround_for="core")
def fresh_autocast(device: str, dtype: torch.dtype) -> Checks:
    """Seed workaround 2: the grad forward gets an autocast region of its own."""
    model, x = _model_and_input(device)
    with torch.autocast(device, dtype=dtype), torch.no_grad():
        model(x)
    with torch.autocast(device, dtype=dtype):
        out = model(x)
    return _backward(model, out)


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=ALWAYS_FIXED, workaround_for="core")
def no_autocast_in_no_grad(device: str, dtype: torch.dtype) -> Checks:
    """Seed workaround 1: disable autocast for the no_grad block."""
    model, x = _model_and_input(device)
    with torch.autocast(device, dtype=dtype):
        with torch.no_grad(), torch.autocast(device, enabled=False):
            model(x)
        out = model(x)
    return _backward(model, out)


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=ALWAYS_FIXED, workaround_for="core")
def cache_disabled(device: str, dtype: torch.dtype) -> Checks:
    """``torch.autocast(..., cache_enabled=False)``: nothing is cached to go stale."""
    model, x = _model_and_input(device)
    with torch.autocast(device, dtype=dtype, cache_enabled=False):
        with torch.no_grad():
            model(x)
        out = model(x)
    return _backward(model, out)


@case.variant(devices=(CUDA_FP16, CPU_BF16), axes=("torch", "lightning"), expect=EXPECT_LIGHTNING, kind="framework")
def lightning_manual_optimization(device: str, dtype: torch.dtype) -> Checks:
    """The seed's setup: Lightning manual optimization, a no_grad forward before the grad one."""
    pl = lightning()

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.net, _ = _model_and_input("cpu")
            self.grads_ok: list[bool] = []

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
            opt = self.optimizers()
            with torch.no_grad():  # e.g. a target or an EMA pass
                self.net(batch[0])
            loss = self.net(batch[0]).float().pow(2).mean()
            opt.zero_grad()
            self.manual_backward(loss)
            self.grads_ok.append(grads_finite(self.net))
            opt.step()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    module = Module()
    quiet_trainer(device, precision=precision_for(dtype)).fit(module, tiny_loader(torch.randn(4, 8)))
    return {"every step gave finite grads to every parameter": bool(module.grads_ok) and all(module.grads_ok)}
