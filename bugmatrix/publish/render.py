"""The site's pages from Jinja2 templates of their own (``bugmatrix/publish/templates/``), autoescaped.

Every string the site shows comes from a report or an issue body that a run
wrote, so escaping is the template engine's job, never ours: the modules of
:mod:`bugmatrix.publish` hand values to :func:`render` and write no markup
themselves. Every page extends ``_page.html.j2``, which inlines the one
stylesheet the report's page inlines too (``bugmatrix/styles/report.css``, a
package resource neither stage owns), so a night's report and the pages
around it look alike.
"""

from __future__ import annotations

from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

__all__ = ["render"]

_ENV = Environment(
    loader=ChoiceLoader([PackageLoader("bugmatrix.publish", "templates"), PackageLoader("bugmatrix", "styles")]),
    autoescape=True,  # HTML and SVG alike: nothing from a run reaches a page unescaped
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, **context: Any) -> str:
    """One template of ``bugmatrix/publish/templates/``, filled with ``context``."""
    return _ENV.get_template(template).render(**context)
