"""Running one variant: requirements, seeds, the timeout, the outcome and what it changed.

One function, :func:`execute_variant`, used the same way in a forked child
(:mod:`~bugmatrix.cell.forkrun`: the usual case) and in the cell process
itself (``--bugmatrix-forks 0``, and inside xdist workers). What it returns,
:class:`Executed`, is plain data that crosses the process boundary as JSON;
the plugin turns it into the run file's record.

* A per-variant timeout (SIGALRM, main thread, as pytest-timeout's signal
  method) turns a hang into ``timeout``; the exception derives from
  BaseException so a variant's own ``except Exception`` cannot swallow it.
  (A hang that never returns to Python is the fork runner's to kill.)
* Any other BaseException a variant raises (KeyboardInterrupt, SystemExit) is
  that variant's result, never the end of the cell.
* Global state is compared before and after (:mod:`~bugmatrix.cell.isolation`):
  what differs is recorded as ``leaked``; in the cell process it is also put
  back, in a child there is nothing to put back.
"""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
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
        return {
            "outcome": self.result.outcome.value,
            "message": self.result.message,
            "signature_matched": self.result.signature_matched,
            "versions": self.versions,
            "duration": self.duration,
            "log": self.log,
            "leaked": list(self.leaked),
            "imported": list(self.imported),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Executed:
        """The inverse of :meth:`to_json`."""
        result = Classified(Outcome(data["outcome"]), str(data["message"]), bool(data["signature_matched"]))
        return cls(
            result,
            {str(k): str(v) for k, v in data["versions"].items()},
            float(data["duration"]),
            str(data["log"]),
            tuple(data["leaked"]),
            tuple(data.get("imported", ())),
        )


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
    """Same environment, same outcome: every variant starts from the same seeds, of the generators the harness owns.

    Those are Python's ``random`` and the device runtime's (the axis ``device_runtime = true`` in matrix.toml
    marks, where the cell installs it). Any other generator belongs to a distribution that may be an axis (or
    absent) in another matrix, so the harness names none: a variant that draws from one seeds it itself, in its
    own code, where the case says which distribution it uses (``docs/cases.md``, "Seeds").
    """
    random.seed(seed)
    runtime = device_runtime()  # the matrix's device runtime axis, where the cell installs it
    if runtime is not None:
        runtime.manual_seed(seed)  # CUDA seeds are queued, not set: this initializes no CUDA


def _dtype(name: str) -> object:
    """``<runtime>.<name>`` (``torch.bfloat16``) where the device runtime axis is installed; the name itself elsewhere."""
    runtime = device_runtime()
    return name if runtime is None else getattr(runtime, name)


_VERSIONS: dict[tuple[tuple[str, tuple[tuple[str, str], ...]], ...], dict[str, str]] = {}


def installed_versions() -> dict[str, str]:
    """axis -> installed version, for the expectations and requirements.

    Read once per axis spec: what is installed does not change while a cell runs, and each read scans
    every distribution's metadata (~50 ms); forked children inherit the answer.
    """
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
