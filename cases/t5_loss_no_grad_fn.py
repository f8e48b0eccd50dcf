"""T5 loss without grad_fn: an optimizer whose ``step`` runs under ``no_grad`` swallows the closure.

Symptom (the source post): Lightning + transformers T5 + ``Adafactor``, automatic
optimization: the training loss has ``requires_grad=False`` and backward fails
with ``element 0 of tensors does not require grad and does not have a grad_fn``.
The source post's fix was upgrading Lightning (2.0.3 -> 2.2.2).

Mechanism: transformers PR #23417 decorated ``Adafactor.step`` (and its
``AdamW``) with ``@torch.no_grad()``. Lightning's automatic optimization passes
``training_step`` + ``backward`` as the optimizer's *closure*, which ``step``
calls, so the whole forward ran with grad disabled. Lightning then ran the
closure under ``torch.enable_grad()`` (issue #18254, PR #18268); torch's own
optimizers never had the problem because their ``step`` re-enables grad
around the closure.

Upstream evidence, and what each is evidence of:

* huggingface/transformers PR #23417 added ``@torch.no_grad()`` to
  ``Adafactor.step``/``AdamW.step``: the cause. First in transformers 4.30.0,
  found by bisect (reports/bisect/...-adafactor_closure-cpu--transformers.json).
* transformers PR #24412 (closed) proposed removing that decorator again; its
  description reports this very failure with pytorch-lightning 2.0.3 and
  ``Adafactor``. It is evidence of the failure, not a fix: the decorator is
  still there in transformers 5.23.0 (``adafactor_closure`` reproduces).
* Lightning-AI/pytorch-lightning#18254 ("element 0 of tensors does not require
  grad ... when using AdamW from Hugging Face", closed) is the report PR #18268
  says it fixes; #19767 is cited by the source post, not read here.
* Lightning PR #18268 runs the closure under ``torch.enable_grad()``: the fix.
  ``git tag --contains`` on its commits: first in 2.0.7 (cherry-pick
  28e0bdd84c) and 2.1.0 (b88b8b3937); bisect agrees (2.0.6 -> 2.0.7).

Its own regression test runs as ``upstream_lightning_pr18268_test`` (a
``NoGradAdamW`` whose ``step`` is ``@torch.no_grad``, no transformers). It
agrees with ``lightning_trainer`` on the Lightning boundary (2.0.6 reproduced,
2.0.7 fixed) but not with transformers < 4.30: there the source post's Adafactor has
no ``no_grad`` yet, so ``lightning_trainer`` is fixed while the upstream test,
whose optimizer always disables grad, still reproduces on Lightning < 2.0.7
(run: torch 2.15.0, pytorch-lightning 2.0.6, transformers 4.29.2). A real
finding, not a wrong citation: the bug needs both halves, old Lightning *and*
a ``no_grad`` ``step``; the upstream test pins only the Lightning half.

On a GPU (an NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130, transformers 5.17.0,
2026-11-27; the run files ``reports/runs/system-cuda-h200*.json``) the CUDA
variants read as on CPU: ``adafactor_closure`` reproduces, and
``lightning_trainer`` and the upstream test flip at pytorch-lightning 2.0.6 ✗
→ 2.0.7 ✓ (2.0.3 ✗, Lightning 2.6.6 ✓); the workaround holds in all four. The
CUDA expectations name those runs and hold at exactly those releases
(``observed``): no GPU ran another transformers or Lightning yet.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

from bugmatrix import CPU_FP32, CUDA_FP32, Case, Checks, Expect, Signature, Source, observed
from bugmatrix.cell.checks import grads_finite, lightning, precision_for, quiet_trainer, tiny_loader

case = Case(
    id="t5_loss_no_grad_fn",
    title="T5 + Adafactor under Lightning: loss has no grad_fn",
    source=Source("PyTorch Lightning与T5模型训练中的梯度传播问题解析", note="Chinese blog post, undated; no link known"),
    signature=Signature(r"element 0 of tensors does not require grad and does not have a grad_fn"),
    evidence=(
        "https://github.com/huggingface/transformers/pull/23417",
        "https://github.com/huggingface/transformers/pull/24412",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/18254",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/19767",
        "https://github.com/Lightning-AI/pytorch-lightning/pull/18268",
    ),
    # transformers imports these lazily, and torch imports torch._dynamo at a variant's first optimizer step: the cell
    # process imports them once, before its variants are forked, instead of every variant paying for them.
    imports=("transformers.T5Config", "transformers.T5ForConditionalGeneration", "transformers.optimization.Adafactor", "torch._dynamo"),
)

# The variants run in fp32 (CPU_FP32, CUDA_FP32): the source post trained in full precision; the bug is about grad mode, not dtype.
TF_BOUNDARY = "bisect (reports/bisect/t5_loss_no_grad_fn-adafactor_closure-cpu--transformers.json): Adafactor.step gained @torch.no_grad in transformers 4.30.0; PR #23417"
PL_UPSTREAM = (
    "Lightning PR #18268 (git tag --contains: first in 2.0.7) and its own test; run at Lightning 2.0.6 (reproduced) and 2.0.7 (fixed)"
)
PL_BOUNDARY = "bisect (reports/bisect/t5_loss_no_grad_fn-lightning_trainer-cpu--lightning.json): closure runs under enable_grad from Lightning 2.0.7; PR #18268"
#: The GPU runs: what each CUDA expectation rests on (and the releases it covers: nothing between them is inferred).
H200 = (
    "GPU runs on an NVIDIA H200 (CUDA 13.0, torch 2.11.0+cu130, transformers 5.17.0), 2026-11-27: reports/runs/system-cuda-h200.json "
    "(Lightning 2.6.6), reports/runs/system-cuda-h200-pl2.0.3.json, reports/runs/system-cuda-h200-pl2.0.6.json, "
    "reports/runs/system-cuda-h200-pl2.0.7.json"
)
ON_H200 = {"torch": "2.11.0", "transformers": "5.17.0"}


def _t5_and_batch(device: str) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """A tiny, seeded T5 built from a config: no hub, no tokenizer."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1,
        num_heads=2, decoder_start_token_id=0, pad_token_id=0, dropout_rate=0.0,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config).to(device)
    input_ids = torch.randint(1, 32, (4, 6), device=device)
    labels = torch.randint(1, 32, (4, 5), device=device)
    return model, input_ids, labels


def _adafactor(params: object) -> torch.optim.Optimizer:
    from transformers.optimization import Adafactor

    return Adafactor(params, lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False)


@case.variant(
    devices=(CUDA_FP32, CPU_FP32),
    axes=("transformers",),
    expect=(
        Expect("reproduced", transformers=">=4.30", device="cpu", evidence=TF_BOUNDARY),
        Expect("fixed", transformers="<4.30", device="cpu", evidence=TF_BOUNDARY),
        *observed("reproduced", device="cuda", evidence=H200, **ON_H200),
    ),
)
def adafactor_closure(device: str, dtype: torch.dtype) -> Checks:
    """The mechanism alone: ``Adafactor.step(closure)`` with forward+backward in the closure."""
    model, input_ids, labels = _t5_and_batch(device)
    optimizer = _adafactor(model.parameters())
    seen: list[bool] = []

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(input_ids=input_ids, labels=labels).loss
        seen.append(loss.requires_grad)
        loss.backward()
        return loss

    optimizer.step(closure)
    return {"loss required grad": all(seen), "every parameter got a finite grad": grads_finite(model)}


class _T5Module:
    """Builds the source post's LightningModule (lazily, so the Lightning import stays in the variant)."""

    @staticmethod
    def make(device: str, enable_grad_in_closure: bool) -> object:
        pl = lightning()

        class T5Module(pl.LightningModule):
            def __init__(self) -> None:
                super().__init__()
                self.model, self.input_ids, self.labels = _t5_and_batch("cpu")
                self.loss_required_grad: list[bool] = []
                self.grads_ok: list[bool] = []

            def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
                loss = self.model(input_ids=batch[0], labels=batch[1]).loss
                self.loss_required_grad.append(loss.requires_grad)
                return loss

            def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer, *args: object) -> None:
                self.grads_ok.append(grads_finite(self.model))

            def configure_optimizers(self) -> torch.optim.Optimizer:
                return _adafactor(self.parameters())

            if enable_grad_in_closure:

                def optimizer_step(self, epoch: int, batch_idx: int, optimizer: object, optimizer_closure: object = None) -> None:  # type: ignore[override]
                    def closure() -> object:
                        with torch.enable_grad():
                            return optimizer_closure()

                    optimizer.step(closure=closure)

        return T5Module()


def _fit(device: str, dtype: torch.dtype, enable_grad_in_closure: bool) -> Checks:
    module = _T5Module.make(device, enable_grad_in_closure)
    loader = tiny_loader(module.input_ids, module.labels)
    quiet_trainer(device, precision=precision_for(dtype)).fit(module, loader)
    return {
        "training loss required grad at every step": bool(module.loss_required_grad) and all(module.loss_required_grad),
        "every step had finite grads for every parameter": bool(module.grads_ok) and all(module.grads_ok),
    }


@case.variant(
    devices=(CUDA_FP32, CPU_FP32),
    axes=("lightning", "transformers"),
    kind="framework",
    expect=(
        Expect("fixed", transformers="<4.30", device="cpu", evidence=TF_BOUNDARY),
        Expect("reproduced", lightning="<2.0.7", device="cpu", evidence=PL_BOUNDARY),
        Expect("fixed", lightning=">=2.0.7", device="cpu", evidence=PL_BOUNDARY),
        *observed("reproduced", device="cuda", evidence=H200, lightning=("2.0.3", "2.0.6"), **ON_H200),
        *observed("fixed", device="cuda", evidence=H200, lightning=("2.0.7", "2.6.6"), **ON_H200),
    ),
)
def lightning_trainer(device: str, dtype: torch.dtype) -> Checks:
    """The source post's setup: a real Lightning Trainer fits a tiny T5 with Adafactor."""
    return _fit(device, dtype, enable_grad_in_closure=False)


@case.variant(
    devices=(CUDA_FP32, CPU_FP32),
    axes=("lightning", "transformers"),
    workaround_for="lightning_trainer",
    expect=(
        Expect("fixed", device="cpu", evidence="Lightning PR #18268 applied by hand: the closure runs under enable_grad"),
        *observed("fixed", device="cuda", evidence=H200, lightning=("2.0.3", "2.0.6", "2.0.7", "2.6.6"), **ON_H200),
    ),
)
def enable_grad_closure(device: str, dtype: torch.dtype) -> Checks:
    """Workaround: override ``optimizer_step`` and run the closure under ``torch.enable_grad()``."""
    return _fit(device, dtype, enable_grad_in_closure=True)


# --- Upstream's own regression test, as a variant ------------------------------------------------


def _boring_model(pl: ModuleType) -> type:
    """Lightning's ``BoringModel``, loaded from ``demos/boring_classes.py`` without running ``demos/__init__.py``.

    In Lightning 2.0.x that ``__init__`` imports the WikiText2 demo, which imports ``requests``: a dependency
    of neither the test nor Lightning itself. Cells had it only through transformers 4.x, so with
    transformers 5 (which dropped ``requests``) the import failed, "No module named 'requests'"
    (seen: torch 2.15.0, pytorch-lightning 2.0.3, transformers 5.23.0), an outcome about packaging, not the bug.
    """
    path = Path(pl.__file__).parent / "demos" / "boring_classes.py"
    spec = importlib.util.spec_from_file_location(f"{pl.__name__}.demos.boring_classes", path)
    if spec is None or spec.loader is None:
        msg = f"no BoringModel at {path}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BoringModel


@case.variant(
    devices=(CUDA_FP32, CPU_FP32),
    # The test itself needs no transformers, but it runs in its counterpart's cells, so there is something to
    # compare in every cell (BoringModel is loaded without `demos/__init__`: see _boring_model).
    axes=("lightning", "transformers"),
    kind="upstream",
    counterpart="lightning_trainer",
    expect=(
        Expect("reproduced", lightning="<2.0.7", device="cpu", evidence=PL_UPSTREAM),
        Expect("fixed", lightning=">=2.0.7", device="cpu", evidence=PL_UPSTREAM),
        *observed("reproduced", device="cuda", evidence=H200, lightning=("2.0.3", "2.0.6"), **ON_H200),
        *observed("fixed", device="cuda", evidence=H200, lightning=("2.0.7", "2.6.6"), **ON_H200),
    ),
)
def upstream_lightning_pr18268_test(device: str, dtype: torch.dtype) -> Checks:
    """The regression test added with Lightning PR #18268: any optimizer whose ``step`` is ``@torch.no_grad``."""
    # Source: Lightning-AI/pytorch-lightning tests/tests_pytorch/loops/optimization/test_closure.py::
    # test_closure_with_no_grad_optimizer, as added by PR #18268 (commit b88b8b3937; cherry-picked as
    # 28e0bdd84c, first in tag 2.0.7). Changes: (1) `assert torch.is_grad_enabled()` in training_step is
    # recorded as a named check instead of raising, so that on an old Lightning the step goes on and the
    # loss without grad_fn meets Lightning's backward (the case's error) rather than an AssertionError;
    # (2) `tmpdir` is a temporary directory; (3) the Trainer also gets the declared accelerator and no
    # progress bar / model summary (upstream: the defaults); (4) `lightning()` picks the pinned package
    # (upstream imports lightning.pytorch); (5) type hints added; (6) BoringModel is loaded from its file
    # (upstream: `from lightning.pytorch.demos.boring_classes import BoringModel`), see _boring_model.
    import tempfile

    pl = lightning()
    from_boring = _boring_model(pl)
    grad_enabled: list[bool] = []

    class NoGradAdamW(torch.optim.AdamW):
        @torch.no_grad()
        def step(self, closure: object) -> object:  # type: ignore[override]
            if closure is not None:
                closure()
            return super().step()

    class TestModel(from_boring):
        def training_step(self, batch: torch.Tensor, batch_idx: int) -> object:
            grad_enabled.append(torch.is_grad_enabled())  # upstream: assert torch.is_grad_enabled()
            return super().training_step(batch, batch_idx)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return NoGradAdamW(self.parameters(), lr=0.1)

    with tempfile.TemporaryDirectory() as tmpdir:
        trainer = pl.Trainer(
            default_root_dir=tmpdir, fast_dev_run=1, accelerator="gpu" if device == "cuda" else "cpu",
            enable_progress_bar=False, enable_model_summary=False,
        )  # fmt: skip
        model = TestModel()
        trainer.fit(model)
    return {
        "grad was enabled in training_step (upstream: assert torch.is_grad_enabled())": bool(grad_enabled) and all(grad_enabled),
        "fit ran its one fast_dev_run optimizer step": trainer.global_step == 1,
    }
