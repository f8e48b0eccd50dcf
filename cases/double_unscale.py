"""Double ``unscale_``: GradScaler refuses a second unscale, and fp16 parameters.

Symptom (the source post): ``RuntimeError: unscale_() has already been called on this
optimizer since the last update().`` when user code unscales for gradient
clipping and a framework unscales again before ``step``/``update``; and its
sibling ``ValueError: Attempting to unscale FP16 gradients.`` when the
*parameters* themselves are fp16 under a scaler.

Mechanism: ``GradScaler`` keeps a per-optimizer stage (READY -> UNSCALED ->
STEPPED); ``unscale_`` in stage UNSCALED raises, because dividing twice would
silently shrink the gradients. ``_unscale_grads_`` is called with
``allow_fp16=False``: fp16 master weights lose the small updates the scaler is
there to protect, so it refuses them. Both are guards working as designed, so
the core variants are expected to reproduce in every release and the
workarounds to hold in every release.

Ground truth for the guard is torch's own documented contract, not a test:
no upstream regression test of the guard was found. The docstring of
``GradScaler.unscale_`` (``torch/amp/grad_scaler.py``; the same warning text in
the 2.5.1, 2.6.0, 2.10.0, 2.11.0 and 2.15.0 wheels) gives a "Simple example"
(unscale, clip, step, update) and warns that "Calling unscale_ twice for a
given optimizer between each step triggers a RuntimeError". Both run as
``upstream`` variants (counterparts ``unscale_once`` and ``unscale_twice``)
and agree with them in torch 2.5.1 and 2.10.0.

Citations, and what each is evidence of:

* Lightning-AI/pytorch-lightning#4148 and huggingface/transformers#24449 /
  PR #24415: cited by the source post as callers that unscaled twice; this project
  could not read them (no stored copy), so they are the source post's reading, not
  checked here.
* Lightning PR #9606 ("Fix location of unscale in mixed precision plugin",
  first in Lightning 1.4.9 by ``git tag --contains``) is *not* a fix of this
  guard: it fixed #9599, #9330, #9205, #9694 (Lightning clipped and tracked
  grad norms before unscaling) by moving Lightning's own ``unscale_`` to right
  after backward. That move is why a user's ``unscale_`` in
  ``on_before_optimizer_step`` is the second one (``lightning_user_unscale``).
  Its test (``test_correct_native_grad_unscaling``) needs Lightning 1.4 APIs
  (``NativeMixedPrecisionPlugin.post_backward``, ``amp_backend``) absent from
  every Lightning this matrix runs (>= 2.0.3), so it is not a variant.

CPU analog: ``torch.amp.GradScaler("cpu")``, where that API exists.

On a GPU (an NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130, 2026-11-27; the run
files ``reports/runs/system-cuda-h200*.json``) the CUDA variants read as their
CPU twins do: both guards raise (``unscale_twice``, ``fp16_parameters``,
``upstream_unscale_docstring_warning``), the workarounds and the documented
example hold, and ``lightning_user_unscale`` (CUDA only: ``16-mixed`` needs a
GPU scaler) reproduces with pytorch-lightning 2.0.3, 2.0.6, 2.0.7 and
Lightning 2.6.6. The CUDA expectations name those runs and hold at those
releases only (``observed``); the guard is by design, but no GPU ran another
torch yet.
"""

from __future__ import annotations

import torch

from bugmatrix import CPU_FP16, CUDA_FP16, Case, Checks, Expect, Signature, SkipVariant, Source, observed
from bugmatrix.cell.checks import grads_finite, lightning, quiet_trainer, tiny_loader

case = Case(
    id="double_unscale",
    title="GradScaler.unscale_ twice before update, and fp16 parameters under a scaler",
    source=Source(
        "PyTorch 自动混合精度AMP Grad Scaler 源码解析:_unscale_grads_ 与 unscale_ 函数", note="Chinese blog post, undated; no link known"
    ),
    axes=("torch",),  # what a variant spans unless it says otherwise
    signature=Signature(
        r"unscale_\(\) has already been called on this optimizer since the last update\(\)",
        r"Attempting to unscale FP16 gradients",
    ),
    evidence=(
        "https://github.com/Lightning-AI/pytorch-lightning/issues/4148",
        "https://github.com/Lightning-AI/pytorch-lightning/pull/9606",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/9599",
        "https://github.com/huggingface/transformers/issues/24449",
        "https://github.com/huggingface/transformers/pull/24415",
    ),
    # torch imports torch._dynamo lazily at a variant's first optimizer step (seconds, and it sets TORCHINDUCTOR_CACHE_DIR):
    # the cell process imports it once, before its variants are forked, instead of every variant paying for it.
    imports=("torch._dynamo",),
)

# The scaler is an fp16 tool; on CPU the analog scales fp32 grads of an fp16-autocast model.
GUARD = (
    "bisect (reports/bisect/double_unscale-unscale_twice-cpu--torch.json): no change over torch 2.3.0..2.15.0 "
    "(the CPU scaler's first release to the newest); a guard by design"
)
#: The GPU runs: what each CUDA expectation rests on (and the releases it covers: nothing between them is inferred).
H200 = (
    "GPU runs on an NVIDIA H200 (CUDA 13.0, torch 2.11.0+cu130), 2026-11-27: reports/runs/system-cuda-h200.json (Lightning 2.6.6), "
    "reports/runs/system-cuda-h200-pl2.0.3.json, reports/runs/system-cuda-h200-pl2.0.6.json, reports/runs/system-cuda-h200-pl2.0.7.json"
)
ALWAYS_REPRODUCED = (
    Expect("reproduced", device="cpu", evidence=GUARD),
    *observed("reproduced", device="cuda", evidence=H200, torch="2.11.0"),
)
ALWAYS_FIXED = (
    Expect("fixed", device="cpu", evidence="the source post: unscale once per step; keep fp32 master weights"),
    *observed("fixed", device="cuda", evidence=H200, torch="2.11.0"),
)


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


@case.variant(
    devices=(CUDA_FP16,),
    axes=("torch", "lightning"),
    kind="framework",
    expect=observed("reproduced", device="cuda", evidence=H200, torch="2.11.0", lightning=("2.0.3", "2.0.6", "2.0.7", "2.6.6")),
)
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


# --- Upstream's documented contract, as variants -------------------------------------------------
# The guards have no upstream regression test of their own that this suite could find (Lightning PR
# #9606 and transformers PR #24415 fixed callers, not the guard), so the ground truth here is the
# contract torch documents in the docstring of GradScaler.unscale_ (torch/amp/grad_scaler.py, read in
# the torch 2.15.0 wheel): its "Simple example" and its warning that "Calling unscale_ twice for a
# given optimizer between each step triggers a RuntimeError."


def _docstring_setup(device: str, dtype: torch.dtype) -> tuple:
    """The "..." before the docstring's example: a tiny model, optimizer, scaler and a scaled loss."""
    model = torch.nn.Linear(8, 4).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = _scaler(device)
    with torch.autocast(device, dtype=dtype):
        loss = model(torch.randn(4, 8, device=device)).float().pow(2).mean()
    return model, optimizer, scaler, loss


@case.variant(devices=(CUDA_FP16, CPU_FP16), kind="upstream", counterpart="unscale_once", expect=ALWAYS_FIXED)
def upstream_unscale_docstring_example(device: str, dtype: torch.dtype) -> Checks:
    """``GradScaler.unscale_``'s documented example (unscale, clip, step, update) holds."""
    # Source: the "Simple example, using unscale_ to enable clipping of unscaled gradients" in the
    # docstring of torch.amp.GradScaler.unscale_. Changes: its "..." is _docstring_setup; max_norm = 1.0;
    # the scaler is torch.amp.GradScaler(device) (torch.cuda.amp.GradScaler before torch 2.3; skipped on
    # CPU there); positive checks added (finite unscaled grads, the step moved the weights).
    model, optimizer, scaler, loss = _docstring_setup(device, dtype)
    max_norm = 1.0
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return _step(model, optimizer, scaler)


@case.variant(devices=(CUDA_FP16, CPU_FP16), kind="upstream", counterpart="unscale_twice", expect=ALWAYS_REPRODUCED)
def upstream_unscale_docstring_warning(device: str, dtype: torch.dtype) -> Checks:
    """The documented example with the second ``unscale_`` its warning forbids: the documented RuntimeError."""
    # Source: as upstream_unscale_docstring_example, plus the docstring's warning (".. warning:: unscale_
    # should only be called once per optimizer per step call ... Calling unscale_ twice for a given
    # optimizer between each step triggers a RuntimeError."). Change: a second scaler.unscale_(optimizer)
    # after the clip, the one thing the warning describes; nothing else differs from the example.
    model, optimizer, scaler, loss = _docstring_setup(device, dtype)
    max_norm = 1.0
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.unscale_(optimizer)
    return _step(model, optimizer, scaler)
