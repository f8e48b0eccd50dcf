"""TransformerEncoder bf16 eval: the fused fast path ignores autocast and mixes dtypes.

Symptom (the source post): Lightning ``precision="bf16-mixed"`` trains fine, then
validation fails with ``RuntimeError: mat1 and mat2 must have the same dtype,
but got BFloat16 and Float``. Training mode is unaffected.

Mechanism: in ``eval()`` under ``no_grad`` the encoder layers take a fused
"fast path" (``torch._transformer_encoder_layer_fwd``) that reads the fp32
weights directly. The guard that should leave the fast path under autocast
asks ``torch.is_autocast_enabled()`` with no device, which is CUDA's flag
(False under CPU autocast, checked in the 2.5.1, 2.6.0 and 2.15.0 wheels), so
CPU bf16 autocast fed bf16 activations into fp32 weights. torch 2.0/2.1 word
the same failure ``expected scalar type BFloat16 but found Float``.

Citations, and what each is evidence of:

* pytorch/pytorch#132613 (closed) and Lightning-AI/pytorch-lightning#19980
  (closed): the source post's failure, reported in plain torch and in Lightning.
  The issue's own snippet runs as ``upstream_issue132613`` and agrees with
  ``core``: reproduced in torch 2.5.1, fixed in 2.6.0 and 2.15.0. No fixing
  PR was identified: between the 2.5.1 and 2.6.0 wheels ``transformer.py``
  differs only in docstrings and ``_transformer_encoder_layer_fwd`` has no
  autocast kernel in either (``torch._C._dispatch_dump``), so the fix is in
  compiled code; the boundary (2.6.0) is from bisect and from running the
  issue's snippet, not from a PR date.
* pytorch/pytorch#107663 (open) builds its encoder with
  ``enable_nested_tensor=False`` (no nested tensor, a float padding mask,
  ``is_causal=True``). Its snippet runs as ``upstream_issue107663``: reproduced
  in torch 2.5.1, fixed in 2.6.0 and 2.15.0, like ``core``. So it is evidence
  for ``core``'s boundary, not for ``padding_mask`` (this case once cited it
  as "still open" for the nested-tensor path; against ``padding_mask`` it
  would differ in every cell from torch 2.6.0 on). PR #108178 ("Properly skip
  fast path ... if autocast is enabled on CPU", Fix #107663) is closed, and
  the guard above is unchanged in 2.15.0.
* pytorch/pytorch#82783 (closed): the same fast path under CUDA fp16 autocast
  in a single ``TransformerEncoderLayer``, fixed for CUDA by PR #84722
  (disable the fast path when autocast is enabled). Its snippet runs as
  ``upstream_issue82783``. Its CPU bf16 analog flips earlier than ``core``:
  reproduced in torch 2.0.0 and 2.0.1, fixed from 2.1.0 (bisect, see EXPECT_82783_CPU),
  while the two-layer ``TransformerEncoder`` of ``core`` fails until 2.5.1. A
  finding, not a wrong citation: the issue is about CUDA, and on a GPU (below)
  its snippet reads ``fixed`` at torch 2.11.0, as ``core[cuda]`` does.

``padding_mask`` is this project's own finding. With a
``src_key_padding_mask`` and the default ``enable_nested_tensor=True`` the
encoder first packs the batch into a nested tensor; on CPU under bf16
autocast that path raises ``expected scalar type Float but found BFloat16`` in
every torch from 2.0.0 to 2.15.0 (bisect, no change). Reproduction: the
``padding_mask`` variant, i.e. ``TransformerEncoder(TransformerEncoderLayer(16,
2, 32, batch_first=True), 2).eval()`` on ``randn(2, 5, 16)`` with the mask
``[[F]*5, [F]*3 + [T]*2]`` under ``no_grad`` and ``torch.autocast("cpu",
dtype=torch.bfloat16)``; ``nox -s repro -- "encoder_bf16_eval::padding_mask[cpu]"
--cell ...`` exports it for an upstream report. No upstream issue for this
path was found (a comment on #107663 warns of "another issue" once that one
is fixed, with a ``src_key_padding_mask`` traceback into the fast path; its
snippet could not be read from the stored copy).

What a GPU showed (an NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130, with
pytorch-lightning 2.0.3, 2.0.6, 2.0.7 and Lightning 2.6.6, 2026-11-27; the run
files ``reports/runs/system-cuda-h200*.json``, and a probe of the case's own
encoder on the same machine, CUDA and CPU side by side, whose numbers follow):

* ``core``, ``fast_path_off``, ``lightning_validate``, ``bf16_true`` (Lightning
  2.6.6 only: 2.0.x has no ``bf16-true``), ``upstream_issue132613`` and
  ``upstream_issue82783`` read ``fixed`` on CUDA, as on CPU from torch 2.6.0.
  Their CUDA expectations name those runs and hold at exactly those releases.
* ``padding_mask[cuda]`` read ``different``: "output matches the fp32 result
  (atol 0.1)" failed. The probe shows that was the *check*, not the GPU. Under
  bf16 autocast CUDA keeps the encoder off the nested-tensor fast path; the
  check's fp32 reference ran without autocast, took the fast path, and returned
  zeros at the padded positions. On real positions the two agreed within
  0.0039; on padded ones they were 1.92 apart. The same reference had zeros
  there on CPU too (2.37 apart), hidden because the bf16 fast path raises
  first. What an encoder returns at padded positions is undefined, so the
  checks now compare real (non-padded) positions only, on CPU and CUDA alike
  (``tests/test_encoder_checks.py`` rebuilds the GPU's situation on CPU). The
  recorded ``different`` stays as it was recorded, marked as taken under the
  old check (``old_checks``), and ``padding_mask[cuda]`` has no CUDA
  expectation until a GPU runs the new check.
* ``upstream_issue107663[cuda]`` read ``different``: ``RuntimeError: Need
  attn_mask if specifying the is_causal hint`` (``torch/nn/functional.py``).
  With autocast on CUDA the snippet raises whether the fast path is on or
  off: its ``is_causal=True`` without an ``attn_mask`` is refused before the
  code path the issue is about, while on CPU the fast path runs it. So on
  CUDA it is no evidence for or against the bug. Its CUDA expectation says
  what was observed (``different``, at torch 2.11.0), and the agreement with
  ``core`` does not count a result that fails another way as its expectation
  declares: those cells are named there as not compared.
"""

from __future__ import annotations

import torch

from bugmatrix import CPU_BF16, CUDA_BF16, CUDA_FP16, Case, Checks, Expect, Requires, Signature, Source, observed
from bugmatrix.cell.checks import finite, lightning, quiet_trainer, tiny_loader

case = Case(
    id="encoder_bf16_eval",
    title="TransformerEncoder eval fast path under bf16 autocast: dtype mismatch",
    source=Source("PyTorch Lightning中Transformer编码器的混合精度训练问题解析", note="Chinese blog post, undated; no link known"),
    axes=("torch",),  # what a variant spans unless it says otherwise
    signature=Signature(
        r"mat1 and mat2 must have the same dtype",
        r"expected scalar type (BFloat16|Half|Float) but found (Float|BFloat16|Half)",
    ),
    evidence=(
        "https://github.com/pytorch/pytorch/issues/132613",
        "https://github.com/pytorch/pytorch/issues/107663",
        "https://github.com/pytorch/pytorch/issues/82783",
        "https://github.com/pytorch/pytorch/pull/84722",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/19980",
    ),
    # torch imports torch._dynamo lazily at a variant's first optimizer step (seconds, and it sets TORCHINDUCTOR_CACHE_DIR):
    # the cell process imports it once, before its variants are forked, instead of every variant paying for it.
    imports=("torch._dynamo",),
)

BOUNDARY = (
    "bisect (reports/bisect/encoder_bf16_eval-core-cpu--torch.json): first fixed torch 2.6.0 on CPU; "
    "pytorch/pytorch#132613 describes it, and its snippet (upstream_issue132613) flips at the same release"
)
#: The GPU runs: what each CUDA expectation rests on (and the releases it covers: nothing between them is inferred).
H200 = (
    "GPU runs on an NVIDIA H200 (CUDA 13.0, torch 2.11.0+cu130), 2026-11-27: reports/runs/system-cuda-h200.json (Lightning 2.6.6), "
    "reports/runs/system-cuda-h200-pl2.0.3.json, reports/runs/system-cuda-h200-pl2.0.6.json, reports/runs/system-cuda-h200-pl2.0.7.json"
)
PL_ON_H200 = ("2.0.3", "2.0.6", "2.0.7", "2.6.6")
EXPECT_CPU = (
    Expect("reproduced", torch="<2.6", device="cpu", evidence=BOUNDARY),
    Expect("fixed", torch=">=2.6", device="cpu", evidence=BOUNDARY),
)
FIXED_ON_H200 = observed("fixed", device="cuda", evidence=H200, torch="2.11.0")


def _encoder(device: str) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2).to(device).eval()


def _eval_checks(
    encoder: torch.nn.Module, x: torch.Tensor, out: torch.Tensor, dtype: torch.dtype, padding: torch.Tensor | None = None
) -> Checks:
    """The output against the fp32 result, at real positions only: what the encoder returns at padded ones is undefined.

    With a ``src_key_padding_mask`` the fp32 reference (no autocast) takes the
    nested-tensor fast path, which returns zeros at padded positions; a bf16
    output that stayed off it (CUDA autocast) has other values there. Comparing
    them there read ``different`` on an H200 with the outputs 0.0039 apart at
    every real position (see the module docstring).
    """
    with torch.no_grad():
        reference = encoder(x.float(), src_key_padding_mask=padding) if padding is not None else encoder(x.float())
    real = ~padding if padding is not None else torch.ones(out.shape[:-1], dtype=torch.bool, device=out.device)
    return {
        # The fused path returns bf16; the composite path ends in LayerNorm,
        # which autocast runs in fp32. Both are autocast's own, valid choices.
        f"output dtype is {dtype} or float32": out.dtype in (dtype, torch.float32),
        "output is finite at real positions": finite(out[real]),
        "output matches the fp32 result at real positions (atol 0.1)": bool(torch.allclose(out.float()[real], reference[real], atol=0.1)),
    }


@case.variant(devices=(CUDA_BF16, CPU_BF16), expect=(*EXPECT_CPU, *FIXED_ON_H200))
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
                "every nightly cell agrees; this project's own finding, no upstream issue found (pytorch/pytorch#107663 is the "
                "enable_nested_tensor=False path, and its snippet is fixed from torch 2.6.0)"
            ),
        ),
    ),
    # Compared padded positions too, whose values are undefined: read `different` on an H200 (see the docstring).
    old_checks=("output matches the fp32 result (atol 0.1)",),
)
def padding_mask(device: str, dtype: torch.dtype) -> Checks:
    """Same, with a ``src_key_padding_mask``: the nested-tensor fast path."""
    encoder, x = _encoder(device), torch.randn(2, 5, 16, device=device)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    with torch.no_grad(), torch.autocast(device, dtype=dtype):
        out = encoder(x, src_key_padding_mask=mask)
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=False):
        return _eval_checks(encoder, x, out, dtype, padding=mask)


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    requires=Requires(api="torch.backends.mha.set_fastpath_enabled"),
    workaround_for="core",
    expect=(
        Expect("fixed", device="cpu", evidence="the source post's workaround: no fast path, autocast applies to every matmul"),
        *FIXED_ON_H200,
    ),
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


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    axes=("torch", "lightning"),
    kind="framework",
    expect=(*EXPECT_CPU, *observed("fixed", device="cuda", evidence=H200, torch="2.11.0", lightning=PL_ON_H200)),
)
def lightning_validate(device: str, dtype: torch.dtype) -> Checks:
    """The source post's setup: ``Trainer(precision="bf16-mixed").validate`` through the encoder."""
    return _validate(device, "bf16-mixed")


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    axes=("torch", "lightning"),
    # Trainer(precision="bf16-true") arrived in Lightning 2.1 (2.0.x rejects the flag).
    requires=Requires(lightning=">=2.1"),
    workaround_for="lightning_validate",
    expect=(
        Expect("fixed", device="cpu", evidence="the source post's workaround: weights and inputs are both bf16"),
        *observed("fixed", device="cuda", evidence=H200, torch="2.11.0", lightning="2.6.6"),
    ),
)
def bf16_true(device: str, dtype: torch.dtype) -> Checks:
    """The source post's workaround: ``precision="bf16-true"``, so weights and inputs share one dtype."""
    return _validate(device, "bf16-true")


# --- Upstream's own reproductions, as variants ---------------------------------------------------
# No fixing PR with a regression test was found for #132613 (see the module docstring), so these are
# the issues' runnable snippets, shrunk. Each comment names the source and every change.


def _upstream_checks(out: torch.Tensor, dtype: torch.dtype, model: torch.nn.Module, *args: torch.Tensor, **kwargs: object) -> Checks:
    """The snippets only run the model; "fixed" also needs an output as usable as the fp32 one.

    Finiteness is compared with the same call without autocast, not required
    outright: #107663's float ``src_key_padding_mask`` of ``torch.rand`` values
    gives NaN rows in plain fp32 too (seen in torch 2.6.0 and 2.15.0), which is
    the snippet's own doing, not this bug.
    """
    with torch.autocast(out.device.type, enabled=False):
        reference = model(*args, **kwargs)
    return {
        f"output dtype is {dtype} or float32": out.dtype in (dtype, torch.float32),
        "output is finite wherever the fp32 output is": bool(torch.equal(torch.isfinite(out.float()), torch.isfinite(reference))),
    }


@case.variant(devices=(CUDA_BF16, CPU_BF16), kind="upstream", counterpart="core", expect=(*EXPECT_CPU, *FIXED_ON_H200))
def upstream_issue132613(device: str, dtype: torch.dtype) -> Checks:
    """The snippet of pytorch/pytorch#132613 (the source post's report): a pose auto-encoder evaluated under bf16 autocast."""
    # Source: the issue's description (AmitMY, 2024-08-04). Changes: (1) sizes shrunk: pose_dims (178, 3)
    # -> (4, 3), hidden_dim 512 -> 16, nhead 16 -> 2, dim_feedforward 2048 -> 32, num_layers 6 -> 2, so it
    # runs in milliseconds (same layer types, same batch_first, same order); (2) the model and batch are
    # moved to the declared device and autocast's device/dtype are the declared ones (upstream: "cpu",
    # bfloat16); (3) the output, which the snippet discards, is checked against fp32 (see _upstream_checks).
    import math

    class PoseFSQAutoEncoder(torch.nn.Module):
        def __init__(
            self, pose_dims: tuple = (4, 3), hidden_dim: int = 16, nhead: int = 2, dim_feedforward: int = 32, num_layers: int = 2
        ) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(
                torch.nn.Flatten(start_dim=2),
                torch.nn.Linear(math.prod(pose_dims), hidden_dim, bias=False),
                torch.nn.TransformerEncoder(
                    torch.nn.TransformerEncoderLayer(d_model=hidden_dim, nhead=nhead, dim_feedforward=dim_feedforward, batch_first=True),
                    num_layers=num_layers,
                ),
            )

        def forward(self, batch: torch.Tensor) -> torch.Tensor:
            return self.encoder(batch)

    model = PoseFSQAutoEncoder().to(device)
    batch = torch.randn(size=(2, 10, 4, 3), device=device)
    model.eval()  # <--- HERE: Different behavior .train() vs .eval()
    with torch.no_grad():
        with torch.autocast(device, dtype=dtype):
            out = model(batch)
        return _upstream_checks(out, dtype, model, batch)


@case.variant(
    devices=(CUDA_BF16, CPU_BF16),
    kind="upstream",
    counterpart="core",
    expect=(
        *EXPECT_CPU,
        # Refused on CUDA before the bug's path (is_causal without attn_mask): no evidence for or against it (docstring).
        *observed("different", device="cuda", evidence=f"{H200}: Need attn_mask if specifying the is_causal hint", torch="2.11.0"),
    ),
)
def upstream_issue107663(device: str, dtype: torch.dtype) -> Checks:
    """The snippet of pytorch/pytorch#107663: ``enable_nested_tensor=False``, a float padding mask, ``is_causal=True``."""
    # Source: the issue's description (jingxu10, 2023-08-22). Changes: (1) sizes shrunk: d_model 512 -> 16,
    # nhead 8 -> 2, dim_feedforward (default 2048) -> 32, num_layers 6 -> 2, src/mask (16, 41, ...) ->
    # (2, 5, ...); (2) torch.cpu.amp.autocast() (deprecated) becomes torch.autocast(device, dtype) with the
    # declared device/dtype (upstream: CPU, its default bfloat16); `torch.FloatTensor(src)` becomes `src`,
    # already float32 on the device; (3) the output, which the snippet prints, is checked against fp32;
    # `with a, b:` is split in two so that the fp32 reference runs under the same no_grad.
    encoder_layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    model = torch.nn.TransformerEncoder(encoder_layer, num_layers=2, enable_nested_tensor=False).to(device)
    model.eval()
    src = torch.rand(2, 5, 16, device=device)
    mask = torch.rand(2, 5, device=device)
    with torch.no_grad():
        with torch.autocast(device, dtype=dtype):
            out = model(src, src_key_padding_mask=mask, is_causal=True)
        return _upstream_checks(out, dtype, model, src, src_key_padding_mask=mask, is_causal=True)


EXPECT_82783_CPU_EVIDENCE = (
    "bisect (reports/bisect/encoder_bf16_eval-upstream_issue82783-cpu--torch.json): torch 2.0.1 reproduced, first fixed 2.1.0 "
    "on CPU (run also at 2.5.1, 2.6.0, 2.15.0: fixed); earlier than core's 2.6.0, see the module docstring"
)
EXPECT_82783_CPU = (
    Expect("reproduced", torch="<2.1", device="cpu", evidence=EXPECT_82783_CPU_EVIDENCE),
    Expect("fixed", torch=">=2.1", device="cpu", evidence=EXPECT_82783_CPU_EVIDENCE),
)


@case.variant(devices=(CUDA_FP16, CPU_BF16), kind="upstream", counterpart="core", expect=(*EXPECT_82783_CPU, *FIXED_ON_H200))
def upstream_issue82783(device: str, dtype: torch.dtype) -> Checks:
    """The snippet of pytorch/pytorch#82783: one ``TransformerEncoderLayer`` under ``inference_mode`` + autocast."""
    # Source: the issue's description (wendazhou, 2022-08-04; CUDA, float16; closed after PR #84722 made the
    # layer leave the fast path under CUDA autocast). Changes: (1) the device/dtype are the declared ones:
    # CUDA float16 as upstream, and a CPU bfloat16 analog; (2) the output is checked against fp32.
    # Everything else (d_model=16, nhead=1, dropout=0.1, x of (4, 1, 16), inference_mode) is upstream's.
    x = torch.randn(4, 1, 16).to(device=device)
    encoder_layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=1, batch_first=True, dropout=0.1).to(device=device)
    encoder_layer.eval()
    with torch.inference_mode():
        with torch.autocast(device, dtype=dtype):
            y = encoder_layer(x)
        return _upstream_checks(y, dtype, encoder_layer, x)
