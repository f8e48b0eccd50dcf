"""The reference catalogue: this project's four cases as they were declared for issue 23, declarations only.

Harness tests that need a realistic catalogue (four cases, every kind of
variant, the full profile's 70 CPU cells) plan this with the frozen matrix in
``tests/fixtures/reference/matrix.toml``, never the live ``cases/`` and
``matrix.toml``: a user who adds a case or an axis there changes no harness
test. The variants keep their names, devices, axes, kinds, links and
requirements; their bodies are empty (nothing here is run) and the outcomes of
a synthetic night come from :data:`tests.fullscale.RULES`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

from bugmatrix.cell.case import CPU_BF16, CPU_FP16, CPU_FP32, CUDA_BF16, CUDA_FP16, CUDA_FP32, Case, Checks, Requires
from bugmatrix.cell.outcomes import Signature
from bugmatrix.plan.catalog import Catalog
from bugmatrix.plan.matrix import Matrix
from bugmatrix.releases.tracking import load_resolved_matrix

__all__ = ["DECLARATIONS", "REFERENCE_MATRIX", "reference_case_files", "reference_catalog", "reference_matrix"]

REFERENCE_MATRIX = Path(__file__).resolve().parent / "fixtures" / "reference" / "matrix.toml"

TORCH, TORCH_PL, TF, PL_TF = ("torch",), ("torch", "lightning"), ("transformers",), ("lightning", "transformers")
FP16, BF16, FP32, HALF_CPU = (CUDA_FP16, CPU_BF16), (CUDA_BF16, CPU_BF16), (CUDA_FP32, CPU_FP32), (CUDA_FP16, CPU_FP16)

#: case -> [(variant, devices, axes, kind, workaround_for, counterpart, requires)], in declaration order.
DECLARATIONS: dict[str, list[tuple]] = {
    "autocast_cache": [
        ("core", FP16, TORCH, "core", None, None, Requires()),
        ("fresh_autocast", FP16, TORCH, "workaround", "core", None, Requires()),
        ("no_autocast_in_no_grad", FP16, TORCH, "workaround", "core", None, Requires()),
        ("cache_disabled", FP16, TORCH, "workaround", "core", None, Requires()),
        ("lightning_manual_optimization", FP16, TORCH_PL, "framework", None, None, Requires()),
        ("upstream_pr165068_test", FP16, TORCH, "upstream", None, "core", Requires()),
        ("upstream_issue112583", FP16, TORCH, "upstream", None, "core", Requires()),
        ("upstream_lightning_pr20921_test", FP16, TORCH_PL, "upstream", None, "lightning_manual_optimization", Requires()),
        ("upstream_issue65766_workaround", FP16, TORCH, "upstream", None, "fresh_autocast", Requires()),
    ],
    "double_unscale": [
        ("unscale_twice", HALF_CPU, TORCH, "core", None, None, Requires()),
        ("unscale_once", HALF_CPU, TORCH, "workaround", "unscale_twice", None, Requires()),
        ("fp16_parameters", HALF_CPU, TORCH, "core", None, None, Requires()),
        ("fp32_master_weights", HALF_CPU, TORCH, "workaround", "fp16_parameters", None, Requires()),
        ("lightning_user_unscale", (CUDA_FP16,), TORCH_PL, "framework", None, None, Requires()),
        ("upstream_unscale_docstring_example", HALF_CPU, TORCH, "upstream", None, "unscale_once", Requires()),
        ("upstream_unscale_docstring_warning", HALF_CPU, TORCH, "upstream", None, "unscale_twice", Requires()),
    ],
    "encoder_bf16_eval": [
        ("core", BF16, TORCH, "core", None, None, Requires()),
        ("padding_mask", BF16, TORCH, "core", None, None, Requires()),
        ("fast_path_off", BF16, TORCH, "workaround", "core", None, Requires(api="torch.backends.mha.set_fastpath_enabled")),
        ("lightning_validate", BF16, TORCH_PL, "framework", None, None, Requires()),
        ("bf16_true", BF16, TORCH_PL, "workaround", "lightning_validate", None, Requires(lightning=">=2.1")),
        ("upstream_issue132613", BF16, TORCH, "upstream", None, "core", Requires()),
        ("upstream_issue107663", BF16, TORCH, "upstream", None, "core", Requires()),
        ("upstream_issue82783", FP16, TORCH, "upstream", None, "core", Requires()),
    ],
    "t5_loss_no_grad_fn": [
        ("adafactor_closure", FP32, TF, "core", None, None, Requires()),
        ("lightning_trainer", FP32, PL_TF, "framework", None, None, Requires()),
        ("enable_grad_closure", FP32, PL_TF, "workaround", "lightning_trainer", None, Requires()),
        ("upstream_lightning_pr18268_test", FP32, PL_TF, "upstream", None, "lightning_trainer", Requires()),
    ],
}


def _empty(name: str) -> Callable[[str, object], Checks]:
    """A variant body that does nothing, named like the variant it stands for."""

    def body(device: str, dtype: object) -> Checks:
        return {}

    body.__name__ = name
    return body


@cache
def reference_catalog() -> Catalog:
    """The four reference cases, built from :data:`DECLARATIONS` (the planner reads exactly these objects)."""
    cases = []
    for case_id, variants in DECLARATIONS.items():
        case = Case(id=case_id, title=case_id, signature=Signature("never raised"))
        for name, devices, axes, kind, workaround_for, counterpart, requires in variants:
            declare = case.variant(
                devices=devices, axes=axes, kind=kind, workaround_for=workaround_for, counterpart=counterpart, requires=requires
            )
            declare(_empty(name))
        cases.append(case)
    return Catalog(tuple(cases))


@cache
def reference_matrix() -> Matrix:
    """The frozen matrix, its ``latest`` resolved from the tests' fixed resolution (tests/conftest.py)."""
    return load_resolved_matrix(REFERENCE_MATRIX)


def reference_case_files(into: Path) -> Path:
    """The reference cases' files, copied from ``cases/`` into ``into``, for a test that must hand the command line a case folder.

    The files, never the folder: a case a user adds to ``cases/`` is not copied, so it changes nothing there.
    """
    into.mkdir(parents=True, exist_ok=True)
    for case_id in DECLARATIONS:
        shutil.copy(Path(__file__).resolve().parent.parent / "cases" / f"{case_id}.py", into)
    return into
