"""The issue tracker: GitHub through the ``gh`` CLI (:class:`GhIssues`, all filing needs of it; tests put a fake ``gh`` on PATH).

Bodies go through standard input, never the command line. Who wrote what is part of the answer (filing's trust rule),
in one spelling (:func:`login`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass

from bugmatrix.errors import BugmatrixError

__all__ = ["GhIssues", "Issue", "login"]


@dataclass(frozen=True)
class Issue:
    """An issue as the tracker lists it: enough to read its markers and to refer to it."""

    number: int
    open: bool
    title: str
    body: str
    comments: tuple[str, ...] = ()
    url: str = ""
    author: str = ""  # who opened it and who wrote each comment, as :func:`login` spells them
    comment_authors: tuple[str, ...] = ()


def login(name: str) -> str:
    """One spelling of a login: a GitHub App's bot (``github-actions[bot]``) as gh lists it (``app/github-actions``)."""
    name = name.strip()
    return f"app/{name[: -len('[bot]')]}" if name.endswith("[bot]") else name


def _issue(item: dict) -> Issue:
    listed = list(item.get("comments") or ())
    return Issue(
        int(item["number"]),
        str(item["state"]).upper() == "OPEN",
        str(item.get("title", "")),
        str(item.get("body") or ""),
        tuple(str(c.get("body") or "") for c in listed),
        str(item.get("url", "")),
        _login_of(item.get("author")),
        tuple(_login_of(c.get("author")) for c in listed),
    )


def _login_of(who: object) -> str:
    """The login of an ``author`` or ``actor`` object gh answers with."""
    return login(str(who.get("login") or "")) if isinstance(who, dict) else ""


class GhIssues:
    """GitHub issues of ``repo`` (``owner/name``) via ``gh``; filing takes any object with these methods (tests: an in-memory one)."""

    #: gh's own ceiling for one listing; a repository with more bugmatrix issues than this has bigger problems.
    LIMIT = 1000

    def __init__(self, repo: str, gh: str = "gh") -> None:
        self.repo = repo
        found = shutil.which(gh)
        if found is None:
            msg = f"{gh}: the GitHub CLI is not on PATH; install it (https://cli.github.com) or file the bodies by hand"
            raise BugmatrixError(msg)
        self.gh = found

    def _run(self, args: list[str], stdin: str | None = None, *, api: bool = False) -> str:
        command = [self.gh, *args] if api else [self.gh, *args, "--repo", self.repo]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            msg = f"gh {' '.join(args[:2])} --repo {self.repo} failed ({said}); check GH_TOKEN (issues: write) and that the repository has issues"
            raise BugmatrixError(msg)
        return done.stdout

    def search(self, query: str) -> list[Issue]:
        """Open and closed issues matching ``query`` (GitHub's issue search syntax)."""
        fields = "number,state,title,body,comments,url,author"
        out = self._run(["issue", "list", "--state", "all", "--search", query, "--limit", str(self.LIMIT), "--json", fields])
        try:
            return [_issue(item) for item in json.loads(out or "[]")]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            msg = f"gh issue list --repo {self.repo}: unexpected answer ({exc}); is gh older than 2.0?"
            raise BugmatrixError(msg) from None

    def open_issue(self, title: str, body: str) -> str:
        """Open an issue; its URL."""
        return self._run(["issue", "create", "--title", title, "--body-file", "-"], stdin=body).strip()

    def comment(self, number: int, body: str) -> None:
        """Add a comment to issue ``number``."""
        self._run(["issue", "comment", str(number), "--body-file", "-"], stdin=body)

    def closer(self, number: int) -> str:
        """Who closed issue ``number`` last (its events); ``""`` when no event says."""
        out = self._run(["api", "--paginate", f"repos/{self.repo}/issues/{number}/events"], api=True)
        decoder, text, events = json.JSONDecoder(), out.strip(), []
        try:
            while text:  # --paginate: one JSON array per page, back to back
                page, at = decoder.raw_decode(text)
                events += [e for e in page if isinstance(e, dict) and e.get("event") == "closed"] if isinstance(page, list) else []
                text = text[at:].lstrip()
        except ValueError:
            msg = f"gh api repos/{self.repo}/issues/{number}/events: unexpected answer; is gh older than 2.0?"
            raise BugmatrixError(msg) from None
        return _login_of(events[-1].get("actor")) if events else ""

    def permission(self, who: str) -> str:
        """``who``'s role on the repository (``admin``, ``maintain``, ``write``, ``triage``, ``read``); ``""`` for none."""
        if not who or "/" in who:
            return ""  # nobody, or an app: apps are never collaborators
        try:
            out = self._run(["api", f"repos/{self.repo}/collaborators/{who}/permission"], api=True)
            answer = json.loads(out or "{}")
        except (BugmatrixError, ValueError):
            return ""  # not a collaborator (404), or an answer that grants nothing
        return str(answer.get("role_name") or answer.get("permission") or "") if isinstance(answer, dict) else ""
