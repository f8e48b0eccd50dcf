"""Every variant starts from the same global state, and one that changes it is named.

torch's process-wide switches (grad mode, default dtype, autocast, ...), the working directory, environment variables,
resource limits and threads are captured before each variant and compared after it; what differs is its ``leaked``. In
a forked child that is all; in the cell process :meth:`Snapshot.restore` also puts back what it can. The baseline is
taken after the stack is imported, so what a library sets at import is blamed on no variant.
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


def _rlimits() -> dict[str, tuple[int, int]]:
    """name -> (soft, hard) of every resource limit this platform has (none without the resource module)."""
    try:
        import resource
    except ImportError:  # not Unix
        return {}
    found, seen = {}, set()
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        number = getattr(resource, name)
        if number in seen:  # an alias (RLIMIT_OFILE is RLIMIT_NOFILE)
            continue
        seen.add(number)
        with contextlib.suppress(OSError, ValueError):
            found[name] = resource.getrlimit(number)
    return found


def _set_rlimit(name: str, limits: tuple[int, int]) -> None:
    import resource

    with contextlib.suppress(OSError, ValueError):  # a lowered hard limit cannot be raised again by an unprivileged process
        resource.setrlimit(getattr(resource, name), limits)


def _limit(value: int) -> str:
    import resource

    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


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
    rlimits: dict[str, tuple[int, int]]

    def changes(self) -> list[str]:
        """One line per thing that differs from the snapshot now (nothing is put back)."""
        leaked = []
        for name, (get, _) in self.knobs.items():
            now = get()
            if now != self.values[name]:
                leaked.append(f"{name} {self.values[name]} -> {now}")
        if os.getcwd() != self.cwd:
            leaked.append(f"cwd {self.cwd} -> {os.getcwd()}")
        if dict(os.environ) != self.environ:
            changed = sorted(set(os.environ.items()) ^ set(self.environ.items()))
            leaked.append("environment variables " + ", ".join(sorted({k for k, _ in changed})))
        for name, now in _rlimits().items():
            before = self.rlimits.get(name)
            if before is not None and now != before:
                leaked.append(f"{name} {'/'.join(map(_limit, before))} -> {'/'.join(map(_limit, now))} (soft/hard)")
        leaked += [f"non-daemon thread {t.name!r} still running" for t in self.new_threads()]
        return leaked

    def new_threads(self) -> list[threading.Thread]:
        """Non-daemon threads started since the snapshot and still running (they keep a process from exiting)."""
        return [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive() and not t.daemon]

    def restore(self) -> list[str]:
        """Put back what can be put back; one line per thing the variant had changed."""
        leaked = self.changes()
        for name, (get, put) in self.knobs.items():
            if get() != self.values[name]:
                with contextlib.suppress(AttributeError, TypeError, RuntimeError):
                    put(self.values[name])
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        for name, now in _rlimits().items():
            if name in self.rlimits and now != self.rlimits[name]:
                _set_rlimit(name, self.rlimits[name])
        return leaked


def capture() -> Snapshot:
    """The state now, to compare with (and in the cell process restore) after the variant."""
    knobs = _torch_knobs()
    return Snapshot(
        knobs=knobs,
        values={name: get() for name, (get, _) in knobs.items()},
        cwd=os.getcwd(),
        environ=dict(os.environ),
        threads={t.ident for t in threading.enumerate() if t.ident is not None},
        rlimits=_rlimits(),
    )
