"""Torch-side building blocks for cases: positive checks and framework set-up (imported by case modules only)."""

from __future__ import annotations

import logging
import warnings
from types import ModuleType
from typing import Any

import torch

from bugmatrix.cell.axes import import_axis

__all__ = ["finite", "grads_finite", "lightning", "precision_for", "quiet_trainer", "tiny_loader"]

_PRECISION = {torch.float16: "16-mixed", torch.bfloat16: "bf16-mixed", torch.float32: "32-true"}


def grads_finite(module: torch.nn.Module) -> bool:
    """Every trainable parameter received a finite gradient: the "fixed" check."""
    params = [p for p in module.parameters() if p.requires_grad]
    return bool(params) and all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in params)


def finite(tensor: torch.Tensor) -> bool:
    """No NaN or inf anywhere."""
    return bool(torch.isfinite(tensor.float()).all())


def lightning() -> ModuleType:
    """The Lightning this cell pins: ``lightning.pytorch`` or ``pytorch_lightning``, as matrix.toml's axis says."""
    return import_axis("lightning")


def precision_for(dtype: torch.dtype) -> str:
    """Lightning's precision flag for a case's dtype (fp16 -> 16-mixed, ...)."""
    return _PRECISION[dtype]


def quiet_trainer(device: str, **kwargs: Any) -> Any:
    """A Trainer that trains a couple of steps silently, writing nothing to disk."""
    pl = lightning()
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(lightning|pytorch_lightning|lightning_fabric).*")
    options: dict[str, Any] = {
        "accelerator": "gpu" if device == "cuda" else "cpu",
        "devices": 1,
        "max_steps": 2,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "default_root_dir": None,
    }
    options.update(kwargs)
    return pl.Trainer(**options)


def tiny_loader(*tensors: torch.Tensor, batch_size: int = 2) -> torch.utils.data.DataLoader:
    """A deterministic, in-memory DataLoader."""
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*tensors), batch_size=batch_size)
