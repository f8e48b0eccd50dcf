"""The harness seeds only the generators it owns: Python's ``random`` and the matrix's device runtime, found through the axis data."""

from __future__ import annotations

import random

import pytest

import bugmatrix.cell.axes
from bugmatrix.cell.axes import parse_spec
from bugmatrix.cell.execution import seed_everything


def test_random_and_the_device_runtime_are_seeded_and_no_other_distribution_is(monkeypatch: pytest.MonkeyPatch) -> None:
    numpy = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    spec = parse_spec('{"axes": {"torch": [["torch", "torch"]], "numpy": [["numpy", "numpy"]]}, "device_runtime": "torch"}')
    monkeypatch.setattr(bugmatrix.cell.axes, "_ACTIVE", spec)
    numpy.random.seed(123)
    untouched = numpy.random.get_state()[1].copy()
    random.seed(7)
    torch.manual_seed(7)
    seed_everything()
    assert random.random() == random.Random(0).random()
    assert torch.rand(3).tolist() == torch.rand(3, generator=torch.Generator().manual_seed(0)).tolist(), (
        "the device runtime, from the axis data"
    )
    assert (numpy.random.get_state()[1] == untouched).all(), "numpy is an axis here like any other: the harness leaves its generator alone"
