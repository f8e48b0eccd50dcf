"""After the report: findings reach maintainers where they already look (the Pages site, one GitHub issue per finding).

Everything here reads what the report wrote; nothing here changes a result. Pages and issue bodies come from
:func:`render`: Jinja2 templates of this package (``templates/``), pages autoescaped (Markdown, ``*.md.j2``, quotes run
text itself), so no markup is written in Python; pages inline ``bugmatrix/styles/report.css``, as the report's does.
"""

from __future__ import annotations

from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

__all__ = ["render"]

_ENV = Environment(
    loader=ChoiceLoader([PackageLoader("bugmatrix.publish", "templates"), PackageLoader("bugmatrix", "styles")]),
    # HTML and SVG alike: nothing from a run reaches a page unescaped; Markdown for GitHub (*.md.j2) escapes itself
    autoescape=select_autoescape(disabled_extensions=("md.j2",), default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, **context: Any) -> str:
    """One template of ``bugmatrix/publish/templates/``, filled with ``context``."""
    return _ENV.get_template(template).render(**context)
