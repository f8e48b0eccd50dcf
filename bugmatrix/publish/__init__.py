"""After the report: findings reach maintainers where they already look (the Pages site, one GitHub issue per finding).

Everything here reads what the report wrote. Pages and issue bodies are Jinja2 templates (:func:`render`), pages
autoescaped; Markdown (``*.md.j2``) quotes run text itself.
"""

from __future__ import annotations

from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

__all__ = ["render"]

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
