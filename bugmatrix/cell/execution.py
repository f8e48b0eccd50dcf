"""Running one variant: requirements, seeds, the timeout, the outcome and what it changed.

:func:`execute_variant` runs the same way in a forked child and in the cell process; its :class:`Executed` crosses the
process boundary as JSON. The timeout (SIGALRM) raises a BaseException that a variant's ``except Exception`` cannot
swallow; any other BaseException a variant raises is its result, never the end of the cell.
"""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from bugmatrix.cell.axes import active_spec, device_runtime, installed_axis_versions
from bugmatrix.cell.case import Case, SkipVariant, Variant
from bugmatrix.cell.isolation import capture
from bugmatrix.cell.outcomes import Classified, Outcome, classify_outcome, excerpt, tail

__all__ = ["Executed", "VariantTimeout", "alarm", "execute_variant", "installed_versions", "seed_everything"]


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
        """Plain data: a child sends it to the cell process."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Executed:
        """The inverse of :meth:`to_json`."""
        found = data["result"]
        result = Classified(Outcome(found["outcome"]), found["message"], found["signature_matched"])
        return cls(result, data["versions"], data["duration"], data["log"], tuple(data["leaked"]), tuple(data["imported"]))


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


def execute_variant(variant: Variant, case: Case, timeout: float, *, restore: bool) -> Executed:
    """Check the requirements, run the variant under its timeout, classify; ``restore``: put global state back (in-process runs)."""
    from bugmatrix.cell.requirements import unmet_requirements

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
