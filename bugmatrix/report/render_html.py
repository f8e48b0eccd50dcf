"""index.html: one self-contained file (inline CSS/JS, no network), Jinja2 with autoescape.

The heavy lifting (rows, labels, data attributes) is done here in Python so
the template is a plain loop: 1,000 cells x 20 variants render in well under
a second (see ``nox -s benchmark``).
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from bugmatrix.report import SYMBOLS, label
from bugmatrix.report.diff import Change
from bugmatrix.report.render_md import cell_label

__all__ = ["render_html"]

_ENV = Environment(
    loader=PackageLoader("bugmatrix.report", "templates"),
    autoescape=select_autoescape(["html", "j2"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _rows(compat: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for variant in compat["variants"]:
        per_cell = compat["results"].get(variant["id"], {})
        entries = []
        for cell in compat["cells"]:
            entry = per_cell.get(cell["id"])
            if entry is None:
                entries.append(None)
                continue
            detail = "\n".join(filter(None, [entry.get("message", ""), entry.get("log", "")]))
            entries.append({
                "outcome": entry["outcome"], "label": label(entry["outcome"]), "verdict": entry.get("verdict", ""),
                "expected": entry.get("expected"), "workarounds": entry.get("workarounds", []), "detail": detail,
                "duration": entry.get("duration_s"),
            })  # fmt: skip
        rows.append({"variant": variant, "entries": entries})
    return rows


def render_html(compat: dict[str, Any], changes: list[Change]) -> str:
    """The whole report as one HTML string."""
    cells = [{**c, "label": cell_label(c).replace("\\|", "|")} for c in compat["cells"]]
    return _ENV.get_template("index.html.j2").render(
        compat=compat,
        cells=cells,
        rows=_rows(compat),
        changes=[c for c in changes if c.kind not in ("new-cell", "new-variant")],
        informational=[c for c in changes if c.kind in ("new-cell", "new-variant")],
        legend=[(o, label(o)) for o in SYMBOLS],
        axes=["torch", "lightning", "transformers", "python"],
    )
