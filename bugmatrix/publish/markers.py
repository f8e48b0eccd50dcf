"""The hidden marker that makes an issue *the* issue of one finding, so a finding is never filed twice.

Every body and comment the nightly writes carries one HTML comment (``<!-- bugmatrix-finding {...} -->``): the ``key``
is the finding's identity on every night, the ``digest`` what it holds (never its messages), so an unchanged finding
adds no comment. A marker inside code is quoted text, never a marker.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re

import msgspec

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


class Marker(msgspec.Struct, frozen=True):
    """One marker: the finding's key, what the issue was told on which night, and what the finding held then."""

    key: str
    state: State
    night: str
    digest: str = ""
    cells: tuple[str, ...] = ()
    title: str = ""

    def render(self) -> str:
        """The HTML comment; ``--`` never appears in it (JSON may escape any character), so no id can end it early."""
        data = msgspec.to_builtins(self)
        if not self.title:
            del data["title"]
        text = json.dumps(data, sort_keys=True, ensure_ascii=True).replace("--", "-\\u002d")
        return f"<!-- {MARKER} {text} -->"

    def but(self, state: State, night: str) -> Marker:
        """This finding's marker for a comment: another state on another night (the title belongs to the issue only)."""
        return msgspec.structs.replace(self, state=state, night=night, title="")


def parse_markers(text: str) -> list[Marker]:
    """Every well-formed marker in ``text`` outside code, in order; a hand-edited, broken one is not a marker."""
    found = []
    for match in _FOUND.finditer(without_code(text or "")):
        try:
            found.append(_DECODER.decode(match.group(1)))
        except msgspec.DecodeError:
            continue
    return found


def without_code(text: str) -> str:
    """``text`` with its fenced blocks and code spans blanked: what is quoted there is never a marker."""
    return _SPAN.sub(" ", _FENCE.sub("\n", text))


_DECODER = msgspec.json.Decoder(Marker)


def digest_of(finding: Finding) -> str:
    """What the finding holds, in 12 hex digits (a flaky variant flips by definition: there only which cells flap counts)."""
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
