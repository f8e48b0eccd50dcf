"""``python -m bugmatrix issues`` (``nox -s issues``): the night's issue bodies filed, one issue per finding, never a duplicate.

The issue with a body's key (:mod:`~bugmatrix.publish.markers`) decides: an open one gets a comment when the finding
changed or came back, a closed one that people closed while it said the same stays closed, else a new issue. An open
issue whose finding tonight judged and did not find gets one back-to-baseline comment; closing is left to people. A
marker counts only from a trusted login, and a closed issue only when a trusted login or triage-or-more closed it.
"""

from __future__ import annotations

import argparse
import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bugmatrix import values
from bugmatrix.cell.outcomes import Outcome
from bugmatrix.errors import BugmatrixError
from bugmatrix.publish import render
from bugmatrix.publish.bodies import Body, read_bodies
from bugmatrix.publish.issue_body import Links
from bugmatrix.publish.markers import SEARCH, Marker, State, parse_markers
from bugmatrix.publish.tracker import GhIssues, Issue, login
from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.model import Compat, load_compat
from bugmatrix.report.night import CELL_FINDINGS

__all__ = [
    "DEFAULT_TRUSTED",
    "Act",
    "Action",
    "add_arguments",
    "closed_knowingly",
    "file_issues",
    "judged",
    "plan_filing",
    "run",
    "trusted_only",
]

#: Outcomes that say nothing about a variant: a result that is one of them judges nothing.
_UNJUDGED = frozenset({Outcome.MISSING, Outcome.INSTALL_FAILED})
#: Who the nightly files as with the workflow's GITHUB_TOKEN, as ``gh issue list`` names it (``gh api user`` cannot say: that token is an app's).
DEFAULT_TRUSTED = "app/github-actions"
#: Roles whose closing of an issue is a maintainer's decision.
_TRIAGE_OR_MORE = frozenset({"triage", "write", "maintain", "admin"})


def trusted_only(issues: list[Issue], trusted: frozenset[str]) -> list[Issue]:
    """The issues a trusted login opened, each with only its trusted comments: where a marker may speak."""
    kept = []
    for issue in issues:
        if issue.author not in trusted:
            continue
        comments = tuple(text for text, who in zip(issue.comments, issue.comment_authors, strict=False) if who in trusted)
        kept.append(replace(issue, comments=comments, comment_authors=(next(iter(trusted)),) * len(comments)))
    return kept


def closed_knowingly(tracker: GhIssues, trusted: frozenset[str]) -> Callable[[Issue], bool]:
    """Whether a closed issue was closed by someone whose closing counts: a trusted login, or triage or more."""

    def counts(issue: Issue) -> bool:
        who = tracker.closer(issue.number)
        return bool(who) and (who in trusted or tracker.permission(who) in _TRIAGE_OR_MORE)

    return counts


class Act(enum.StrEnum):
    """What filing does about one key."""

    OPEN = "open"
    COMMENT = "comment"
    BACK = "back-to-baseline"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Action:
    """One thing to do (or deliberately not do) about one key, and why."""

    act: Act
    key: str
    why: str
    number: int | None = None
    title: str = ""
    text: str = ""

    @property
    def line(self) -> str:
        where = f" #{self.number}" if self.number is not None else ""
        return f"{self.act}{where} {self.key}: {self.why}"


def judged(compat: Compat, marker: Marker) -> bool:
    """Did tonight's report judge what ``marker`` is about? Every cell it names ran and recorded the subject."""
    kind, _, subject = marker.key.partition(":")
    if not marker.cells or any(c not in compat.cell_by_id for c in marker.cells):
        return False
    if kind in {str(k) for k in CELL_FINDINGS} or kind == ChangeKind.RELEASE_DOES_NOT_INSTALL:
        return all(
            not compat.cell_by_id[c].failed and all(e.outcome is not Outcome.MISSING for v in compat.results if (e := compat.entry(v, c)))
            for c in marker.cells
        )
    entries = compat.entries(subject)
    return all(c in entries and entries[c].outcome not in _UNJUDGED for c in marker.cells)


def _last(issue: Issue, key: str) -> Marker | None:
    told = [m for text in (issue.body, *issue.comments) for m in parse_markers(text) if m.key == key]
    return told[-1] if told else None


def _said(last: Marker | None, marker: Marker) -> bool:
    """The issue's last note is this very finding (no back-to-baseline note, the same digest)."""
    return last is not None and last.state is not State.BACK and last.digest == marker.digest


def _for_finding(body: Body, known: list[Issue], night: str, knowingly: Callable[[Issue], bool]) -> Action:
    key, marker = body.marker.key, body.marker
    open_issues = [i for i in known if i.open]
    if open_issues:
        issue = open_issues[-1]
        last = _last(issue, key)
        if _said(last, marker):
            assert last is not None
            return Action(Act.NOTHING, key, f"already says this (as of {last.night})", issue.number)
        back, rest = last.night if last is not None and last.state is State.BACK else "", body.text.partition("\n")[2]
        text = render("comment.md.j2", marker=marker.but(State.UPDATED, night).render(), night=night, back=back, rest=rest, gone=())
        return Action(Act.COMMENT, key, "back again" if back else "changed", issue.number, text=text)
    closed = next((i for i in reversed(known) if knowingly(i)), None)
    if closed is None:
        return Action(Act.OPEN, key, "new finding", title=marker.title, text=body.text)
    if _said(_last(closed, key), marker):
        return Action(Act.NOTHING, key, "closed by people while it was unchanged; not reopened", closed.number)
    text = f"{body.text}\nEarlier: #{closed.number} (closed).\n"
    return Action(Act.OPEN, key, f"new since #{closed.number} was closed", title=marker.title, text=text)


def _for_gone(key: str, issue: Issue, compat: Compat, night: str, report_url: str, troubled: set[str]) -> Action | None:
    """An open issue whose finding is gone tonight: one back-to-baseline note where tonight judged it."""
    last = _last(issue, key)
    if last is None or last.state is State.BACK:
        return None  # already told, or nothing the nightly wrote to compare with
    if key.partition(":")[2] in troubled:
        return Action(Act.NOTHING, key, "its subject has another finding tonight", issue.number)
    if not judged(compat, last):
        return Action(Act.NOTHING, key, "not judged tonight (a cell it names did not run or record it)", issue.number)
    marker, kind = last.but(State.BACK, night).render(), key.partition(":")[0]
    text = render("comment.md.j2", marker=marker, night=night, gone=last.cells, kind=kind, report_url=report_url)
    return Action(Act.BACK, key, "back to the baseline", issue.number, text=text)


def plan_filing(
    bodies: list[Body],
    issues: list[Issue],
    compat: Compat,
    night: str,
    report_url: str = "",
    *,
    knowingly: Callable[[Issue], bool] = lambda _issue: False,
) -> list[Action]:
    """What to do tonight about the trusted ``issues``, per key: tonight's findings first, then the open issues whose finding is gone."""
    by_key: dict[str, list[Issue]] = {}
    for issue in sorted(issues, key=lambda i: i.number):
        opening = next((m for m in parse_markers(issue.body) if m.state is State.OPENED), None)
        if opening is not None:
            by_key.setdefault(opening.key, []).append(issue)
    actions = [_for_finding(body, by_key.get(body.marker.key, []), night, knowingly) for body in bodies]
    tonight = {b.marker.key for b in bodies}
    troubled = {k.partition(":")[2] for k in tonight}  # a subject with any finding tonight is not back to its baseline
    for key, known in sorted(by_key.items()):
        open_issues = [i for i in known if i.open]
        if key not in tonight and open_issues and (action := _for_gone(key, open_issues[-1], compat, night, report_url, troubled)):
            actions.append(action)
    return actions


def file_issues(tracker: GhIssues, actions: list[Action]) -> list[str]:
    """Carry the actions out; one line each (a new issue's URL included)."""
    lines = []
    for action in actions:
        if action.act is Act.OPEN:
            lines.append(f"{action.line} -> {tracker.open_issue(action.title, action.text)}")
            continue
        if action.act in (Act.COMMENT, Act.BACK):
            assert action.number is not None  # planned against an existing issue
            tracker.comment(action.number, action.text)
        lines.append(action.line)
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bugmatrix issues`` (``nox -s issues``)."""
    parser.add_argument("--bodies", type=Path, required=True, help="the report's --issue-bodies directory")
    parser.add_argument("--compat", type=Path, required=True, help="tonight's compat.json (what the night judged)")
    parser.add_argument("--repo", required=True, help="owner/name of the GitHub repository (GH_TOKEN with issues: write)")
    parser.add_argument("--night", required=True, help="tonight's date, YYYY-MM-DD (the report's --date)")
    parser.add_argument("--site-url", default="", help="the Pages site (back-to-baseline comments link tonight's page there)")
    parser.add_argument("--run-url", default="", help="the workflow run, linked where there is no site")
    what = f"a login whose markers count (repeatable; default $BUGMATRIX_TRUSTED_LOGINS, comma-separated, or {DEFAULT_TRUSTED}:"
    parser.add_argument("--trusted", action="append", metavar="LOGIN", help=f"{what} the identity GITHUB_TOKEN files as)")
    parser.add_argument("--dry-run", action="store_true", help="list the issues and print what would be done; write nothing")


def run(args: argparse.Namespace) -> int:
    """Read the bodies and tonight's report, look the issues up, act; print one line per key."""
    night = values.iso_date(args.night, "--night", "; pass the report's --date (YYYY-MM-DD)")
    bodies, compat = read_bodies(args.bodies), load_compat(args.compat)
    names = args.trusted if args.trusted is not None else os.environ.get("BUGMATRIX_TRUSTED_LOGINS", DEFAULT_TRUSTED).split(",")
    trusted = frozenset(login(n) for n in names if n.strip())
    if not trusted:
        msg = "--trusted / BUGMATRIX_TRUSTED_LOGINS names nobody; give the login the workflow files as (app/github-actions)"
        raise BugmatrixError(msg)
    tracker = GhIssues(args.repo)
    links = Links.for_site(args.site_url, compat.profile, night, args.run_url)
    issues = trusted_only(tracker.search(SEARCH), trusted)
    knowingly = closed_knowingly(tracker, trusted)
    actions = plan_filing(bodies, issues, compat, night, links.night or links.run, knowingly=knowingly)
    lines = [a.line for a in actions] if args.dry_run else file_issues(tracker, actions)
    for line in lines:
        print(("would " if args.dry_run else "") + line)
    counts = ", ".join(f"{sum(1 for a in actions if a.act is act)} {act}" for act in Act)
    print(f"issues: {len(bodies)} finding(s); {counts}" + (" (dry run)" if args.dry_run else ""))
    return 0
