"""Reuse a previous night's results (its reports directory: ``$BUGMATRIX_PREVIOUS`` or ``--reuse-from DIR``) for a cell
whose inputs cannot have moved (the same :class:`InputKey`). Never reused: results too old (or dated in the future), a
file the history did not record with this digest, a flaky pair, a crash, timeout, incomplete run or failed install.
Callers that measure or compare runs pass no policy."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.cell.runfile import RunRecord
from bugmatrix.documents.run import load_run_file
from bugmatrix.errors import BugmatrixError
from bugmatrix.run.inputkey import InputKey, differences

if TYPE_CHECKING:
    from bugmatrix.run.command import CellSpec

__all__ = [
    "NO_REUSE_ENV",
    "PREVIOUS_ENV",
    "Decision",
    "ReuseOptions",
    "ReusePolicy",
    "decide",
    "previous_run_files",
    "reuse_policy",
    "split_reuse_options",
]

PREVIOUS_ENV = "BUGMATRIX_PREVIOUS"
NO_REUSE_ENV = "BUGMATRIX_NO_REUSE"
#: Outcomes that are no observation of the bug: a cell that recorded one runs again rather than carry it forward.
REOBSERVE = frozenset({Outcome.CRASHED, Outcome.TIMEOUT})


@dataclass(frozen=True)
class ReuseOptions:
    """A cell session's own options, taken from its arguments before the rest goes to pytest."""

    no_reuse: bool = False
    previous: Path | None = None


def split_reuse_options(args: Sequence[str]) -> tuple[ReuseOptions, list[str]]:
    """``--no-reuse`` and ``--reuse-from DIR`` out of a session's arguments; the rest is pytest's."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--no-reuse", action="store_true")
    parser.add_argument("--reuse-from", type=Path)
    known, rest = parser.parse_known_args(list(args))
    return ReuseOptions(known.no_reuse, known.reuse_from), rest


@dataclass(frozen=True)
class ReusePolicy:
    """Reuse is on: where the previous results are, how old they may be, which (variant, cell) pairs are re-observed."""

    previous: Path
    max_age_days: int
    flaky: frozenset[tuple[str, str]] = frozenset()
    #: Run file, relative to ``previous`` -> (date, digest) the newest night of its history recorded.
    recorded: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    now: dt.datetime | None = None  # None: the moment of the decision


@dataclass(frozen=True)
class Decision:
    """The previous run whose results stand for tonight (None: the cell runs), and why, in one line."""

    reused: RunRecord | None
    why: str
    source: Path | None = None


def reuse_policy(
    max_age_days: int,
    options: ReuseOptions = ReuseOptions(),
    *,
    environ: Mapping[str, str] | None = None,
    warn: Callable[[str], None] = print,
    history_of: Callable[[Path], tuple[frozenset[tuple[str, str]], Mapping[str, tuple[str, str]]]],
) -> ReusePolicy | None:
    """The policy a cell session runs under; None (run everything) without previous results, with ``--no-reuse``, at max age 0."""
    if options.previous is not None and not options.previous.is_dir():  # named by hand: a typo is an error, not "reuse nothing"
        msg = f"--reuse-from {options.previous}: no such directory of previous results; pass a reports directory (runs/, history.jsonl)"
        raise BugmatrixError(msg)
    env = os.environ if environ is None else environ
    previous = options.previous or (Path(env[PREVIOUS_ENV]) if env.get(PREVIOUS_ENV) else None)
    if options.no_reuse or env.get(NO_REUSE_ENV, "") not in ("", "0") or previous is None or max_age_days <= 0:
        return None
    if not previous.is_dir():
        warn(f"reuse: {previous} is not a directory of previous results; every cell runs")
        return None
    try:
        flaky, recorded = history_of(previous / "history.jsonl")
    except BugmatrixError as exc:
        warn(f"reuse: off, the history that names flaky results and the run files' digests cannot be read ({exc})")
        return None
    return ReusePolicy(previous, max_age_days, flaky, dict(recorded))


def previous_run_files(previous: Path, cell_id: str) -> list[Path]:
    """A cell's previous run files: its locked run, then a re-resolved sibling's (the same lock, once a patch is applied)."""
    return [p for p in (previous / "runs" / f"{cell_id}.json", previous / "fresh" / "runs" / f"{cell_id}.json") if p.exists()]


def _why_not(run: RunRecord, name: str, spec: CellSpec, key: InputKey, policy: ReusePolicy) -> str | None:
    if (recorded := policy.recorded.get(name)) is None:
        return f"{name}: no night of {policy.previous / 'history.jsonl'} recorded its digest, so an edit could not be told: not trusted"
    date, digest = recorded
    if run.digest != digest:
        return (
            f"{name} is not the file the night of {date} recorded (its digest {run.digest}, recorded {digest}): edited since, not trusted"
        )
    if run.cell != spec.id or run.pins != dict(spec.pins or {}):
        return f"it records cell {run.cell} with other pins"
    if run.input_key is None:
        return "it recorded no input key (a run without a current lock, or from before keys)"
    if run.input_key["digest"] != key.digest:
        changed = differences(run.input_key.get("parts") or {}, key.parts) or ["the key's digest"]
        return "inputs changed: " + "; ".join(changed)
    if run.install.get("status") != "ok":
        return "its environment did not install then: tried again"
    if not run.complete:
        return "it did not complete"
    if spec.variants and set(run.selected) != set(spec.variants):
        return "it ran another selection of variants"
    odd = sorted(r.id for r in run.results if r.outcome in REOBSERVE)
    if odd:
        return f"it recorded {len(odd)} crashed/timeout result(s) ({odd[0]}): re-observed"
    flaky = sorted(r.id for r in run.results if (r.id, spec.id) in policy.flaky)
    if flaky:
        return f"the history calls {flaky[0]} flaky here: re-observed"
    observed = run.observed or {}
    try:
        when = dt.datetime.fromisoformat(observed["date"])
    except (KeyError, ValueError):
        return "its results carry no date"
    age = ((policy.now or dt.datetime.now(dt.UTC)) - (when if when.tzinfo else when.replace(tzinfo=dt.UTC))).total_seconds() / 86400
    if age < -1 / 24:  # a date ahead (a clock gone wrong, a planted file) would never age past max_age_days
        return f"its results are dated {observed['date'][:10]}, in the future: refused"
    if age > policy.max_age_days:
        return f"its results are from {observed['date'][:10]}, {age:.0f} days ago ([reuse] max_age_days = {policy.max_age_days})"
    return None


def decide(
    policy: ReusePolicy | None, spec: CellSpec, key: InputKey | None, *, unkeyed: str = "", narrowed: Sequence[str] = ()
) -> Decision:
    """Whether the cell runs tonight or a previous run's results stand, and why (one line for the session's log)."""
    if policy is None:
        return Decision(None, "runs: reuse is off (no previous results named, --no-reuse, or max_age_days = 0)")
    if spec.pins is None or key is None:
        return Decision(None, f"runs: not reusable, {unkeyed or 'no input key'}")
    if narrowed:
        return Decision(None, f"runs: pytest arguments narrow or change the run ({' '.join(narrowed)})")
    found = previous_run_files(policy.previous, spec.id)
    if not found:
        return Decision(None, f"runs: no previous run file for it in {policy.previous}")
    reasons = []
    for path in found:
        try:
            run = load_run_file(path)
        except BugmatrixError as exc:
            reasons.append(f"{path.name} cannot be read ({exc})")
            continue
        why = _why_not(run, path.relative_to(policy.previous).as_posix(), spec, key, policy)
        if why is None:
            observed = run.observed or {}
            origin = f"{observed.get('date', '?')}, commit {observed.get('commit', '?')}, {observed.get('run', '?')}"
            return Decision(run, f"reused: inputs unchanged since {origin} ({path})", path)
        reasons.append(why)
    return Decision(None, "runs: the previous run " + reasons[0] + (f" (also: {'; '.join(reasons[1:])})" if reasons[1:] else ""))
