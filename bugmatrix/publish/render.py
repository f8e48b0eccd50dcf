"""The site's pages from Jinja2 templates of their own (``bugmatrix/publish/templates/``), autoescaped.

Every string the site shows comes from a report or an issue body that a run
wrote, so escaping is the template engine's job, never ours: the modules of
:mod:`bugmatrix.publish` hand values to :func:`render` and write no markup
themselves. The pages share the report's stylesheet
(:func:`bugmatrix.report.render_html.stylesheet`), so a night's report and the
pages around it look alike.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from bugmatrix.report.render_html import stylesheet

__all__ = ["render"]

_ENV = Environment(
    loader=PackageLoader("bugmatrix.publish", "templates"),
    autoescape=True,  # HTML and SVG alike: nothing from a run reaches a page unescaped
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, **context: Any) -> str:
    """One template of ``bugmatrix/publish/templates/``, with the report's stylesheet as ``stylesheet``."""
    return _ENV.get_template(template).render(stylesheet=stylesheet(), **context)
