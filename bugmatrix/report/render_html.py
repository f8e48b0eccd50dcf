"""index.html: one self-contained file (inline CSS/JS, no network), Jinja2 with autoescape.

The per-cell table's entries are assembled here from :func:`markupsafe.escape`-d pieces (the 1 s budget at full scale).
"""

from __future__ import annotations

import functools
import re

from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from bugmatrix.cell.outcomes import Outcome, Verdict
from bugmatrix.documents.compat import Cell, Entry, Variant
from bugmatrix.report.boundaries import by_case
from bugmatrix.report.diff import FAILING, Change, ChangeKind
from bugmatrix.report.marks import Mark, Picture, boundary_text, flip_edges, symbol
from bugmatrix.report.model import REUSED, Compat, reused_note
from bugmatrix.report.night import NightReport

__all__ = ["SITE_SLOT", "render_html"]

_ENV = Environment(
    # report.css lives in bugmatrix/styles/, the one stylesheet the report and the site (bugmatrix.publish) both include
    loader=ChoiceLoader([PackageLoader("bugmatrix.report", "templates"), PackageLoader("bugmatrix", "styles")]),
    autoescape=select_autoescape(["html", "j2"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
#: The findings box's slot for the site (bugmatrix.publish): empty in the report, filled with the night's issue pages and
#: every night where the page is published. Run text is escaped on the page, so it can never spell these comments.
SITE_SLOT = ("<!--bugmatrix:site-->", "<!--/bugmatrix:site-->")
#: Only plain web links become anchors; ``javascript:`` and friends stay text.
_URL = re.compile(r"https?://[^\s<>\"']+[^\s<>\"'.,;:)\]]")
#: The page stays usable with thousands of changes (a broken index fails every cell).
CHANGE_LIMIT = 200
#: Above this many cells the per-cell table starts collapsed: the boundary pictures are the overview.
OPEN_TABLE_CELLS = 24
#: The environment key of the device runtime a cell saw, recorded beside its axes' versions.
CUDA = "cuda"
#: Change kinds set in the severe colour: what fails the run, and a new way of failing.
SEVERE = FAILING | {ChangeKind.NEW_FAILURE_MODE}


def _attr_name(axis: str) -> str:
    """A pins key as part of a ``data-pin-*`` attribute name (autoescape is for values)."""
    return re.sub(r"[^a-z0-9-]", "-", axis.lower()) or "axis"


def _linkify(text: str) -> Markup:
    """Evidence text with its http(s) URLs as links (to upstream issues); everything else escaped."""
    out, last = [], 0
    for match in _URL.finditer(text):
        out += [escape(text[last : match.start()]), Markup('<a href="{0}" rel="noreferrer noopener">{0}</a>').format(match.group())]
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def _cells(compat: Compat) -> list[tuple[Cell, str, str, str]]:
    """Each column's cell, its label (the pins that vary), its tooltip, and whose results it reused ("" for its own)."""
    varying, _ = compat.varying_and_shared
    observed_keys = (*compat.axis_names, CUDA)
    cells = []
    for cell in compat.cells:
        observed = ", ".join(f"{k} {cell.observed(k)}" for k in observed_keys if cell.observed(k))
        reused = f"{REUSED} reused from {cell.reused_from.text}" if cell.reused_from else ""
        label = " · ".join(f"{compat.short(a)} {cell.pins[a]}" for a in varying if a in cell.pins) or cell.id
        title = f"{cell.id} — observed: {observed or 'nothing (not installed)'}" + (f" — {reused}" if reused else "")
        cells.append((cell, label, title, reused))
    return cells


class _Escaped(dict[str, str]):
    """``markupsafe.escape`` memoised: case names, cell ids and log tails repeat thousands of times."""

    def __missing__(self, text: str) -> str:
        self[text] = value = str(escape(text))
        return value


@functools.lru_cache(maxsize=4096)
def _judged(
    outcome: Outcome, verdict: Verdict | None, expected: Outcome | None, workarounds: tuple[str, ...], old: str, reused: str, anchored: bool
) -> tuple[str, str, str]:
    """An entry's HTML that only its judgement decides (a few dozen kinds in 20,000 entries): ``<td`` and its class, its
    summary up to the duration in its note, and the note's rest."""
    flagged, word = verdict is not None and verdict.flagged, verdict.value if verdict else ""
    # Outlined: differs from its expectation, or is listed under "Changes since baseline".
    cls = f"o-{outcome.value}" + (" flag" if flagged or anchored else "") + (" reused" if reused else "")
    summary = outcome.label + (f" ({word})" if flagged or verdict is Verdict.NEW else "") + (f" {REUSED}" if reused else "")
    summary += " (under an old check)" if old else ""
    # The first working workaround (+N): keeps columns narrow enough for 1280 px.
    works = f"{workarounds[0]} +{len(workarounds) - 1}" if len(workarounds) > 1 else "".join(workarounds)
    # A result that did not run is judged by nothing: "no expectation covers" would read like a new release.
    expected_text = (
        expected.value if expected else ("— (not run here)" if verdict is Verdict.NOT_RUN else "— (no expectation covers this version)")
    )
    note = f"expected: {expected_text} · verdict {word or '—'}"
    rest = (f" · {reused}" if reused else "") + (f" · taken under a check the case no longer makes: {old!r}" if old else "")
    return (
        f'<td class="{escape(cls)}" data-outcome="{escape(outcome.value)}"',
        f"><details><summary>{escape(summary)}"
        + (f' <span class="wk">→ {escape(works)}</span>' if works else "")
        + "</summary>"
        + (f'<div class="x wk">works here: {escape(", ".join(workarounds))}</div>' if workarounds else "")
        + f'<div class="x">{escape(note)}',
        f"{escape(rest)}</div><pre>",
    )


def _entry(esc: _Escaped, variant: Variant, cell_id: str, entry: Entry | None, anchor: str, reused: str = "") -> str:
    """One ``<td>``, already HTML (the template's per-entry prints were most of a render); a reused cell's entry says so."""
    where = f'data-case="{esc[variant.case]}" data-cell="{esc[cell_id]}"'
    if entry is None:
        return f'<td class="na" data-outcome="" {where} title="not in this cell\'s run">·</td>'
    start, summary, rest = _judged(
        entry.outcome, entry.verdict, entry.expected, entry.workarounds, variant.old_check(entry), reused, bool(anchor)
    )
    duration = f" · {entry.duration_s:.2f} s" if isinstance(entry.duration_s, int | float) else ""
    detail = esc[entry.message or "(no message recorded)"] + (f"\n\n{esc[entry.log]}" if entry.log else "")
    ids = (f' id="{esc[anchor]}"' if anchor else "") + (f' data-reused="{esc[reused]}"' if reused else "")
    return f"{start} {where}{ids}{summary}{duration}{rest}{detail}</pre></details></td>"


def _rows(compat: Compat, cells: list[tuple[Cell, str, str, str]], anchors: dict[tuple[str, str], str]) -> list[tuple[Variant, Markup]]:
    """Each variant with its row's ``<td>``s, escaped and joined (see :func:`_entry`)."""
    rows, esc = [], _Escaped()
    ids = [(cell.id, reused) for cell, _, _, reused in cells]
    for variant in compat.variants:
        per_cell = compat.entries(variant.id)
        entries = [_entry(esc, variant, c, per_cell.get(c), anchors.get((variant.id, c), ""), reused) for c, reused in ids]
        rows.append((variant, Markup("\n    ".join(entries))))  # noqa: S704 -- _entry escaped every text
    return rows


def _evidence(compat: Compat) -> list[tuple[str, Markup]]:
    """One line per case variant (its CPU and CUDA rows share the evidence)."""
    seen: dict[str, str] = {}
    for v in (v for v in compat.variants if v.evidence):
        seen.setdefault(f"{v.case}::{v.name}", v.evidence)
    return [(key, _linkify(text)) for key, text in seen.items()]


def _missing_by_cell(changes: list[tuple[Change, str]]) -> list[tuple[str, int, str, str]]:
    """(cell id, how many results, why, anchor of the first) per cell with missing results."""
    grouped: dict[str, list[tuple[Change, str]]] = {}
    for change, anchor in changes:
        if change.kind is ChangeKind.MISSING:
            grouped.setdefault(change.cell_id, []).append((change, anchor))
    return [(cell, len(items), items[0][0].message, next((a for _, a in items if a), "")) for cell, items in grouped.items()]


def _companions(picture: Picture, key: tuple[str, ...]) -> tuple[str, str]:
    """A grid position's small symbols, one per companion (workaround, upstream), and their words for its tooltip."""
    marks = [(t.variant.label, t.marks.get(key, Mark())) for t in picture.tracks[1:]]
    if not any(m.outcomes for _, m in marks):
        return "", ""  # nothing ran here at all: an empty position stays empty
    sub = "".join(symbol(m.single) if m.single is not None else ("*" if m.outcomes else "·") for _, m in marks)
    return sub, "; also on this picture: " + ", ".join(f"{name} {m.outcome or 'not run'}" for name, m in marks)


_ENV.globals.update(attr_name=_attr_name, boundary_text=boundary_text, companions=_companions, flip_edges=flip_edges, no_mark=Mark())


def render_html(report: NightReport) -> str:
    """The whole report as one HTML string, a view of one :class:`~bugmatrix.report.night.NightReport`."""
    compat = report.compat
    shown = report.listed
    # Listed changes link to their table entry; ids only where needed keeps the page small.
    anchors = {(c.variant_id, c.cell_id): f"e{i}" for i, c in enumerate(shown[:CHANGE_LIMIT]) if c.variant_id}
    listed = [(c, anchors.get((c.variant_id, c.cell_id), "")) for c in shown[:CHANGE_LIMIT]]
    moved = {(m.variant, m.cell): m.moved for m in report.moved}
    in_box = {(c.variant_id, c.cell_id) for c in shown}  # said in the findings box (or counted there past its limit)
    cells = _cells(compat)
    return _ENV.get_template("index.html.j2").render(
        site_slot=Markup("").join(Markup(s) for s in SITE_SLOT),  # noqa: S704 -- two constant comments
        compat=compat,
        report=report,
        cells=cells,
        rows=_rows(compat, cells, anchors),
        missing=_missing_by_cell(listed),
        changes=[(c, a, moved.get((c.variant_id, c.cell_id))) for c, a in listed if c.kind is not ChangeKind.MISSING],
        other_moved=[(m, reused_note(compat.reused_origins.get(m.cell, ""))) for m in report.moved if (m.variant, m.cell) not in in_box],
        severe=frozenset(k.value for k in SEVERE),
        hidden_changes=max(0, len(shown) - CHANGE_LIMIT),
        legend=[(o.value, o.label) for o in Outcome],
        axes=[(_attr_name(a), a) for a in compat.axis_names],
        evidence=_evidence(compat),
        cases=by_case(compat, report.boundary),
        table_open=len(cells) <= OPEN_TABLE_CELLS,
        reused_mark=REUSED,
    )
