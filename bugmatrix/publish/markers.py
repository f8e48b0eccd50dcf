"""The hidden marker that makes an issue *the* issue of one finding, so a finding is never filed twice.

Every issue body the nightly writes starts with one HTML comment, invisible on
GitHub, and every comment it adds carries one too::

    <!-- bugmatrix-finding {"cells": ["py311-torch2.11.0-pl2.6.6"], "digest": "3f9a2c1d7e4b",
         "key": "regression:autocast_cache::core[cpu]", "night": "2026-11-23", "state": "opened", "title": "..."} -->

The ``key`` (the finding's kind and subject: a variant, a cell, or a release)
is the identity: the same finding has the same key on every night. The
``digest`` says what the finding holds (its cells, variants and outcomes;
never its messages, which carry addresses and timings), so a night that
finds nothing new adds no comment. ``state`` is what the issue was last
told: ``opened``, ``updated`` (the finding changed), ``back-to-baseline``.

Lookup is ``gh issue list --search`` for the marker's word (:data:`SEARCH`;
the visible footer carries it too, so the search finds it whether or not it
indexes comments), and then the markers decide: search is only a
pre-filter, never the judge of which issue is which.

A marker inside a code span or a fenced block is quoted text, not a marker:
a run's message or log (which the bodies show as code) can never speak for
the nightly. Who may write a marker at all is decided by filing
(:mod:`~bugmatrix.publish.filing`: trusted authors only).
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import dataclass

from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.night import Finding

__all__ = ["MARKER", "SEARCH", "Marker", "State", "digest_of", "file_stem", "finding_marker", "parse_markers", "without_code"]

MARKER = "bugmatrix-finding"
#: What ``gh issue list --search`` asks for: every issue the nightly wrote (open or closed).
SEARCH = f'"{MARKER}" in:body'
_FOUND = re.compile(r"<!-- " + MARKER + r" (\{.*?\}) -->")
#: A fenced block (``` or ~~~, up to three spaces in), to its closing fence or the end of the text.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}\1[`~]*[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
#: A code span: a backtick run, then text, then a run of the same length.
_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)


class State(enum.StrEnum):
    """What an issue was last told about its finding."""

    OPENED = "opened"
    UPDATED = "updated"
    BACK = "back-to-baseline"


@dataclass(frozen=True)
class Marker:
    """One marker: the finding's key, what the issue was told on which night, and what the finding held then."""

    key: str
    state: State
    night: str
    digest: str = ""
    cells: tuple[str, ...] = ()
    title: str = ""

    def render(self) -> str:
        """The HTML comment; ``--`` never appears in it (JSON may escape any character), so no id can end it early."""
        data = {"key": self.key, "state": self.state.value, "night": self.night, "digest": self.digest, "cells": list(self.cells)}
        if self.title:
            data["title"] = self.title
        text = json.dumps(data, sort_keys=True, ensure_ascii=True).replace("--", "-\\u002d")
        return f"<!-- {MARKER} {text} -->"

    def but(self, state: State, night: str) -> Marker:
        """This finding's marker for a comment: another state on another night (the title belongs to the issue only)."""
        return Marker(self.key, state, night, self.digest, self.cells)


def parse_markers(text: str) -> list[Marker]:
    """Every well-formed marker in ``text`` outside code, in order; a hand-edited, broken one is not a marker."""
    found = []
    for match in _FOUND.finditer(without_code(text or "")):
        try:
            data = json.loads(match.group(1))
            cells = tuple(str(c) for c in data.get("cells", ()))
            found.append(
                Marker(
                    str(data["key"]),
                    State(data["state"]),
                    str(data["night"]),
                    str(data.get("digest", "")),
                    cells,
                    str(data.get("title", "")),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return found


def without_code(text: str) -> str:
    """``text`` with its fenced blocks and code spans blanked: what is quoted there is never a marker."""
    return _SPAN.sub(" ", _FENCE.sub("\n", text))


def digest_of(finding: Finding) -> str:
    """What the finding holds, in 12 hex digits: kind, subject, cells, variants, and each change's outcome (flaky: its cells only).

    A flaky variant's outcome flips from night to night by definition; what is
    news there is which cells flap, so only they count.
    """
    outcomes = [] if finding.kind is ChangeKind.FLAKY else sorted((c.variant_id, c.cell_id, str(c.after or "")) for c in finding.changes)
    held = [str(finding.kind), finding.subject, sorted(finding.cells), sorted(finding.variants), outcomes]
    return hashlib.sha256(json.dumps(held).encode()).hexdigest()[:12]


def finding_marker(finding: Finding, night: str, title: str) -> Marker:
    """The marker that opens a finding's issue."""
    return Marker(finding.key, State.OPENED, night, digest_of(finding), finding.cells, title)


def file_stem(key: str) -> str:
    """A file name for a key: readable, and unique through a hash of the key (``regression-autocast_cache-core-cpu-1a2b3c4d``)."""
    readable = re.sub(r"[^A-Za-z0-9_.]+", "-", key).strip("-.")[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
