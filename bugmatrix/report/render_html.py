"""index.html: one self-contained file (inline CSS/JS, no network), Jinja2 with autoescape.

Escaping is a library's job, never ours: strings from run files reach the
page through Jinja2's autoescaped ``{{ }}``. Only two things are assembled
here, both from :func:`markupsafe.escape`-d pieces: the evidence links and
each table entry's attribute list (see :class:`_Entry` for why).

The heavy lifting (rows, labels, classes, anchors) is done here in Python so
the template is a plain loop with no macros or lookups per entry: 1,000 cells
x 20 variants render in about a third of a second on a 2-core machine
(``nox -s benchmark`` measures it against the 1 s budget).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from bugmatrix.releases.notes import group_headline, release_groups
from bugmatrix.report import OUTCOMES, axes_of, is_flagged, label, short, split_axes
from bugmatrix.report.agreement import per_case
from bugmatrix.report.boundaries import Boundary
from bugmatrix.report.diff import INFORMATIONAL, Change
from bugmatrix.report.merge import tracking_text
from bugmatrix.report.overview import overview

__all__ = ["render_html"]

_ENV = Environment(
    loader=PackageLoader("bugmatrix.report", "templates"),
    autoescape=select_autoescape(["html", "j2"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
#: Only plain web links become anchors; ``javascript:`` and friends stay text.
_URL = re.compile(r"https?://[^\s<>\"']+[^\s<>\"'.,;:)\]]")
#: The page stays usable with thousands of changes (a broken index fails every cell).
CHANGE_LIMIT = 200
#: Above this many cells the per-cell table starts collapsed: the boundary pictures are the overview.
OPEN_TABLE_CELLS = 24


def _attr_name(axis: str) -> str:
    """A pins key as part of a ``data-pin-*`` attribute name.

    Autoescaping protects attribute *values*; a name such as ``x onclick=...``
    from a hand-edited run file would still add an attribute, so names are
    reduced to the characters HTML allows there.
    """
    return re.sub(r"[^a-z0-9-]", "-", axis.lower()) or "axis"


def _linkify(text: str) -> Markup:
    """Evidence text with its http(s) URLs as links (to upstream issues); everything else escaped."""
    out, last = [], 0
    for match in _URL.finditer(text):
        out += [escape(text[last : match.start()]), Markup('<a href="{0}" rel="noreferrer noopener">{0}</a>').format(match.group())]
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def _cells(compat: dict[str, Any]) -> list[dict[str, Any]]:
    varying, _ = split_axes(compat)
    cells = []
    for cell in compat["cells"]:
        pins = cell.get("pins") or {}
        env = cell.get("environment") or {}
        observed = ", ".join(f"{k} {env[k]}" for k in ("python", "torch", "cuda", "lightning", "transformers") if env.get(k))
        cells.append({
            "id": cell["id"],
            "label": " · ".join(f"{short(compat, a)} {pins[a]}" for a in varying if a in pins) or cell["id"],
            "pins": [(_attr_name(a), str(v)) for a, v in pins.items()],
            "title": f"{cell['id']} — observed: {observed or 'nothing (not installed)'}",
            "failed": (cell.get("install") or {}).get("status") == "failed",
        })  # fmt: skip
    return cells


class _Escaped(dict[str, str]):
    """``markupsafe.escape`` memoised: case names, cell ids and labels repeat thousands of times."""

    def __missing__(self, text: str) -> str:
        self[text] = value = str(escape(text))
        return value


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    case: str
    name: str
    workaround_for: str
    case_start: bool
    entries: Markup  # the row's <td>s, escaped and joined (see _entry)


def _short_list(names: list[str]) -> str:
    return f"{names[0]} +{len(names) - 1}" if len(names) > 1 else "".join(names)


def _td_attrs(esc: _Escaped, cls: str, outcome: str, case: str, cell_id: str, anchor: str = "") -> Markup:
    """The ``<td>``'s attributes, each value through (memoised) markupsafe.escape."""
    text = f'class="{esc[cls]}" data-outcome="{esc[outcome]}" data-case="{esc[case]}" data-cell="{esc[cell_id]}"'
    if anchor:
        text += f' id="{esc[anchor]}"'
    return Markup(text)  # noqa: S704 -- every value went through markupsafe.escape above


def _entry(esc: _Escaped, case: str, cell_id: str, entry: dict[str, Any] | None, anchor: str) -> str:
    """One ``<td>``, already HTML: every text through (memoised) markupsafe.escape.

    Built here rather than in the template: at 1,000 cells x 20 variants the
    template's per-entry prints (a Markup object each) were most of a render.
    """
    if entry is None:
        return f'<td {_td_attrs(esc, "na", "", case, cell_id)} title="not in this cell\'s run">·</td>'
    outcome, verdict = entry["outcome"], entry.get("verdict") or ""
    # Outlined: differs from its expectation, or is listed under "Changes since baseline".
    flagged = is_flagged(verdict)
    cls = f"o-{outcome}" + (" flag" if flagged or anchor else "")
    duration = entry.get("duration_s")
    message, log = entry.get("message") or "(no message recorded)", entry.get("log") or ""
    summary = label(outcome) + (f" ({verdict})" if flagged or verdict == "new" else "")
    workarounds = entry.get("workarounds") or []
    works = _short_list(workarounds)  # the first working workaround (+N): keeps columns narrow enough for 1280 px
    note = f"expected: {entry.get('expected') or '— (no expectation covers this version)'} · verdict {verdict or '—'}" + (
        f" · {duration:.2f} s" if isinstance(duration, int | float) else ""
    )
    detail = f"{message}\n\n{log}" if log else message
    return "".join((
        f"<td {_td_attrs(esc, cls, outcome, case, cell_id, anchor)}><details><summary>{esc[summary]}",
        f' <span class="wk">→ {esc[works]}</span>' if works else "",
        "</summary>",
        f'<div class="x wk">works here: {esc[", ".join(workarounds)]}</div>' if workarounds else "",
        f'<div class="x">{esc[note]}</div><pre>{esc[detail]}</pre></details></td>',
    ))  # fmt: skip


def _rows(compat: dict[str, Any], cells: list[dict[str, Any]], anchors: dict[tuple[str, str], str]) -> list[_Row]:
    """Everything the table shows, flattened so the template only loops and prints."""
    rows, previous_case, esc = [], None, _Escaped()
    for variant in compat["variants"]:
        per_cell = compat["results"].get(variant["id"], {})
        entries = [_entry(esc, variant["case"], c["id"], per_cell.get(c["id"]), anchors.get((variant["id"], c["id"]), "")) for c in cells]
        rows.append(_Row(
            id=variant["id"], case=variant["case"], name=f"{variant['variant']}[{variant['device']}]",
            workaround_for=(variant["workaround_for"] or "") if variant["kind"] == "workaround" else "",
            case_start=variant["case"] != previous_case,
            entries=Markup("\n    ".join(entries)),  # noqa: S704 -- _entry escaped every text
        ))  # fmt: skip
        previous_case = variant["case"]
    return rows


def _evidence(compat: dict[str, Any]) -> list[tuple[str, Markup]]:
    """One line per case variant (its CPU and CUDA rows share the evidence)."""
    seen: dict[str, Markup] = {}
    for v in compat["variants"]:
        key = f"{v['case']}::{v['variant']}"
        if v.get("evidence") and key not in seen:
            seen[key] = _linkify(v["evidence"])
    return list(seen.items())


def render_html(
    compat: dict[str, Any], changes: list[Change], history: Mapping[str, Any] | None = None, boundary: Boundary | None = None
) -> str:
    """The whole report as one HTML string.

    ``history`` maps variant ids to their :class:`~bugmatrix.report.history.VariantHistory`
    (since when, timeline, flaky cells); ``boundary`` is :func:`~bugmatrix.report.boundaries.pictures`
    when the caller already computed it for compat.md and the terminal.
    """
    shown = [c for c in changes if c.kind not in INFORMATIONAL]
    # Listed changes link to their table entry; ids only where needed keeps the page small.
    anchors = {(c.variant_id, c.cell_id): f"e{i}" for i, c in enumerate(shown[:CHANGE_LIMIT])}
    cells = _cells(compat)
    _, shared = split_axes(compat)
    return _ENV.get_template("index.html.j2").render(
        compat=compat,
        cells=cells,
        rows=_rows(compat, cells, anchors),
        changes=[(c, anchors.get((c.variant_id, c.cell_id), "")) for c in shown[:CHANGE_LIMIT]],
        hidden_changes=max(0, len(shown) - CHANGE_LIMIT),
        informational=len(changes) - len(shown),
        legend=[(o, label(o)) for o in OUTCOMES],
        axes=[(_attr_name(a), a) for a in axes_of(compat)],
        shared=", ".join(f"{short(compat, a)} {v}" for a, v in shared.items()),
        environments=compat.get("environments", []),
        evidence=_evidence(compat),
        overview=overview(compat, history, boundary),
        agreement=per_case(compat),
        tracking=tracking_text(compat),
        release_groups=[(g, group_headline(g)) for g in release_groups(compat.get("releases") or [])],
        table_open=len(cells) <= OPEN_TABLE_CELLS,
        has_history=bool(history),
    )
