"""Running one variant: requirements, seeds, the timeout, the outcome and what it changed in its process.

The same in a forked child and in the cell process; :class:`Executed` crosses the process boundary as JSON. The timeout
(SIGALRM) raises a BaseException a variant's ``except Exception`` cannot swallow. Process-wide state that differs after
a variant (:class:`Snapshot`) is its ``leaked``, put back where it ran in the cell process.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import pytest

from bugmatrix.cell.axes import active_spec, device_runtime, device_runtime_axis, installed_axis_versions
from bugmatrix.cell.case import Case, SkipVariant, Variant
from bugmatrix.cell.outcomes import Classified, Outcome, classify_outcome, excerpt, tail
from bugmatrix.cell.preload import resolve_attribute
from bugmatrix.cell.runfile import typed_fields

__all__ = ["Executed", "GpuFacts", "execute_variant", "gpu_facts", "installed_versions", "seed_everything", "unmet_requirements"]


class VariantTimeout(BaseException):
    """Raised by the alarm when a variant overruns its timeout."""


@dataclass(frozen=True)
class Executed:
    """What running a variant gave, before it is judged against the expectation."""

    result: Classified
    versions: dict[str, str]
    duration: float
    log: str = ""
    leaked: tuple[str, ...] = ()
    imported: tuple[str, ...] = ()  # modules the variant imported that the cell process had not (fork runner only)

    def to_json(self) -> dict[str, Any]:
        """Plain data: what a child sends to the cell process."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Executed:
        """The inverse of :meth:`to_json`."""
        result = Classified(**typed_fields(Classified, data["result"], "result: "))
        return cls(**typed_fields(cls, {**data, "result": result}, ""))


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise VariantTimeout in the main thread after ``seconds``."""

    def fire(signum: int, frame: object) -> None:
        msg = f"variant still running after {seconds:g}s"
        raise VariantTimeout(msg)

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def seed_everything(seed: int = 0) -> None:
    """Seed the generators the harness owns, ``random`` and the device runtime's; others a variant seeds itself."""
    random.seed(seed)
    runtime = device_runtime()
    if runtime is not None:
        runtime.manual_seed(seed)  # CUDA seeds are queued, not set: this initializes no CUDA


def _dtype(name: str) -> object:
    """``<runtime>.<name>`` (``torch.bfloat16``) where the device runtime axis is installed; the name itself elsewhere."""
    runtime = device_runtime()
    return name if runtime is None else getattr(runtime, name)


_VERSIONS: dict[tuple[tuple[str, tuple[tuple[str, str], ...]], ...], dict[str, str]] = {}


def installed_versions() -> dict[str, str]:
    """axis -> installed version; read once per axis spec (a read scans all metadata, ~50 ms; children inherit it)."""
    key = tuple(sorted(active_spec().items()))
    if key not in _VERSIONS:
        _VERSIONS[key] = {axis: version for axis, (_, version) in installed_axis_versions().items()}
    return dict(_VERSIONS[key])


def _formatted(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


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


def _rlimit_knobs() -> dict[str, tuple[Getter, Setter]]:
    """name -> (get, set) of every resource limit this platform has (none without the resource module)."""
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
            resource.getrlimit(number)
            found[name] = (partial(resource.getrlimit, number), partial(resource.setrlimit, number))
    return found


def _set_environ(values: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(values)


def _change(name: str, before: Any, now: Any) -> str:
    """One ``leaked`` line: what ``name`` was and is (the environment by the variables that differ)."""
    if name == "environment variables":
        return f"{name} " + ", ".join(sorted({k for k, _ in set(now.items()) ^ set(before.items())}))
    if name.startswith("RLIMIT_"):
        import resource

        limits = ["/".join("unlimited" if v == resource.RLIM_INFINITY else str(v) for v in pair) for pair in (before, now)]
        return f"{name} {limits[0]} -> {limits[1]} (soft/hard)"
    return f"{name} {before} -> {now}"


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
    """The process-wide state before a variant ran: each knob's (get, set) and its value then; the threads then."""

    knobs: dict[str, tuple[Getter, Setter]]
    values: dict[str, Any]
    threads: set[int]

    def changes(self) -> list[str]:
        """One line per thing that differs from the snapshot now (nothing is put back)."""
        leaked = []
        for name, (get, _) in self.knobs.items():
            now = get()
            if now != self.values[name]:
                leaked.append(_change(name, self.values[name], now))
        # Non-daemon threads keep a process from exiting.
        new = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive() and not t.daemon]
        return leaked + [f"non-daemon thread {t.name!r} still running" for t in new]

    def restore(self) -> list[str]:
        """Put back what can be put back; one line per thing the variant had changed."""
        leaked = self.changes()
        for name, (get, put) in self.knobs.items():
            if get() != self.values[name]:
                # OSError, ValueError: a lowered hard limit cannot be raised again unprivileged.
                with contextlib.suppress(AttributeError, TypeError, RuntimeError, OSError, ValueError):
                    put(self.values[name])
        return leaked


def capture() -> Snapshot:
    """The state now, to compare with (and in the cell process restore) after the variant."""
    knobs = {
        **_torch_knobs(),
        "cwd": (os.getcwd, os.chdir),
        "environment variables": (lambda: dict(os.environ), _set_environ),
        **_rlimit_knobs(),
    }
    values = {name: get() for name, (get, _) in knobs.items()}
    return Snapshot(knobs, values, {t.ident for t in threading.enumerate() if t.ident is not None})


@dataclass(frozen=True)
class GpuFacts:
    """What the device runtime sees of the GPU (asking initializes CUDA: the fork runner asks once, in a child)."""

    available: bool
    bf16: bool = False
    name: str = ""


def gpu_facts() -> GpuFacts | None:
    """Ask the device runtime now (initializing CUDA where there is a GPU); None where the cell does not install one."""
    runtime = device_runtime()
    if runtime is None:
        return None
    if not runtime.cuda.is_available():
        return GpuFacts(False)
    return GpuFacts(True, bool(runtime.cuda.is_bf16_supported()), runtime.cuda.get_device_name(0))


def unmet_requirements(variant: Variant, versions: Mapping[str, str], gpu: GpuFacts | None = None) -> list[str]:
    """All reasons this variant cannot run with these installed axis versions (``gpu``: facts already known, else asked)."""
    reasons = [f"needs {axis} (not installed here)" for axis in variant.axes if axis not in versions]
    if reasons:
        return reasons
    if variant.device == "cuda":
        axis = device_runtime_axis()
        facts = gpu if gpu is not None else gpu_facts()
        if facts is None or axis is None:
            reasons.append("needs a CUDA GPU, and no device runtime (matrix.toml: device_runtime = true) is installed here to look for one")
        elif not facts.available:
            reasons.append(f"needs a CUDA GPU ({axis} {versions.get(axis, '?')} sees none)")
        elif variant.dtype == "bfloat16" and not facts.bf16:
            reasons.append(f"needs bf16 on {facts.name}")
    need = variant.requires
    reasons += need.unmet(versions)
    if need.api and resolve_attribute(need.api) is None:
        # The axis whose distribution provides the api's top-level module (``torch.amp`` -> the torch axis).
        root = need.api.partition(".")[0]
        owner = next((axis for axis, providers in active_spec().items() if any(m.partition(".")[0] == root for _, m in providers)), None)
        where = f"{owner} {versions[owner]}" if owner in versions else "this cell"
        reasons.append(f"needs {need.api} (absent in {where})")
    return reasons


def execute_variant(variant: Variant, case: Case, timeout: float, *, restore: bool) -> Executed:
    """Check the requirements, run the variant under its timeout, classify; ``restore``: put global state back (in-process runs)."""
    versions = installed_versions()
    reasons = unmet_requirements(variant, versions)
    if reasons:
        return Executed(Classified(Outcome.SKIPPED, "; ".join(reasons)), versions, 0.0)
    seed_everything()
    snapshot = capture()
    modules = set(sys.modules)
    error: BaseException | None = None
    checks = None
    result: Classified | None = None
    log = ""
    start = time.perf_counter()
    try:
        with alarm(timeout):
            checks = variant.fn(variant.device, _dtype(variant.dtype))
    except SkipVariant as exc:
        result = Classified(Outcome.SKIPPED, str(exc))
    except VariantTimeout as exc:
        result, log = Classified(Outcome.TIMEOUT, str(exc)), _formatted(exc)
    except pytest.skip.Exception as exc:
        result = Classified(Outcome.SKIPPED, str(exc.msg))
    except Exception as exc:  # noqa: BLE001 - every failure is data here
        error, log = exc, _formatted(exc)
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt/SystemExit from a variant end that variant only
        result, log = Classified(Outcome.DIFFERENT, excerpt(f"the variant raised {type(exc).__name__}: {exc}")), _formatted(exc)
    duration = time.perf_counter() - start
    leaked = snapshot.restore() if restore else snapshot.changes()
    imported = tuple(sorted(set(sys.modules) - modules))
    return Executed(result or classify_outcome(case.signature, error, checks), versions, duration, tail(log), tuple(leaked), imported)
