"""autocast cache: a ``no_grad`` forward poisons the next grad forward in the same region.

Symptom (the source post): with mixed precision and manual optimization in Lightning,
``manual_backward`` fails with ``RuntimeError: element 0 of tensors does not
require grad and does not have a grad_fn``.

Mechanism: inside an autocast region, casts of leaf fp32 weights that require
grad are cached for the region's lifetime. A forward under ``torch.no_grad()``
fills the cache with casts that have no autograd history; the grad-enabled
forward that follows in the *same* region reuses them, so the output has no
``grad_fn``. Leaving the region clears the cache, hence the workarounds.

Citations, and what each is evidence of:

* pytorch/pytorch#65766 (open) and #112583 (open): this failure, reported in
  plain torch; #112583's snippet runs as ``upstream_issue112583`` and agrees
  with ``core`` (reproduced in torch 2.10.0, fixed in 2.11.0). The workaround
  suggested on #65766 (``torch.clear_autocast_cache()`` before the grad pass)
  runs as ``upstream_issue65766_workaround``: fixed in torch 2.0.1, 2.10.0 and
  2.11.0, like ``fresh_autocast``.
* pytorch/pytorch#158232: the issue that PR #165068 says it fixes.
  PR #113685 (closed, not merged) was a first attempt.
* pytorch/pytorch PR #165068 ("always create cached tensors with grad
  enabled"): the fix, first released in torch 2.11.0. Established by running
  the test the PR added (``upstream_pr165068_test``) against the released
  wheels: it fails in 2.10.0 and passes in 2.11.0, the same boundary bisect
  found for ``core``. (The pytorch repository is too big to fetch here, so
  there is no ``git tag --contains`` for it.)
* Lightning-AI/pytorch-lightning#17949 and #19810 (closed, 2.0.x): the source post's
  failure under Lightning manual optimization. #20644 is cited by the source post;
  not read here.
* Lightning PR #20921: Lightning's AMP plugin enters autocast with
  ``cache_enabled=False``, which masks the bug on an affected torch. First in
  Lightning 2.5.5 (``git tag --contains``: cherry-pick 2fe67a7724 in 2.5.5,
  216f9ec90c in 2.6.0); its own test runs as ``upstream_lightning_pr20921_test``
  and agrees with ``lightning_manual_optimization`` at torch 2.10.0
  (Lightning 2.0.3 and 2.5.4 reproduced, 2.5.5 and 2.6.6 fixed). PR #21616
  later narrows it (cache on again, cleared when a nested ``no_grad`` exits);
  it is in no release up to 2.6.6 (absent from the 2.6.6 wheel).

Boundaries found by running ``nox -s bisect`` (reports/bisect/). On a GPU
(an NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130, 2026-11-27; the run files
``reports/runs/system-cuda-h200*.json``) every CUDA variant read ``fixed``
with pytorch-lightning 2.0.3, 2.0.6, 2.0.7 and Lightning 2.6.6, as on CPU at
torch 2.11.0: the fix is not device-specific there. Their CUDA expectations
name those runs and hold at those releases only (``observed``); the CPU
boundaries stay ``device="cpu"``: no GPU ran an affected torch yet.
"""

from __future__ import annotations

import torch

from bugmatrix import CPU_BF16, CUDA_FP16, Case, Checks, Expect, Signature, Source, observed
from bugmatrix.cell.checks import grads_finite, lightning, precision_for, quiet_trainer, tiny_loader

case = Case(
    id="autocast_cache",
    title="no_grad forward inside autocast breaks the next backward",
    source=Source("PyTorch Lightning中混合精度训练与梯度计算的陷阱分析", date="2025-05-05", note="Chinese blog post; no link known"),
    axes=("torch",),  # what a variant spans unless it says otherwise
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
    # torch imports torch._dynamo lazily at a variant's first optimizer step (seconds, and it sets TORCHINDUCTOR_CACHE_DIR):
    # the cell process imports it once, before its variants are forked, instead of every variant paying for it.
    imports=("torch._dynamo",),
)

BOUNDARY = (
    "bisect (reports/bisect/autocast_cache-core-cpu--torch.json): first fixed torch 2.11.0; pytorch/pytorch#165068 "
    "fixed it, its own test fails in the 2.10.0 wheel and passes in 2.11.0"
)
PL_BOUNDARY = (
    "bisect (reports/bisect/autocast_cache-lightning_manual_optimization-cpu--lightning.json): "
    "first fixed Lightning 2.5.5 at torch 2.5.1; Lightning PR #20921 (autocast cache_enabled=False), first in tag 2.5.5"
)
#: The GPU runs: what each CUDA expectation rests on (and the releases it covers: nothing between them is inferred).
H200 = (
    "GPU runs on an NVIDIA H200 (CUDA 13.0, torch 2.11.0+cu130), 2026-11-27: reports/runs/system-cuda-h200.json (Lightning 2.6.6), "
    "reports/runs/system-cuda-h200-pl2.0.3.json, reports/runs/system-cuda-h200-pl2.0.6.json, reports/runs/system-cuda-h200-pl2.0.7.json"
)
PL_ON_H200 = ("2.0.3", "2.0.6", "2.0.7", "2.6.6")
EXPECT_TORCH = (
    Expect("reproduced", torch="<2.11", device="cpu", evidence=BOUNDARY),
    Expect("fixed", torch=">=2.11", device="cpu", evidence=BOUNDARY),
    *observed("fixed", device="cuda", evidence=H200, torch="2.11.0"),
)
EXPECT_LIGHTNING = (
    Expect("fixed", torch=">=2.11", device="cpu", evidence=BOUNDARY),
    Expect("fixed", lightning=">=2.5.5", device="cpu", evidence=PL_BOUNDARY),
    Expect("reproduced", torch="<2.11", lightning="<2.5.5", device="cpu", evidence=f"{BOUNDARY}; {PL_BOUNDARY}"),
    *observed("fixed", device="cuda", evidence=H200, torch="2.11.0", lightning=PL_ON_H200),
)
ALWAYS_FIXED = (
    Expect("fixed", device="cpu", evidence="the source post's workaround; leaves no stale cast in the cache"),
    *observed("fixed", device="cuda", evidence=H200, torch="2.11.0"),
)


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
    """The source post's workaround 2: the grad forward gets an autocast region of its own."""
    model, x = _model_and_input(device)
    with torch.autocast(device, dtype=dtype), torch.no_grad():
        model(x)
    with torch.autocast(device, dtype=dtype):
        out = model(x)
    return _backward(model, out)


@case.variant(devices=(CUDA_FP16, CPU_BF16), expect=ALWAYS_FIXED, workaround_for="core")
def no_autocast_in_no_grad(device: str, dtype: torch.dtype) -> Checks:
    """The source post's workaround 1: disable autocast for the no_grad block."""
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
    """The source post's setup: Lightning manual optimization, a no_grad forward before the grad one."""
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


# --- Upstream's own reproductions and regression tests, as variants -------------------------------
# Each runs upstream code as faithfully as a tiny CPU/CUDA program allows; the comment names the
# source and every change. Their outcomes are compared with the counterpart's, cell by cell
# (bugmatrix/report/agreement.py): they check this case's reading of its citations.


@case.variant(devices=(CUDA_FP16, CPU_BF16), kind="upstream", counterpart="core", expect=EXPECT_TORCH)
def upstream_pr165068_test(device: str, dtype: torch.dtype) -> Checks:
    """The regression test added with the fix, pytorch/pytorch PR #165068, as a variant."""
    # Source: pytorch/pytorch test/test_autocast.py, TestTorchAutocastDevice.test_autocast_nograd_caching_issue_158232,
    # added by PR #165068 (read from the cyyever/pytorch mirror of pytorch/pytorch, commit 24114cae17b2).
    # Changes: (1) `dtype` is the declared one, not torch.get_autocast_dtype(device_type=device) (absent
    # before torch 2.4; it gives the same fp16 on CUDA, bf16 on CPU); (2) each self.assert* becomes a named
    # check instead of stopping the test, so on an affected torch the test's own `loss.backward()` still
    # runs and raises what it raises there; (3) the test class's device instantiation becomes our two
    # declared devices. Everything else (Linear(2, 2), randn(8, 2), the order of the passes) is upstream's.
    model = torch.nn.Linear(2, 2).to(device)
    inp = torch.randn(8, 2, device=device)
    checks: dict[str, bool] = {}
    with torch.autocast(device, dtype=dtype, enabled=True):
        # First forward pass in no_grad context (e.g., shape inference)
        with torch.no_grad():
            out1 = model(inp)
            checks["Output in no_grad should not require grad"] = not out1.requires_grad
        # Second forward pass with gradients enabled (e.g., training)
        out2 = model(inp)
        checks["Output should require gradients after exiting no_grad"] = out2.requires_grad
        checks["Output should have grad_fn after exiting no_grad"] = out2.grad_fn is not None
        # Backward pass should work
        loss = out2.mean()
        loss.backward()
    # Verify gradients were computed
    checks["model.weight.grad is not None"] = model.weight.grad is not None
    checks["model.bias.grad is not None"] = model.bias.grad is not None
    return checks


@case.variant(devices=(CUDA_FP16, CPU_BF16), kind="upstream", counterpart="core", expect=EXPECT_TORCH)
def upstream_issue112583(device: str, dtype: torch.dtype) -> Checks:
    """The snippet of pytorch/pytorch#112583 ("Nesting no_grad in autocast causes backwards graph to be (partially) lost")."""
    # Source: the issue's description (haydn-jones, 2023-11-01), its first two blocks ("Just linear" and
    # "Linear -> LayerNorm"). Changes: (1) `.cuda()` / torch.cuda.amp.autocast() become `.to(device)` /
    # torch.autocast(device, dtype) for our two devices; (2) the issue prints `grad_fn` and states what it
    # sees in comments ("# None", "# LayerNormBackward"); here each print is a named check, and a backward
    # is added after each block (the issue stops at the print) so that the lost graph shows as the case's
    # error or as a missing gradient; (3) the blocks without autocast (the issue's controls) are left out.
    l1 = torch.nn.Sequential(torch.nn.Linear(2, 2)).to(device)
    l2 = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2)).to(device)
    x = torch.randn(2, 2, device=device)
    # Just linear
    with torch.autocast(device, dtype=dtype):
        with torch.no_grad():
            l1(x)
        y1_2 = l1(x)
    checks = {"y1_2.grad_fn is not None (issue: None)": y1_2.grad_fn is not None}
    y1_2.float().sum().backward()
    # Linear -> LayerNorm makes output have grad_fn, but the Linear is cut off the graph
    with torch.autocast(device, dtype=dtype):
        with torch.no_grad():
            l2(x)
        y2_2 = l2(x)
    y2_2.float().sum().backward()
    checks["the Linear before the LayerNorm got a grad (the graph was not partially lost)"] = l2[0].weight.grad is not None
    return checks


@case.variant(
    devices=(CUDA_FP16, CPU_BF16),
    axes=("torch", "lightning"),
    kind="upstream",
    counterpart="lightning_manual_optimization",
    expect=EXPECT_LIGHTNING,
)
def upstream_lightning_pr20921_test(device: str, dtype: torch.dtype) -> Checks:
    """The regression test added with Lightning PR #20921 (AMP plugin autocast with ``cache_enabled=False``)."""
    # Source: Lightning-AI/pytorch-lightning tests/tests_pytorch/plugins/precision/test_amp.py::test_amp_with_no_grad
    # as added by PR #20921 (commit 216f9ec90c; cherry-picked as 2fe67a7724, first in tag 2.5.5). Changes:
    # (1) before Lightning 2.1 the plugin is called MixedPrecisionPlugin (same (precision, device) arguments);
    # (2) the plugin's precision and device are the declared ones (upstream: "bf16-mixed", "cpu" only), the
    # layer and input are moved to that device; (3) the final `assert loss.grad_fn is not None` is a named
    # check, plus one more (the layer got finite grads). PR #21616 (not in any release up to 2.6.6, checked
    # in the 2.6.6 wheel) later rewrote this test to use `forward_context()`; this is the #20921 version.
    pl = lightning()
    mixed_precision = getattr(pl.plugins, "MixedPrecision", None) or pl.plugins.MixedPrecisionPlugin
    layer = torch.nn.Linear(2, 1).to(device)
    x = torch.randn(1, 2, device=device)
    amp = mixed_precision(precision=precision_for(dtype), device=device)

    with amp.autocast_context_manager():
        with torch.no_grad():
            _ = layer(x)

        loss = layer(x).mean()
        loss.backward()
        checks = {"loss.grad_fn is not None": loss.grad_fn is not None}
    checks["the layer got finite grads"] = grads_finite(layer)
    return checks


@case.variant(
    devices=(CUDA_FP16, CPU_BF16),
    kind="upstream",
    counterpart="fresh_autocast",
    expect=(
        Expect("fixed", device="cpu", evidence="pytorch/pytorch#65766 (ptrblck's workaround); run fixed in torch 2.0.1, 2.10.0, 2.11.0"),
        *observed("fixed", device="cuda", evidence=H200, torch="2.11.0"),
    ),
)
def upstream_issue65766_workaround(device: str, dtype: torch.dtype) -> Checks:
    """The workaround suggested in pytorch/pytorch#65766: clear the autocast cache before the grad-enabled pass."""

    # Source: ptrblck's comment on the issue (2021-10-01), class RecycledLinear. Changes: (1) the issue shows
    # only the module; here it is run as the issue's use case needs, under torch.autocast(device, dtype) with
    # the declared device/dtype and no_cycles=3, on a randn(4, 10) input; (2) a backward and a positive check
    # are added (every parameter got a finite grad). The module is upstream's (Linear(10, 10), the loop,
    # torch.clear_autocast_cache() when grad is enabled), type hints added.
    class RecycledLinear(torch.nn.Module):
        def __init__(self, no_cycles: int) -> None:
            super().__init__()

            self.no_cycles = no_cycles
            self.linear = torch.nn.Linear(10, 10)

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            out = inp
            # Run the model no_cycles times, enabling grad only on the last iteration
            for i in range(self.no_cycles):
                with torch.set_grad_enabled(i == (self.no_cycles - 1)):
                    if torch.is_grad_enabled():
                        torch.clear_autocast_cache()
                    out = self.linear(out)

            return out

    model = RecycledLinear(3).to(device)
    with torch.autocast(device, dtype=dtype):
        out = model(torch.randn(4, 10, device=device))
    out.float().sum().backward()
    return {"every parameter got a finite grad": grads_finite(model)}
