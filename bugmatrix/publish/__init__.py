"""After the report: findings reach maintainers where they already look (the Pages site, one GitHub issue per finding).

Everything here reads what the report wrote (a night's ``compat.json`` through :func:`read_compat`). Pages and issue
bodies are Jinja2 templates (:func:`render`), pages autoescaped; Markdown (``*.md.j2``) quotes run text itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

from bugmatrix.documents.compat import Compat
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, read_bytes

__all__ = ["read_compat", "render"]

_ENV = Environment(
    loader=ChoiceLoader([PackageLoader("bugmatrix.publish", "templates"), PackageLoader("bugmatrix", "styles")]),
    autoescape=select_autoescape(disabled_extensions=("md.j2",), default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, **context: Any) -> str:
    """One template of ``bugmatrix/publish/templates/``, filled with ``context``."""
    return _ENV.get_template(template).render(**context)


def read_compat(path: Path, fix: str) -> Compat:
    """A night's ``compat.json``, decoded by its model; a defect is one line naming the file."""
    raw = read_bytes(path, "compat document", fix=fix)
    try:
        return _COMPAT.decode(raw)
    except msgspec.DecodeError as exc:
        decode_json(raw, path, "compat document", fix=fix)  # not JSON at all: the same line as every other reader's
        msg = f"{path}: not a compat document ({exc}); {fix}"
        raise BugmatrixError(msg) from None


_COMPAT = msgspec.json.Decoder(Compat)
