"""The issue tracker behind one small interface; the nightly's is GitHub through the ``gh`` CLI.

Three operations are all filing needs: list the issues a search finds (with
their bodies and comments, where the markers are), open one, comment on one.
:class:`GhIssues` runs ``gh`` with the job's token (``GH_TOKEN``); tests put
a fake ``gh`` on PATH, so the same code runs without GitHub. Bodies go
through standard input (``--body-file -``), never the command line: a body
is up to 64 kB and must not be read by a shell. A failing ``gh`` is one line
naming the command and what ``gh`` said.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Protocol

from bugmatrix.errors import BugmatrixError

__all__ = ["GhIssues", "Issue", "IssueTracker"]


@dataclass(frozen=True)
class Issue:
    """An issue as the tracker lists it: enough to read its markers and to refer to it."""

    number: int
    open: bool
    title: str
    body: str
    comments: tuple[str, ...] = ()
    url: str = ""


class IssueTracker(Protocol):
    """What filing needs of a tracker."""

    def search(self, query: str) -> list[Issue]:
        """Open and closed issues matching ``query`` (GitHub's issue search syntax)."""
        ...

    def open_issue(self, title: str, body: str) -> str:
        """Open an issue; its URL."""
        ...

    def comment(self, number: int, body: str) -> None:
        """Add a comment to issue ``number``."""
        ...


def _issue(item: dict) -> Issue:
    """One entry of ``gh issue list --json number,state,title,body,comments,url``."""
    comments = tuple(str(c.get("body") or "") for c in item.get("comments") or ())
    return Issue(
        int(item["number"]),
        str(item["state"]).upper() == "OPEN",
        str(item.get("title", "")),
        str(item.get("body") or ""),
        comments,
        str(item.get("url", "")),
    )


class GhIssues:
    """GitHub issues of ``repo`` (``owner/name``) through the ``gh`` CLI."""

    #: gh's own ceiling for one listing; a repository with more bugmatrix issues than this has bigger problems.
    LIMIT = 1000

    def __init__(self, repo: str, gh: str = "gh") -> None:
        self.repo = repo
        found = shutil.which(gh)
        if found is None:
            msg = f"{gh}: the GitHub CLI is not on PATH; install it (https://cli.github.com) or file the bodies by hand"
            raise BugmatrixError(msg)
        self.gh = found

    def _run(self, args: list[str], stdin: str | None = None) -> str:
        done = subprocess.run([self.gh, *args, "--repo", self.repo], input=stdin, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            msg = f"gh {' '.join(args[:2])} --repo {self.repo} failed ({said}); check GH_TOKEN (issues: write) and that the repository has issues"
            raise BugmatrixError(msg)
        return done.stdout

    def search(self, query: str) -> list[Issue]:
        fields = "number,state,title,body,comments,url"
        out = self._run(["issue", "list", "--state", "all", "--search", query, "--limit", str(self.LIMIT), "--json", fields])
        try:
            listed = json.loads(out or "[]")
            return [_issue(item) for item in listed]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            msg = f"gh issue list --repo {self.repo}: unexpected answer ({exc}); is gh older than 2.0?"
            raise BugmatrixError(msg) from None

    def open_issue(self, title: str, body: str) -> str:
        return self._run(["issue", "create", "--title", title, "--body-file", "-"], stdin=body).strip()

    def comment(self, number: int, body: str) -> None:
        self._run(["issue", "comment", str(number), "--body-file", "-"], stdin=body)
