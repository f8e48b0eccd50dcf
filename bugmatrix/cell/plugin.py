"""The pytest plugin: collects ``cases/*.py``, runs each variant where the runner says, records a run file.

By default each variant runs in a child forked after one import of the stack (:mod:`~bugmatrix.cell.forkrun`); children
run ahead in collection order and pytest's protocol reports each item from its child's result. ``--bugmatrix-forks 0``
and xdist workers run variants in-process. The cell process never initializes CUDA.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
import threading
import time
from argparse import ArgumentTypeError
from collections import deque
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bugmatrix import values
from bugmatrix.cell.axes import active_spec, device_runtime_axis, parse_spec, set_active_spec, spec_from_matrix_file
from bugmatrix.cell.case import Case, Variant, case_of_module
from bugmatrix.cell.cellspec import CellOptions, read_options
from bugmatrix.cell.descendants import become_subreaper, die_with, die_with_runner, kill_descendants
from bugmatrix.cell.environment import describe_environment, observe_environment
from bugmatrix.cell.execution import Executed, GpuFacts, execute_variant, gpu_facts, installed_versions, unmet_requirements
from bugmatrix.cell.forkrun import ChildEnd, DeadlinePassed, ForkPool
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.outcomes import Classified, Outcome, classify_outcome, excerpt, judge, tail
from bugmatrix.cell.preload import ImportFailure, checked_modules, import_check, preload, uncovered_imports
from bugmatrix.cell.recording import (
    DIED_INLINE,
    PROPERTY,
    CellDeadline,
    RunState,
    WorkerWatch,
    crash_record,
    expire,
    uncovered_results,
    worker_pid,
)
from bugmatrix.cell.runfile import VariantRecord
from bugmatrix.cell.runners import Fork, Inline, Runner, Xdist, default_workers
from bugmatrix.errors import BugmatrixError

__all__ = ["CaseFile", "VariantItem", "runner_of"]

#: Who started this process, asked first: a cell dies with its runner from here on (no orphan writing on).
STARTED_BY = die_with_runner()

SPEC_DESC = (
    "the cell's spec file (JSON, written by bugmatrix.run.command): cell, run file, JUnit file, pins, axes, "
    "case environment, planned variants, axis spec, input key, origin; relative paths are from where pytest starts"
)
RUN_FILE_DESC = "write the run file here (default: the spec's, else $BUGMATRIX_REPORTS or build/reports, /runs/<cell>.json)"
CELL_DESC = "cell id recorded in the run file (default: the spec's, else system, the current environment as it is)"
TIMEOUT_DESC = "per-variant timeout in seconds; a variant still running then is recorded as timeout"
RESUME_DESC = "keep the results already in the run file and skip those variants (resume an interrupted run)"
CELL_DEADLINE_DESC = (
    "seconds the whole cell may run (default: the spec's cell_deadline_s, [harness] in matrix.toml; 0: none); then what "
    "still runs is killed, the unfinished variants are recorded as timeout and the run file is written complete"
)
FORKS_DESC = (
    "run each variant in a process forked from this one, up to N at once (default: $BUGMATRIX_WORKERS or 2); "
    "0: run them in this process (xdist workers always do)"
)

DEFAULT_TIMEOUT = 300.0
HARNESS_ROOT = Path(__file__).resolve().parents[2]

# All on the config's stash.
STATE_KEY = pytest.StashKey["RunState"]()
OPTIONS_KEY = pytest.StashKey[CellOptions]()
PRELOADED_KEY = pytest.StashKey[bool]()  # this process imported what its variants need
CHECKED_KEY = pytest.StashKey[float]()  # seconds this process spent on the environment's import check
LEFT_THREADS_KEY = pytest.StashKey[dict[threading.Thread, str]]()  # non-daemon threads variants left -> who left them
UNCOVERED_KEY = pytest.StashKey[dict[str, set[str]]]()  # package -> variants that imported it in their child
EXIT_KEY = pytest.StashKey[int]()
FORKED_KEY = pytest.StashKey[bool]()  # the fork runner ran this session's variants
STARTED_KEY = pytest.StashKey[float]()  # time.monotonic() at configure: the cell deadline's start
ITEMS_KEY = pytest.StashKey[dict[str, "VariantItem"]]()  # variant id -> its item (what a deadline record needs)
CELL_DEADLINE_KEY = pytest.StashKey[float | None]()  # seconds the whole cell may run (None: no deadline)
DEADLINE_KEY = pytest.StashKey[CellDeadline]()  # the cell deadline's thread (in-process and xdist's controller)
RUNNER_KEY = pytest.StashKey[Runner]()  # how this process runs variants (runner_of), read once


class VariantMismatch(Exception):
    """Observed outcome differs from the expectation: fails the pytest test."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bugmatrix", "bug reproduction matrix")
    group.addoption("--bugmatrix-spec", default=None, metavar="FILE", help=SPEC_DESC)
    group.addoption("--bugmatrix-run-file", default=None, help=RUN_FILE_DESC)
    group.addoption("--bugmatrix-cell", default=None, help=CELL_DESC)
    group.addoption("--bugmatrix-timeout", type=values.seconds, default=None, help=TIMEOUT_DESC)
    group.addoption("--bugmatrix-resume", action="store_true", help=RESUME_DESC)
    group.addoption("--bugmatrix-forks", type=int, default=None, metavar="N", help=FORKS_DESC)
    group.addoption("--bugmatrix-cell-deadline", type=values.seconds_or_zero, default=None, metavar="SECONDS", help=CELL_DEADLINE_DESC)
    parser.addini("bugmatrix_timeout", TIMEOUT_DESC, default=str(DEFAULT_TIMEOUT))


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def runner_of(config: pytest.Config) -> Runner:
    """This process's runner, from its command line: xdist's workers run inline; else ``-n``, then ``--bugmatrix-forks``."""
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers < 0:  # xdist takes -n -2 and starts no worker
        msg = f"-n {workers}: give a number of xdist workers (0: none), or auto"
        raise pytest.UsageError(msg)
    if is_worker(config):
        return Inline()
    if getattr(config.option, "dist", "no") != "no":
        return Xdist(workers if isinstance(workers, int) else 0)
    chosen = config.getoption("--bugmatrix-forks")
    children = default_workers() if chosen is None else chosen
    if children < 0:
        msg = f"--bugmatrix-forks {children}: give a number of processes (0: run variants in this process)"
        raise pytest.UsageError(msg)
    return Fork(children) if children and hasattr(os, "fork") else Inline()


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml plugin reads --junitxml
def pytest_configure(config: pytest.Config) -> None:
    """Every option is read once, here: a bad one (spec, axis spec, -n, forks, timeout, resumed run file) is a usage error now."""
    try:
        _configure(config)
    except BugmatrixError as exc:
        raise pytest.UsageError(str(exc)) from None


def _configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "bugmatrix_variant: a case variant collected from cases/")
    # The cell's spec file (--bugmatrix-spec), with --bugmatrix-cell / --bugmatrix-run-file on top.
    path = config.getoption("--bugmatrix-spec")
    options = read_options(Path(config.invocation_params.dir, path)) if path else CellOptions()
    cell, run_file = config.getoption("--bugmatrix-cell"), config.getoption("--bugmatrix-run-file")
    options = config.stash[OPTIONS_KEY] = dataclasses.replace(options, cell=cell or options.cell, run_file=run_file or options.run_file)
    if options.junit and not config.option.xmlpath:
        config.option.xmlpath = str(Path(config.invocation_params.dir, options.junit))
    spec = options.axis_spec
    matrix = next((m for m in (Path(config.rootpath, "matrix.toml"), HARNESS_ROOT / "matrix.toml") if m.exists()), None)
    if spec is None and matrix is None:
        msg = "no axis spec: pass --bugmatrix-spec (the runner writes one) or run from a checkout with matrix.toml"
        raise pytest.UsageError(msg)
    set_active_spec(parse_spec(spec) if spec is not None else spec_from_matrix_file(matrix))
    runner = config.stash[RUNNER_KEY] = runner_of(config)
    timeout_of(config)  # a bad bugmatrix_timeout ini value too (the option itself argparse checks)
    config.stash[LEFT_THREADS_KEY] = {}
    config.stash[UNCOVERED_KEY] = {}
    config.stash[STARTED_KEY] = time.monotonic()
    if owns_its_processes(config):  # what a variant leaves comes back here to be killed; this dies with its parent
        become_subreaper()
        die_with(STARTED_BY)
    if is_worker(config):
        return
    # Under the fork runner the environment is observed in a child, so CUDA stays untouched here.
    observe = (lambda: probe_in_child(timeout_of(config))[0]) if runner.forks else observe_environment
    state = config.stash[STATE_KEY] = RunState(config, options, observe, exclusive=is_a_cell(config))
    config.pluginmanager.register(state, "bugmatrix-recorder")
    if runner.in_workers and owns_its_processes(config):
        watch = WorkerWatch()
        config.pluginmanager.register(watch, "bugmatrix-worker-watch")
        state.leaked_by = lambda report: watch.leaked_by(worker_pid(getattr(report, "node", None)))
    # Seconds the whole cell may run: --bugmatrix-cell-deadline, else the spec's cell_deadline_s; None (or 0): none.
    value = config.getoption("--bugmatrix-cell-deadline")
    value = options.cell_deadline_s if value is None else value
    if value is not None and value < 0:
        msg = f"--bugmatrix-cell-deadline {value:g}: give a number of seconds (0: no deadline)"
        raise pytest.UsageError(msg)
    deadline = config.stash[CELL_DEADLINE_KEY] = float(value) if value else None
    if deadline is not None and not runner.forks and not config.option.collectonly:  # the fork runner's loop checks it
        config.stash[DEADLINE_KEY] = CellDeadline(deadline, lambda: expire(state, deadline, partial(_unfinished, config)))
        config.stash[DEADLINE_KEY].start()


def is_a_cell(config: pytest.Config) -> bool:
    """This pytest runs a cell (a spec, a run file, a cell id, or cases/ to collect), not this repository's own tests."""
    if any(config.getoption(name) for name in ("--bugmatrix-spec", "--bugmatrix-run-file", "--bugmatrix-cell")):
        return True
    return any("cases" in Path(str(arg)).parts for arg in config.invocation_params.args)  # a node id too: cases/x.py::v[cpu]


def owns_its_processes(config: pytest.Config) -> bool:
    """This process is a cell's (its pytest, or an xdist worker), not a ``pytest.main()`` inside another program."""
    return is_a_cell(config) and (is_worker(config) or is_the_program(config))


def _unfinished(config: pytest.Config, variant_id: str, message: str) -> VariantRecord:
    """How the cell deadline records a variant it ended: judged by its item where this process collected it."""
    item = config.stash.get(ITEMS_KEY, {}).get(variant_id)
    if item is None:  # xdist's controller collects nothing
        return crash_record(variant_id, message, outcome=Outcome.TIMEOUT)
    return item.record(Executed(Classified(Outcome.TIMEOUT, message), installed_versions(), 0.0))


def pytest_report_header(config: pytest.Config) -> str:
    runner = config.stash[RUNNER_KEY]
    if runner.forks:  # the environment line comes when the variants start, observed in a child
        return f"bugmatrix: {runner.describe()}"
    return f"bugmatrix: {describe_environment(observe_environment())}; {runner.describe()}"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".py" and file_path.parent.name == "cases" and not file_path.name.startswith("_"):
        return CaseFile.from_parent(parent, path=file_path)
    return None


class CaseFile(pytest.Module):
    """A case module: yields one item per declared variant, device and dtype."""

    def collect(self) -> Iterator[pytest.Item]:
        try:
            case = case_of_module(vars(self.obj), self.path.stem, self.path)
        except BugmatrixError as exc:
            raise self.CollectError(str(exc)) from None
        for variant in case.variants:
            item = VariantItem.from_parent(self, name=VariantId.parse(variant.id).short)
            item.variant, item.case = variant, case
            item.add_marker("bugmatrix_variant")
            yield item


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    options = config.stash[OPTIONS_KEY]
    allowed, built_with = options.axes, options.environment or {}
    state = config.stash.get(STATE_KEY, None)
    done = set(state.previous) if state else set(getattr(config, "workerinput", {}).get("bugmatrix_resumed", ()))
    planned = set(options.variants) if options.variants is not None else None
    keep, drop = [], []
    for item in items:
        if not isinstance(item, VariantItem):
            keep.append(item)
            continue
        variant = item.variant
        if planned is not None:  # the plan decided: exactly its variants run here, so `selected` is the plan's list
            stays = variant.id in planned
        else:  # a variant with an environment of its own runs only in the cell built with it, and nothing else runs there
            stays = (allowed is None or set(variant.axes) <= set(allowed)) and variant.env.to_json() == built_with
        (keep if stays and variant.id not in done else drop).append(item)
        if state is not None and variant.id in state.recovered:
            # Found running in a process that died: the full record (kind, expectation) now that the variant is known.
            state.previous[variant.id] = item.record(Executed(Classified(Outcome.CRASHED, DIED_INLINE), installed_versions(), 0.0))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if state is not None:
        config.stash[ITEMS_KEY] = {i.variant.id: i for i in keep if isinstance(i, VariantItem)}


def timeout_of(config: pytest.Config) -> float:
    """``--bugmatrix-timeout``, else the ini value: positive and finite either way."""
    value = config.getoption("--bugmatrix-timeout")
    if value is not None:
        return float(value)
    try:
        return values.seconds(str(config.getini("bugmatrix_timeout")))
    except ArgumentTypeError as exc:
        msg = f"bugmatrix_timeout (ini): {exc}"
        raise pytest.UsageError(msg) from None


class VariantItem(pytest.Item):
    """Runs one variant (or reports what its forked child ran), classifies it, and compares with the expectation."""

    case: Case
    variant: Variant
    executed: Executed | None = None  # what its forked child reported, or the failed import says
    output: tuple[str, str] = ("", "")  # its child's stdout and stderr

    def timeout(self) -> float:
        return timeout_of(self.config)

    def runtest(self) -> None:
        executed = self.executed
        if executed is None:
            executed = self._run_here()
        for name, text in zip(("stdout", "stderr"), self.output, strict=True):
            if text:
                self.add_report_section("call", name, text)
        self.finish(executed)

    def run_in_child(self) -> dict[str, Any]:
        """What a forked child runs: the variant, sent back as plain data."""
        return execute_variant(self.variant, self.case, self.timeout(), restore=False).to_json()

    def _run_here(self) -> Executed:
        """In this process (inline, or an xdist worker): named in the run file first; leftover threads remembered."""
        preload_once(self.config, [self])
        state = self.config.stash.get(STATE_KEY, None)
        if state is not None:
            state.start(self.variant.id)
        before = set(threading.enumerate())
        executed = execute_variant(self.variant, self.case, self.timeout(), restore=True)
        if owns_its_processes(self.config):  # a subreaper: whatever the variant left running is below this process
            left_running = kill_descendants()
            executed = dataclasses.replace(executed, leaked=(*executed.leaked, *left_running)) if left_running else executed
        left = self.config.stash[LEFT_THREADS_KEY]
        for thread in set(threading.enumerate()) - before:
            if thread.is_alive() and not thread.daemon:
                left[thread] = self.variant.id
        return executed

    def record(self, executed: Executed) -> VariantRecord:
        """The run file's record: what ran, judged against the expectation for the installed versions."""
        variant, result = self.variant, executed.result
        expectation = variant.expectation(executed.versions)
        expected = expectation.outcome if expectation else None
        # What its environment requires of an axis of this cell (a pin workaround: it runs where the pin holds).
        axis_distributions = {canonicalize_name(d) for providers in active_spec().values() for d, _ in providers}
        return VariantRecord(
            id=variant.id,
            case=variant.case_id,
            variant=variant.name,
            device=variant.device,
            dtype=variant.dtype,
            kind=variant.kind,
            workaround_for=variant.workaround_for,
            counterpart=variant.counterpart,
            outcome=result.outcome,
            expected=expected,
            verdict=judge(result.outcome, expected),
            signature_matched=result.signature_matched,
            message=result.message,
            duration_s=round(executed.duration, 3),
            evidence=expectation.evidence if expectation else "",
            log=tail(executed.log),
            leaked=executed.leaked,
            axes=tuple(variant.axes),
            pinned=", ".join(r for r in variant.env.requires if canonicalize_name(Requirement(r).name) in axis_distributions),
        )

    def finish(self, executed: Executed) -> None:
        """Attach the record to the report; raise if it contradicts the expectation (skip if it did not run)."""
        record = self.record(executed)
        # JSON-safe: xdist ships user properties from worker to controller.
        self.user_properties.append((PROPERTY, json.loads(json.dumps(dataclasses.asdict(record)))))
        if record.outcome is Outcome.SKIPPED:
            pytest.skip(record.message)
        if record.verdict.flagged:
            expected = record.expected.value if record.expected else "?"
            msg = f"{record.verdict.value}: expected {expected}, observed {record.outcome.value}: {record.message}"
            raise VariantMismatch(msg)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, VariantMismatch):
            return f"{self.variant.id}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.variant.id


def preload_once(config: pytest.Config, items: list[VariantItem]) -> None:
    """Import what ``items`` will import, once per process, before the first of them runs (and say what, in the terminal)."""
    if config.stash.get(PRELOADED_KEY, False):
        return
    config.stash[PRELOADED_KEY] = True
    done = preload([i.variant for i in items], {i.case.id: i.case for i in items}.values())
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None and not is_worker(config) and (done.names or done.failed):
        failed = f"; not importable (the variants will say why): {'; '.join(done.failed)}" if done.failed else ""
        seconds = done.seconds + config.stash.get(CHECKED_KEY, 0.0)  # the check imported most of it
        terminal.write_line(f"bugmatrix: imported once before the variants ran: {', '.join(done.names)} ({seconds:.1f}s){failed}")


#: How a variant reads where its cell's stack does not import and its bug is not raised there.
DOES_NOT_IMPORT = "the stack does not import here"


def check_environment(config: pytest.Config) -> ImportFailure | None:
    """The environment's import check, in the process that runs the variants (not xdist's controller)."""
    modules = checked_modules()
    if config.stash[RUNNER_KEY].in_workers or not modules:
        return None
    started = time.perf_counter()
    failure = import_check(modules)
    config.stash[CHECKED_KEY] = time.perf_counter() - started
    return failure


def observed_at_import(item: VariantItem, failure: ImportFailure) -> Executed:
    """Where the stack does not import: classified from the failure if ``at_import``, else skipped (unmet versions first)."""
    versions = installed_versions()
    reasons = [f"needs {a} (not installed here)" for a in item.variant.axes if a not in versions] or item.variant.requires.unmet(versions)
    if reasons:
        return Executed(Classified(Outcome.SKIPPED, "; ".join(reasons)), versions, 0.0)
    if not item.variant.at_import:
        return Executed(Classified(Outcome.SKIPPED, excerpt(f"{DOES_NOT_IMPORT} ({failure.line})")), versions, 0.0)
    found = classify_outcome(item.case.signature, failure.error)
    return Executed(Classified(found.outcome, excerpt(failure.line), found.signature_matched), versions, 0.0, tail(failure.log))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """The fork runner: run the variants in forked children, then let pytest report each item from its child's result."""
    config = session.config
    runner = config.stash[RUNNER_KEY]
    variants = [i for i in session.items if isinstance(i, VariantItem)]
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    failure = None if config.option.collectonly or not variants else check_environment(config)
    if failure is not None:  # nothing runs: each variant's result is what the failed import says of it, reported by pytest's loop
        if terminal is not None:
            terminal.write_line(f"bugmatrix: {DOES_NOT_IMPORT}: {failure.line}", yellow=True)
        for item in variants:
            item.executed = observed_at_import(item, failure)
        return None
    if not runner.forks or config.option.collectonly or not variants:
        return None  # pytest's own loop: inline, xdist, or nothing of ours to run
    if session.testsfailed and not config.option.continue_on_collection_errors:
        msg = f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} during collection"
        raise session.Interrupted(msg)
    preload_once(config, variants)
    # The imported stack leaves the collector's generations: a child's collection never touches (copies) its pages.
    gc.freeze()
    state = config.stash[STATE_KEY]
    environment, gpu = probe_in_child(timeout_of(config))
    state.environment = state.environment or environment
    if terminal is not None:
        terminal.write_line(f"bugmatrix: {describe_environment(state.environment)}")
        warning = cuda_initialized_here()
        if warning:
            terminal.write_line(f"bugmatrix: warning: {warning}", yellow=True)
    deadline = config.stash[CELL_DEADLINE_KEY]
    until = config.stash[STARTED_KEY] + deadline if deadline is not None else None
    try:
        _run_forked(session, variants, runner.workers, gpu, until)
    except DeadlinePassed:  # every child is killed by now
        assert deadline is not None
        expire(state, deadline, partial(_unfinished, config))
    config.stash[FORKED_KEY] = True
    return True


def _run_forked(session: pytest.Session, variants: list[VariantItem], children: int, gpu: GpuFacts | None, until: float | None) -> None:
    """Fork up to ``children`` variants at once, recording each as it ends, and let pytest report each item in turn.

    Unmet requirements skip a variant without a fork; past ``until`` (monotonic), :class:`DeadlinePassed` is raised.
    """
    state, items, by_node = session.config.stash[STATE_KEY], session.items, {i.nodeid: i for i in variants}
    roots = {module.split(".")[0] for providers in active_spec().values() for _, module in providers}
    skips = [(v, skipped) for v in variants if (skipped := skipped_here(v, gpu)) is not None]
    for item, executed in skips:
        item.executed = executed
    state.add(*(item.record(executed) for item, executed in skips))
    done = {v.nodeid for v, _ in skips}
    queue = deque(v for v in variants if v.nodeid not in done)
    with ForkPool(children, until) as pool:
        for index, item in enumerate(items):
            while item.nodeid in by_node and item.nodeid not in done:
                while pool.free and queue:
                    waiting = queue.popleft()
                    timeout = waiting.timeout()
                    pool.start(waiting.nodeid, waiting.run_in_child, deadline_s=timeout + grace(timeout))
                end = pool.next_end()
                finished = by_node[str(end.key)]
                executed = executed_from(finished, end)
                finished.executed, finished.output = executed, (end.stdout, end.stderr)
                for package in uncovered_imports(executed.imported, roots):  # each child paid for importing it
                    session.config.stash[UNCOVERED_KEY].setdefault(package, set()).add(finished.variant.id)
                state.add(finished.record(executed))  # the run file has it now, whatever happens to this process next
                done.add(str(end.key))
            nextitem = items[index + 1] if index + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)


def skipped_here(item: VariantItem, gpu: GpuFacts | None) -> Executed | None:
    """The variant's ``skipped`` result when its requirements are unmet (decided without CUDA here), else None: fork it."""
    if item.variant.device == "cuda" and gpu is None:
        return None
    versions = installed_versions()
    reasons = unmet_requirements(item.variant, versions, gpu)
    return Executed(Classified(Outcome.SKIPPED, "; ".join(reasons)), versions, 0.0) if reasons else None


def grace(timeout: float) -> float:
    """How long past its timeout a child gets to stop itself (SIGALRM) before its process group is killed."""
    return max(2.0, 0.1 * timeout)


def executed_from(item: VariantItem, end: ChildEnd) -> Executed:
    """What a child reported, else how it ended (``timeout`` or ``crashed``); the processes it left join its ``leaked``."""
    if end.result is not None:
        executed = Executed.from_json(end.result)
        return dataclasses.replace(executed, leaked=(*executed.leaked, *end.leaked)) if end.leaked else executed
    log = tail(end.stderr + (f"\n[stdout]\n{end.stdout}" if end.stdout.strip() else ""))
    if end.timed_out:
        message = (
            f"variant still running after {item.timeout():g}s and it did not stop itself (no return to Python): "
            f"its process group was killed after {end.seconds:.0f}s"
        )
        return Executed(Classified(Outcome.TIMEOUT, message), installed_versions(), end.seconds, log, end.leaked)
    # Why it died: faulthandler's "Fatal Python error: ...", else the last line of its stderr.
    lines = [line.strip() for line in end.stderr.splitlines() if line.strip() and not line.startswith("Extension modules:")]
    last = next((line for line in lines if line.startswith("Fatal Python error")), lines[-1] if lines else "")
    message = f"the variant's process {end.status} before reporting a result" + (f"; its last words: {last}" if last else "")
    return Executed(Classified(Outcome.CRASHED, excerpt(message)), installed_versions(), end.seconds, log, end.leaked)


def _probe() -> dict[str, Any]:
    facts = gpu_facts()  # None: no device runtime here, CUDA variants are skipped saying why
    return {"environment": observe_environment(), "gpu": dataclasses.asdict(facts) if facts is not None else None}


def probe_in_child(timeout: float) -> tuple[dict[str, Any], GpuFacts | None]:
    """The environment and what torch sees of the GPU, asked in a forked child (CUDA is initialized there only)."""
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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    uncovered = config.stash.get(UNCOVERED_KEY, {})
    for module, variants in sorted(uncovered.items()):
        terminalreporter.write_line(
            f"bugmatrix: {len(variants)} variant(s) imported {module} in their own process, each paying for it (e.g. "
            f"{sorted(variants)[0]}): add {module!r} to the case's Case(imports=...) to import it once for all"
        )
    state = config.stash.get(STATE_KEY, None)
    # Results no expectation covers pass the run (docs/report.md), and are said as loudly as a failure.
    for device, lines in uncovered_results({**state.previous, **state.results}.values() if state else ()).items():
        terminalreporter.write_sep("=", f"bugmatrix: {len(lines)} {device} result(s) no expectation covers", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(f"  {line}", red=True)


@pytest.hookimpl(tryfirst=True)  # before the recorder's last write: the deadline must not add to a closed run
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[EXIT_KEY] = int(exitstatus)
    deadline = session.config.stash.get(DEADLINE_KEY, None)
    if deadline is not None:
        deadline.cancel()


def is_the_program(config: pytest.Config) -> bool:
    """pytest is this process's program (``python -m pytest ...``), not a ``pytest.main()`` call inside another one."""
    return list(config.invocation_params.args) == sys.argv[1:]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The run file is final: exit now where a non-daemon thread a variant left (named) would keep the process alive, or
    where the fork runner's cell process would spend seconds tearing down the stack it imported."""
    left = {t: v for t, v in config.stash.get(LEFT_THREADS_KEY, {}).items() if t.is_alive()}
    if not left and not (config.stash.get(FORKED_KEY, False) and is_the_program(config)):
        return
    sys.stdout.flush()
    if left:
        names = ", ".join(f"{t.name!r} (left by {v})" for t, v in left.items())
        sys.stderr.write(f"bugmatrix: exiting without waiting for {len(left)} non-daemon thread(s) still running: {names}\n")
    sys.stderr.flush()
    os._exit(config.stash.get(EXIT_KEY, 1))
