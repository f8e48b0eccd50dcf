"""The pytest plugin: collects ``cases/*.py``, runs each variant, records a run file.

Design notes (why it is built this way):

* Case modules hold no test boilerplate: :class:`CaseFile` finds the module's
  ``Case`` (validated by :func:`~bugmatrix.cell.case.case_of_module`, the same
  check the planner's loader applies) and yields one item per declaration.
* A variant's outcome is computed in the process that ran it and attached to
  the report as a user property. The run file is written by the *controlling*
  process only (the xdist controller, or pytest itself without xdist), from
  ``pytest_runtest_logreport``. That gives one writer, and it also sees the
  report xdist synthesises when a worker dies: a segfault or ``os.abort()``
  becomes ``crashed`` while xdist restarts the worker and the rest goes on.
* A per-variant timeout (SIGALRM, main thread, as pytest-timeout's signal
  method) turns a hang into ``timeout``; the exception derives from
  BaseException so a variant's own ``except Exception`` cannot swallow it.
  Any other BaseException a variant raises (KeyboardInterrupt, SystemExit) is
  that variant's result, never the end of the cell.
* Global state is captured before and restored after every variant
  (:mod:`~bugmatrix.cell.isolation`); what a variant leaked is recorded on it.
* The run file is rewritten atomically after every result, so an interrupted
  run keeps everything recorded so far, says ``complete: false``, and
  ``--bugmatrix-resume`` skips what it already recorded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import random
import signal
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bugmatrix.cell.axes import installed_axis_versions, parse_spec, set_active_spec, spec_from_matrix_file
from bugmatrix.cell.case import Case, SkipVariant, Variant, case_of_module
from bugmatrix.cell.ids import VariantId
from bugmatrix.cell.isolation import capture
from bugmatrix.cell.outcomes import Classified, Outcome, Verdict, classify_outcome, excerpt, judge, tail
from bugmatrix.cell.runfile import RunRecord, VariantRecord, load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic

__all__ = ["CaseFile", "VariantItem", "variant_id_of_node"]

RUN_FILE_DESC = "write the run file here (default: $BUGMATRIX_REPORTS or build/reports, /runs/<cell>.json)"
CELL_DESC = "cell id recorded in the run file (default: system, the current environment as it is)"
PINS_DESC = "the cell's requested pins as axis=version,... (recorded as requested)"
REQUESTED_DESC = "axis=latest,...: pins a profile's latest/latest-pre resolved to (recorded as tracked: requested and resolved)"
AXES_DESC = "run only variants whose axes are all among these (comma-separated); a matrix cell passes its pinned axes"
AXIS_SPEC_DESC = "JSON: axis -> [[distribution, module], ...] (written by bugmatrix.run.command; default: read matrix.toml)"
TIMEOUT_DESC = "per-variant timeout in seconds; a variant still running then is recorded as timeout"
RESUME_DESC = "keep the results already in the run file and skip those variants (resume an interrupted run)"
INPUT_KEY_DESC = "JSON: the cell's input key (written by bugmatrix.run.inputkey), recorded so a later night can reuse these results"
ORIGIN_DESC = "JSON: date, commit and run of this run (written by bugmatrix.run.runner), recorded as the results' origin"

PROPERTY = "bugmatrix"
DEFAULT_TIMEOUT = 300.0
HARNESS_ROOT = Path(__file__).resolve().parents[2]

STATE_KEY = pytest.StashKey["RunState"]()
VARIANT_KEY = pytest.StashKey[Variant]()


class VariantTimeout(BaseException):
    """Raised by the alarm when a variant overruns its timeout."""


class VariantMismatch(Exception):
    """Observed outcome differs from the expectation: fails the pytest test."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bugmatrix", "bug reproduction matrix")
    group.addoption("--bugmatrix-run-file", default=None, help=RUN_FILE_DESC)
    group.addoption("--bugmatrix-cell", default=None, help=CELL_DESC)
    group.addoption("--bugmatrix-pins", default="", help=PINS_DESC)
    group.addoption("--bugmatrix-requested", default="", help=REQUESTED_DESC)
    group.addoption("--bugmatrix-axes", default=None, help=AXES_DESC)
    group.addoption("--bugmatrix-axis-spec", default=None, help=AXIS_SPEC_DESC)
    group.addoption("--bugmatrix-timeout", type=float, default=None, help=TIMEOUT_DESC)
    group.addoption("--bugmatrix-resume", action="store_true", help=RESUME_DESC)
    group.addoption("--bugmatrix-input-key", default=None, help=INPUT_KEY_DESC)
    group.addoption("--bugmatrix-origin", default=None, help=ORIGIN_DESC)
    parser.addini("bugmatrix_timeout", TIMEOUT_DESC, default=str(DEFAULT_TIMEOUT))


def variant_id_of_node(nodeid: str) -> str | None:
    """``cases/autocast_cache.py::core[cpu]`` -> ``autocast_cache::core[cpu]`` (the file name is the case id)."""
    found = VariantId.from_node(nodeid)
    return str(found) if found else None


class RunState:
    """Per-session recording state, kept on ``config.stash`` (controller side)."""

    def __init__(self, config: pytest.Config) -> None:
        self.cell = config.getoption("--bugmatrix-cell") or "system"
        run_file = config.getoption("--bugmatrix-run-file")
        # Default: the local output directory (git ignores it), never the committed reference in reports/.
        output = os.environ.get("BUGMATRIX_REPORTS") or Path(config.rootpath, "build", "reports")
        self.path = Path(run_file) if run_file else Path(output, "runs", f"{self.cell}.json")
        self.pins = parse_pins(config.getoption("--bugmatrix-pins"))
        requested = parse_pins(config.getoption("--bugmatrix-requested"), option="--bugmatrix-requested")
        self.tracked = {axis: {"requested": r, "resolved": self.pins.get(axis, "")} for axis, r in requested.items()}
        keyword, marks = config.getoption("keyword", ""), config.getoption("markexpr", "")
        self.deselected_by = " ".join(p for p in (f"-k {keyword}" if keyword else "", f"-m {marks}" if marks else "") if p)
        self.started = now()
        self.results: dict[str, VariantRecord] = {}
        self.previous: dict[str, VariantRecord] = {}
        self.selected: set[str] = set()
        self.environment: dict[str, Any] | None = None
        self.input_key = parse_json_option(config.getoption("--bugmatrix-input-key"), "--bugmatrix-input-key")
        self.origin = parse_json_option(config.getoption("--bugmatrix-origin"), "--bugmatrix-origin")
        if config.getoption("--bugmatrix-resume") and self.path.exists():
            try:
                self.previous = {r.id: r for r in load_run_file(self.path).results}
            except BugmatrixError as exc:
                raise pytest.UsageError(str(exc)) from None

    def add(self, record: VariantRecord) -> None:
        self.results[record.id] = record
        self.write(finished="")

    def write(self, finished: str) -> None:
        if self.environment is None:
            from bugmatrix.cell.environment import observe_environment

            self.environment = observe_environment()
        merged = {**self.previous, **self.results}
        run = RunRecord(
            cell=self.cell,
            pins=self.pins,
            axes=list(self.pins),
            tracked=self.tracked,
            environment=self.environment,
            started=self.started,
            finished=finished,
            results=[merged[k] for k in sorted(merged)],
            selected=sorted(self.selected | set(self.previous)),
            deselected_by=self.deselected_by,
            complete=bool(finished) and self.selected <= set(merged),
            input_key=self.input_key,
            origin=self.origin,
        )
        write_json_atomic(self.path, run.to_json())


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")  # datetime.UTC is 3.11+; cells run 3.10


def parse_pins(text: str, option: str = "--bugmatrix-pins") -> dict[str, str]:
    """``python=3.11,torch=2.4.1`` -> dict (order kept: it is the display order); a malformed pair is a usage error."""
    pins: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        axis, sep, version = pair.partition("=")
        if not sep or not axis or not version:
            msg = f"{option}: {pair!r} is not axis=version"
            raise pytest.UsageError(msg)
        pins[axis] = version
    return pins


def parse_json_option(text: str | None, option: str) -> dict[str, Any] | None:
    """A JSON object given on the command line (the runner's input key and origin), or None; anything else is a usage error."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{option}: not JSON ({exc.msg})"
        raise pytest.UsageError(msg) from None
    if not isinstance(value, dict):
        msg = f"{option}: expected a JSON object"
        raise pytest.UsageError(msg)
    return value


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _configure_axes(config: pytest.Config) -> None:
    text = config.getoption("--bugmatrix-axis-spec")
    try:
        if text:
            set_active_spec(parse_spec(text))
            return
        for root in (Path(config.rootpath), HARNESS_ROOT):
            if (root / "matrix.toml").exists():
                set_active_spec(spec_from_matrix_file(root / "matrix.toml"))
                return
    except BugmatrixError as exc:
        raise pytest.UsageError(str(exc)) from None
    msg = "no axis spec: pass --bugmatrix-axis-spec or run from a checkout with matrix.toml"
    raise pytest.UsageError(msg)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "bugmatrix_variant: a case variant collected from cases/")
    _configure_axes(config)
    if not is_worker(config):
        config.stash[STATE_KEY] = RunState(config)


def pytest_report_header(config: pytest.Config) -> str:
    from bugmatrix.cell.environment import describe_environment, observe_environment

    return "bugmatrix: " + describe_environment(observe_environment())


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
            item.stash[VARIANT_KEY] = variant
            item.case = case
            item.add_marker("bugmatrix_variant")
            yield item


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: workers collect, so they must learn what a resumed run already recorded."""
    state = node.config.stash.get(STATE_KEY, None)
    node.workerinput["bugmatrix_resumed"] = sorted(state.previous) if state else []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    allowed = config.getoption("--bugmatrix-axes")
    state = config.stash.get(STATE_KEY, None)
    done = set(state.previous) if state else set(getattr(config, "workerinput", {}).get("bugmatrix_resumed", ()))
    keep, drop = [], []
    for item in items:
        variant = item.stash.get(VARIANT_KEY, None)
        outside = allowed is not None and variant is not None and not set(variant.axes) <= set(allowed.split(","))
        (drop if outside or (variant is not None and variant.id in done) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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
    """Same environment, same outcome: every variant starts from the same seeds."""
    random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)
    if importlib.util.find_spec("numpy") is not None:
        import numpy

        numpy.random.seed(seed)


def _dtype(name: str) -> object:
    """``torch.<name>`` where torch is installed; the name itself in a torch-free cell."""
    if importlib.util.find_spec("torch") is None:
        return name
    import torch

    return getattr(torch, name)


class VariantItem(pytest.Item):
    """Runs one variant, classifies it, and compares with the expectation."""

    case: Case

    @property
    def variant(self) -> Variant:
        return self.stash[VARIANT_KEY]

    def timeout(self) -> float:
        value = self.config.getoption("--bugmatrix-timeout")
        return float(value if value is not None else self.config.getini("bugmatrix_timeout"))

    def runtest(self) -> None:
        from bugmatrix.cell.requirements import unmet_requirements

        variant = self.variant
        versions = {axis: version for axis, (_, version) in installed_axis_versions().items()}
        reasons = unmet_requirements(variant, versions)
        if reasons:
            self.finish(Classified(Outcome.SKIPPED, "; ".join(reasons)), versions, 0.0, "", [])
            pytest.skip("; ".join(reasons))
        seed_everything()
        snapshot = capture()
        error: BaseException | None = None
        checks = None
        result: Classified | None = None
        log = ""
        start = time.perf_counter()
        try:
            with alarm(self.timeout()):
                checks = variant.fn(variant.device, _dtype(variant.dtype))
        except SkipVariant as exc:
            result = Classified(Outcome.SKIPPED, str(exc))
        except VariantTimeout as exc:
            result = Classified(Outcome.TIMEOUT, str(exc))
            log = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except pytest.skip.Exception as exc:
            result = Classified(Outcome.SKIPPED, str(exc.msg))
        except Exception as exc:  # noqa: BLE001 - every failure is data here
            error = exc
            log = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt/SystemExit from a variant end that variant only
            result = Classified(Outcome.DIFFERENT, excerpt(f"the variant raised {type(exc).__name__}: {exc}"))
            log = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        duration = time.perf_counter() - start
        leaked = snapshot.restore()
        self.finish(result or classify_outcome(self.case.signature, error, checks), versions, duration, log, leaked)

    def finish(self, result: Classified, versions: dict[str, str], duration: float, log: str, leaked: list[str]) -> None:
        """Attach the record to the report; raise if it contradicts the expectation (skip if it did not run)."""
        variant = self.variant
        expectation = variant.expectation(versions)
        expected = expectation.outcome if expectation else None
        verdict = judge(result.outcome, expected)
        record = VariantRecord(
            id=variant.id, case=variant.case_id, variant=variant.name, device=variant.device, dtype=variant.dtype,
            kind=variant.kind, workaround_for=variant.workaround_for, counterpart=variant.counterpart,
            outcome=result.outcome, expected=expected, verdict=verdict, signature_matched=result.signature_matched,
            message=result.message, duration_s=round(duration, 3), evidence=expectation.evidence if expectation else "",
            log=tail(log), leaked=tuple(leaked),
        )  # fmt: skip
        # JSON-safe: xdist ships user properties from worker to controller.
        self.user_properties.append((PROPERTY, json.loads(json.dumps(record.to_json()))))
        if result.outcome is Outcome.SKIPPED:
            pytest.skip(result.message)
        if verdict.flagged:
            msg = f"{verdict.value}: expected {expected.value if expected else '?'}, observed {result.outcome.value}: {result.message}"
            raise VariantMismatch(msg)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, VariantMismatch):
            return f"{self.variant.id}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.variant.id


def record_from_report(report: pytest.TestReport) -> VariantRecord | None:
    """The variant record carried by a report, or a ``crashed`` one for a dead worker."""
    for name, value in report.user_properties:
        if name == PROPERTY:
            return VariantRecord.from_dict(value)
    found = VariantId.from_node(report.nodeid)
    if found is None or not report.failed:
        return None
    # No record but a failure: the process running it died (xdist reports
    # "worker 'gw0' crashed while running ...") or the harness itself broke.
    text = str(report.longrepr) if report.longrepr else "no report"
    return VariantRecord(
        id=str(found), case=found.case, variant=found.name, device=found.device, kind=None, workaround_for=None, outcome=Outcome.CRASHED, expected=None,
        verdict=Verdict.NEW_FAILURE_MODE, signature_matched=False,
        message=excerpt(text.splitlines()[-1] if text.strip() else text), duration_s=round(report.duration, 3), log=tail(text),
    )  # fmt: skip


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.pluginmanager.register(_Recorder(session.config), "bugmatrix-recorder")


class _Recorder:
    """Controller-side hooks bound to one config (so they can reach the state)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def _select(self, nodeids: list[str]) -> None:
        state = self.config.stash.get(STATE_KEY, None)
        if state is not None:
            state.selected |= {v for v in map(variant_id_of_node, nodeids) if v}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._select([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._select(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.config.stash.get(STATE_KEY, None)
        # "call" carries the variant's record; a failed setup/teardown or the
        # report xdist makes for a dead worker ("???") carries none -> crashed.
        if state is None or not (report.when == "call" or report.failed):
            return
        record = record_from_report(report)
        if record is not None and record.id not in state.results:
            state.add(record)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.config.stash.get(STATE_KEY, None)
        if state is None or self.config.option.collectonly:
            return  # listing variants (--collect-only) runs nothing and records nothing
        if state.results or state.previous or state.selected:
            state.write(finished=now())
