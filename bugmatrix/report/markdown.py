"""The text pages (compat.md, the step summary, the terminal) from Jinja templates; Markdown escaped in one place.

No Markdown library escapes for GitHub's dialect, so :func:`escape_md` is the one hand-written helper; the templates
apply it as the ``md`` and ``code`` filters (autoescape is for HTML).
"""

from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader

from bugmatrix.report.model import REUSED

__all__ = ["TEXT", "code", "escape_md"]

#: Characters that change Markdown structure or style; backslash-escaped (GFM honours these in tables too).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: Identifiers that may go verbatim in a code span: no backtick (ends the span), no pipe (ends the cell).
_PLAIN_ID = re.compile(r"[\w.:+\-\[\]/=, ]+")


def escape_md(text: object) -> str:
    """Make arbitrary text safe inside a Markdown table cell (one line, no markup, no HTML)."""
    out = _MD_SPECIAL.sub(r"\\\1", str(text))
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(out.split())


def code(text: object) -> str:
    """An id as a code span when it needs no escaping (a code span shows backslashes literally), else escaped text."""
    text = str(text)
    return f"`{text}`" if _PLAIN_ID.fullmatch(text) else escape_md(text)


#: The text templates (``*.md.j2``, ``terminal.txt.j2``): a line holding only a tag leaves nothing behind.
TEXT = Environment(
    loader=PackageLoader("bugmatrix.report", "templates"),
    autoescape=False,  # noqa: S701 -- Markdown escapes with the md and code filters
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEXT.filters.update(md=escape_md, code=code)
TEXT.globals["reused"] = REUSED
