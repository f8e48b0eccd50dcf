"""Every variant starts from the same global state, and one that changes it is named.

Variants share an xdist worker, and torch keeps process-wide switches: grad
mode, the default dtype and device, autocast, the MHA fast path, deterministic
algorithms, matmul precision, anomaly mode. A variant that flips one and
returns would silently change every later variant in its worker (a probe that
set float64 and disabled grad once made three workarounds read as false
regressions). So the state is captured before each variant and put back after
it; whatever differed is recorded on the variant that changed it, as
``leaked``, while the next variant runs clean. The working directory and the
environment variables are restored the same way; a non-daemon thread left
running cannot be stopped, so it is named (it would keep the process alive).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bugmatrix.cell.axes import device_runtime

__all__ = ["Snapshot", "capture"]

Getter = Callable[[], Any]
Setter = Callable[[Any], None]


def _first(*calls: Callable[[], Any]) -> Any:
    """The first call that works on this torch (APIs moved between releases)."""
    last: Exception | None = None
    for call in calls:
        try:
            return call()
        except (AttributeError, TypeError, RuntimeError) as exc:
            last = exc
    raise AttributeError(str(last))


def _torch_knobs() -> dict[str, tuple[Getter, Setter]]:
    """name -> (get, set) for each process-wide torch switch this torch has (the matrix's device runtime axis)."""
    torch = device_runtime()
    if torch is None:
        return {}

    knobs: dict[str, tuple[Getter, Setter]] = {
        "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
        "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "anomaly detection": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
        "deterministic algorithms": (
            lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
            lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]),
        ),
        "float32 matmul precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "cudnn flags": (
            lambda: (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic),
            lambda v: (
                setattr(torch.backends.cudnn, "enabled", v[0]),
                setattr(torch.backends.cudnn, "benchmark", v[1]),
                setattr(torch.backends.cudnn, "deterministic", v[2]),
            ),
        ),
        "cpu autocast": (
            lambda: _first(lambda: torch.is_autocast_enabled("cpu"), torch.is_autocast_cpu_enabled),
            lambda v: _first(lambda: torch.set_autocast_enabled("cpu", v), lambda: torch.set_autocast_cpu_enabled(v)),
        ),
        "cuda autocast": (
            lambda: _first(lambda: torch.is_autocast_enabled("cuda"), torch.is_autocast_enabled),
            lambda v: _first(lambda: torch.set_autocast_enabled("cuda", v), lambda: torch.set_autocast_enabled(v)),
        ),
    }
    if hasattr(torch, "get_default_device"):  # torch >= 2.3
        knobs["default device"] = (torch.get_default_device, torch.set_default_device)
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "get_fastpath_enabled"):  # torch >= 2.1
        knobs["MHA fast path"] = (mha.get_fastpath_enabled, mha.set_fastpath_enabled)
    usable = {}
    for name, (get, put) in knobs.items():
        with contextlib.suppress(AttributeError, TypeError, RuntimeError):
            get()
            usable[name] = (get, put)
    return usable


@dataclass
class Snapshot:
    """The process-wide state before a variant ran."""

    knobs: dict[str, tuple[Getter, Setter]]
    values: dict[str, Any]
    cwd: str
    environ: dict[str, str]
    threads: set[int]

    def restore(self) -> list[str]:
        """Put everything back; one line per thing the variant had changed."""
        leaked = []
        for name, (get, put) in self.knobs.items():
            now = get()
            if now != self.values[name]:
                leaked.append(f"{name} {self.values[name]} -> {now}")
                with contextlib.suppress(AttributeError, TypeError, RuntimeError):
                    put(self.values[name])
        if os.getcwd() != self.cwd:
            leaked.append(f"cwd {self.cwd} -> {os.getcwd()}")
            os.chdir(self.cwd)
        if dict(os.environ) != self.environ:
            changed = sorted(set(os.environ.items()) ^ set(self.environ.items()))
            leaked.append("environment variables " + ", ".join(sorted({k for k, _ in changed})))
            os.environ.clear()
            os.environ.update(self.environ)
        for thread in threading.enumerate():
            if thread.ident not in self.threads and thread.is_alive() and not thread.daemon:
                leaked.append(f"non-daemon thread {thread.name!r} still running")
        return leaked


def capture() -> Snapshot:
    """The state now, to restore after the variant."""
    knobs = _torch_knobs()
    return Snapshot(
        knobs=knobs,
        values={name: get() for name, (get, _) in knobs.items()},
        cwd=os.getcwd(),
        environ=dict(os.environ),
        threads={t.ident for t in threading.enumerate() if t.ident is not None},
    )
