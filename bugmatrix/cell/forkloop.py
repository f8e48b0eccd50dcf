"""The fork runner's loop inside pytest: variants run in forked children, pytest reports each from its child's result.

Children run ahead, up to ``--bugmatrix-forks`` at once, in collection order; each is recorded as it ends, and pytest's
own protocol (reports, JUnit XML, ``-x``) then runs every item in order. A child that reported nothing was killed at
its deadline (``timeout``) or died (``crashed``, with the line of its stderr that says why).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol

import pytest

from bugmatrix.cell.axes import active_spec, device_runtime_axis
from bugmatrix.cell.case import Case, Variant
from bugmatrix.cell.execution import Executed, execute_variant, installed_versions
from bugmatrix.cell.forkrun import ChildEnd, ForkPool
from bugmatrix.cell.outcomes import Classified, Outcome, excerpt, tail
from bugmatrix.cell.requirements import GpuFacts, gpu_facts, unmet_requirements

__all__ = [
    "Ended",
    "ForkedItem",
    "cuda_initialized_here",
    "executed_from",
    "grace",
    "last_words",
    "probe_in_child",
    "run_forked",
    "skipped_here",
]


class ForkedItem(Protocol):
    """What the loop needs of a pytest item that runs a variant."""

    nodeid: str
    variant: Variant
    case: Case

    def timeout(self) -> float: ...


#: Told about each child as it ends: the item, what it gave, and how its process ended.
Ended = Callable[[Any, Executed, ChildEnd], None]
#: Told once, before any fork, about the variants skipped without one (unmet requirements).
Decided = Callable[[list[tuple[Any, Executed]]], None]


def run_forked(
    session: pytest.Session,
    variants: Sequence[ForkedItem],
    children: int,
    gpu: GpuFacts | None,
    decided: Decided,
    ended: Ended,
    until: float | None = None,
) -> None:
    """Fork up to ``children`` of ``variants`` at once; ``ended`` is told as each ends, then pytest runs the items.

    Variants with unmet requirements are skipped without a fork, ``decided`` told of all at once (``gpu`` answers for
    CUDA ones). Past ``until`` (monotonic), :class:`~bugmatrix.cell.forkrun.DeadlinePassed` is raised.
    """
    items, by_node = session.items, {i.nodeid: i for i in variants}
    skips = [(v, skipped) for v in variants if (skipped := skipped_here(v, gpu)) is not None]
    decided(skips)
    done = {v.nodeid for v, _ in skips}
    queue = deque(v for v in variants if v.nodeid not in done)
    with ForkPool(children, until) as pool:
        for index, item in enumerate(items):
            while item.nodeid in by_node and item.nodeid not in done:
                while pool.free and queue:
                    waiting = queue.popleft()
                    timeout = waiting.timeout()
                    pool.start(waiting.nodeid, _child_job(waiting), deadline_s=timeout + grace(timeout))
                end = pool.next_end()
                finished = by_node[str(end.key)]
                ended(finished, executed_from(finished, end), end)
                done.add(str(end.key))
            nextitem = items[index + 1] if index + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)


def skipped_here(item: ForkedItem, gpu: GpuFacts | None) -> Executed | None:
    """The variant's ``skipped`` result when its requirements are unmet (decided without CUDA here), else None: fork it."""
    if item.variant.device == "cuda" and gpu is None:
        return None
    versions = installed_versions()
    reasons = unmet_requirements(item.variant, versions, gpu)
    return Executed(Classified(Outcome.SKIPPED, "; ".join(reasons)), versions, 0.0) if reasons else None


def _child_job(item: ForkedItem) -> Callable[[], dict[str, Any]]:
    return lambda: execute_variant(item.variant, item.case, item.timeout(), restore=False).to_json()


def grace(timeout: float) -> float:
    """How long past its timeout a child gets to stop itself (SIGALRM) before its process group is killed."""
    return max(2.0, 0.1 * timeout)


def executed_from(item: ForkedItem, end: ChildEnd) -> Executed:
    """What a child reported, else how it ended (``timeout`` or ``crashed``); the processes it left join its ``leaked``."""
    if end.result is not None:
        executed = Executed.from_json(end.result)
        return replace(executed, leaked=(*executed.leaked, *end.leaked)) if end.leaked else executed
    log = tail(end.stderr + (f"\n[stdout]\n{end.stdout}" if end.stdout.strip() else ""))
    if end.timed_out:
        message = (
            f"variant still running after {item.timeout():g}s and it did not stop itself (no return to Python): "
            f"its process group was killed after {end.seconds:.0f}s"
        )
        return Executed(Classified(Outcome.TIMEOUT, message), installed_versions(), end.seconds, log, end.leaked)
    last = last_words(end.stderr)
    message = f"the variant's process {end.status} before reporting a result" + (f"; its last words: {last}" if last else "")
    return Executed(Classified(Outcome.CRASHED, excerpt(message)), installed_versions(), end.seconds, log, end.leaked)


def last_words(stderr: str) -> str:
    """The line of a dead process's stderr that says why: faulthandler's "Fatal Python error: ...", else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Extension modules:")]
    return next((line for line in lines if line.startswith("Fatal Python error")), lines[-1] if lines else "")


def _probe() -> dict[str, Any]:
    from bugmatrix.cell.environment import observe_environment

    facts = gpu_facts()  # None: no device runtime here, CUDA variants are skipped saying why
    gpu: dict[str, Any] | None = asdict(facts) if facts is not None else None
    return {"environment": observe_environment(), "gpu": gpu}


def probe_in_child(timeout: float) -> tuple[dict[str, Any], GpuFacts | None]:
    """The environment and what torch sees of the GPU, asked in a forked child given a variant's ``timeout`` (CUDA is initialized there only)."""
    with ForkPool(1) as pool:
        end = pool.call(_probe, deadline_s=timeout + grace(timeout))
    if end.result is None:
        failed = f"the observing process {end.status}: {end.stderr.strip()[-300:]}"
        return {"python": sys.version.split()[0], "observation_failed": failed}, None
    gpu = end.result["gpu"]
    return dict(end.result["environment"]), GpuFacts(**gpu) if gpu is not None else None


def cuda_initialized_here() -> str:
    """A warning when something (a case module, a conftest) initialized CUDA in this process before forking."""
    axis = device_runtime_axis()
    runtime = sys.modules.get(active_spec().get(axis, (("", ""),))[0][1]) if axis else None  # never imported here for the asking
    cuda = getattr(runtime, "cuda", None)
    if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
        return "CUDA was initialized in the cell process before forking (at import?): CUDA variants cannot use it in their children"
    return ""
