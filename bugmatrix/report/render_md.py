"""GitHub-flavoured Markdown: compat.md and the CI step summary.

Rows are case variants, columns the cells where that case ran (one table per
case keeps each readable), headed by the axes that tell cells apart, with
neighbouring cells that differ in one axis and agree on every row sharing a
column (:func:`_column_groups`); every entry is a symbol *and* a word. Everything that comes from a run (messages,
versions, install reasons) goes through :func:`escape_md`: a ``|`` would add a
column, ``<script>`` must stay text, and a backtick or ``*`` would restyle the
rest of the line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.releases.notes import group_headline, release_groups
from bugmatrix.report import OUTCOMES, is_flagged, label, short, split_axes
from bugmatrix.report.agreement import per_case
from bugmatrix.report.boundaries import Boundary, Picture, pictures
from bugmatrix.report.diff import INFORMATIONAL, Change, ChangeKind
from bugmatrix.report.history import WINDOW
from bugmatrix.report.merge import tracking_text

#: Kinds that usually hit a whole cell at once: one line per cell, not one per variant.
PER_CELL = frozenset({ChangeKind.MISSING, ChangeKind.NO_LONGER_INSTALLS})

__all__ = ["change_lines", "code", "escape_md", "render_markdown", "render_step_summary"]

#: Characters that change Markdown structure or style; backslash-escaped (GFM honours these in tables too).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: Identifiers that may go verbatim in a code span: no backtick (ends the span), no pipe (ends the cell).
_PLAIN_ID = re.compile(r"[\w.:+\-\[\]/=, ]+")
#: GitHub rejects step summaries over 1 MiB; a nightly with a broken index could list thousands of changes.
SUMMARY_CHANGE_LIMIT = 30
MESSAGE_CHARS = 200


def escape_md(text: object) -> str:
    """Make arbitrary text safe inside a Markdown table cell (one line, no markup, no HTML)."""
    out = _MD_SPECIAL.sub(r"\\\1", str(text))
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(out.split())


def code(text: object) -> str:
    """An id as a code span when that is safe, else escaped text.

    Inside a code span backslash escapes are shown literally, so only text
    that needs none may go there; anything else is escaped plain text.
    """
    text = str(text)
    return f"`{text}`" if _PLAIN_ID.fullmatch(text) else escape_md(text)


def _entry(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "·"  # the variant was not part of this cell's run (e.g. selected out with -k)
    text = label(entry["outcome"])
    verdict = entry.get("verdict")
    if is_flagged(verdict):
        text = f"**{text}** ({verdict})"
    elif verdict == "new":
        text += " (new)"
    if entry.get("workarounds"):
        text += " — works: " + ", ".join(escape_md(w) for w in entry["workarounds"])
    return text


def _bullet(item: Change | list[Change]) -> str:
    if isinstance(item, list):  # every variant of one cell that is missing or no longer installs
        first = item[0]
        return f"- **{first.kind}**: {code(first.cell_id)} ({len(item)} variants) — {escape_md(first.message[:MESSAGE_CHARS])}"
    return (
        f"- **{item.kind}**: {code(item.variant_id)} in {code(item.cell_id)}: {escape_md(item.before or '—')} → {escape_md(item.after)}"
        f" — {escape_md(item.message[:MESSAGE_CHARS])}"
    )


def change_lines(changes: list[Change], limit: int | None = None) -> list[str]:
    """Markdown bullets, most severe first; a missing or uninstallable cell is one line, not one per variant."""
    items: list[Change | list[Change]] = []
    per_cell: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        if c.kind in INFORMATIONAL:
            continue
        if c.kind not in PER_CELL:
            items.append(c)
        elif (c.kind, c.cell_id) in per_cell:
            per_cell[(c.kind, c.cell_id)].append(c)
        else:
            per_cell[(c.kind, c.cell_id)] = [c]
            items.append(per_cell[(c.kind, c.cell_id)])  # the group keeps the severity slot of its first change
    lines = [_bullet(item) for item in items]
    if limit is not None and len(lines) > limit:
        lines = [*lines[:limit], f"- … and {len(lines) - limit} more (see compat.md or index.html)"]
    return lines


def _column_groups(
    compat: dict[str, Any], columns: list[dict[str, Any]], ran: list[dict[str, Any]], results: dict[str, Any], varying: list[str]
) -> list[tuple[str, list[str]]]:
    """(heading, one entry per row) for each column of a case's table.

    Neighbouring cells (plan order) that differ in a single axis and agree on
    every row share one column headed ``tf 4.29.2, 4.30.2, 5.23.0``: a case
    that does not depend on transformers then does not repeat itself once per
    transformers version, and the table stays readable on GitHub. Nothing is
    lost: the entries merged are identical.
    """
    groups: list[tuple[list[dict[str, Any]], str | None, list[str]]] = []
    for cell in columns:
        entries = [_entry(results.get(v["id"], {}).get(cell["id"])) for v in ran]
        if groups:
            cells, axis, previous = groups[-1]
            first, pins = cells[0].get("pins") or {}, cell.get("pins") or {}
            differ = [a for a in varying if first.get(a) != pins.get(a)]
            # Both must pin the axis: "tf 4.29.2" must not stand for a cell without transformers.
            if entries == previous and len(differ) == 1 and axis in (None, differ[0]) and first.get(differ[0]) and pins.get(differ[0]):
                groups[-1] = ([*cells, cell], differ[0], previous)
                continue
        groups.append(([cell], None, entries))
    headings = []
    for cells, axis, entries in groups:
        pins = cells[0].get("pins") or {}
        parts = []
        for a in varying:
            values = [str(c["pins"][a]) for c in cells] if a == axis else [str(pins[a])] if a in pins else []
            if values:
                parts.append(f"{short(compat, a)} {', '.join(values)}")
        headings.append((escape_md(" · ".join(parts) or ", ".join(c["id"] for c in cells)), entries))
    return headings


def _changes_section(changes: list[Change], limit: int | None = None) -> list[str]:
    lines = ["## Changes since baseline", "", *change_lines(changes, limit)]
    if len(lines) == 2:
        lines.append("No missing results, regressions, new failure modes, install failures or unexpected fixes.")
    informational = sum(1 for c in changes if c.kind in INFORMATIONAL)
    if informational:
        lines.append(f"\n{informational} new cell(s)/variant(s) not in the baseline.")
    return [*lines, ""]


def _environment_line(compat: dict[str, Any]) -> str:
    hosts = []
    for env in compat.get("environments", []):
        cuda = ", ".join(env.get("cuda") or []) or "none"
        hosts.append(
            f"{env['platform']} · GPU: {env.get('gpu') or 'none'} · CUDA builds: {cuda} · Python {', '.join(env.get('python') or [])}"
        )
    return "Ran on: " + escape_md("; ".join(hosts)) if hosts else "Ran on: no cell recorded an environment."


def _boundary_lines(drawn: list[Picture]) -> list[str]:
    """One bullet per drawn variant: its flips, as the HTML labels them ("fixed in torch 2.11.0")."""
    lines = []
    for picture in drawn:
        for track in picture.tracks:
            flips = "; ".join(f.label for f in track.flips) or "no flip along " + " × ".join(picture.short(a) for a in picture.axes)
            role = f" *({track.role})*" if track.role else ""
            lines.append(f"- {code(track.name)}{role}: {escape_md(flips)}")
    return ["**Boundaries**", "", *lines, ""] if lines else []


def _agreement_lines(case: str, agreement: dict[str, Any]) -> list[str]:
    """Issue 17's agreement rows: each upstream variant against the case's own, cell by cell."""
    lines, idle = agreement.get(case, ([], []))
    if not lines and not idle:
        return []
    out = ["**Upstream agreement**", ""]
    out += [f"- {code(a.upstream)} vs {code(a.counterpart)}: {escape_md(a.text)}" for a in lines]
    if idle:
        out.append("- not compared (never ran in a cell with its counterpart): " + ", ".join(code(n) for n in idle))
    return [*out, ""]


def _tracking_lines(compat: dict[str, Any]) -> list[str]:
    """ "Tracking: torch latest = …" and a blank line, or nothing when the profile tracks no release."""
    text = tracking_text(compat)
    return [f"Tracking: {escape_md(text)}", ""] if text else []


def render_markdown(compat: dict[str, Any], changes: list[Change], boundary: Boundary | None = None) -> str:
    """The full compat.md: header, changes since the baseline, then per case its boundaries, upstream agreement and table."""
    cells = compat["cells"]
    varying, shared = split_axes(compat)
    lines = [
        "# bugmatrix compatibility report",
        "",
        f"Profile {code(compat['profile'])} · {len(cells)} cells · generated {escape_md(compat['generated'])} · commit {code(compat['commit'])}",
        "",
        _environment_line(compat),
        "",
        *_tracking_lines(compat),
        "Legend: " + ", ".join(label(o) for o in OUTCOMES) + ", · not in this cell's run."
        " *works:* the workaround variants that are fixed in that same cell.",
        "",
        *explained_lines(compat, limit=None),
        *_changes_section(changes),
    ]
    if shared:
        lines += ["Every cell pins " + escape_md(", ".join(f"{short(compat, a)} {v}" for a, v in shared.items())) + ".", ""]
    drawn: dict[str, list[Picture]] = {}
    for picture in (boundary or pictures(compat))[0]:
        drawn.setdefault(picture.variant["case"], []).append(picture)
    agreement = per_case(compat)
    by_case: dict[str, list[dict[str, Any]]] = {}
    for variant in compat["variants"]:
        by_case.setdefault(variant["case"], []).append(variant)
    for case, variants in by_case.items():
        # Rows that only skipped, or sat in cells that never installed, are counted below the table instead.
        ran = [v for v in variants if any(Outcome(e["outcome"]).ran for e in compat["results"].get(v["id"], {}).values())]
        columns = [c for c in cells if any(c["id"] in compat["results"].get(v["id"], {}) for v in ran)]
        lines += [f"## {escape_md(case)}", "", *_boundary_lines(drawn.get(case, [])), *_agreement_lines(case, agreement)]
        if not ran:
            lines += ["No variant ran in any cell: skipped everywhere, or no cell installed (see the HTML report for the reasons).", ""]
            continue
        groups = _column_groups(compat, columns, ran, compat["results"], varying)
        lines.append("| variant | " + " | ".join(heading for heading, _ in groups) + " |")
        lines.append("|---" * (len(groups) + 1) + "|")
        for i, v in enumerate(ran):
            name = code(f"{v['variant']}[{v['device']}]")
            if v["kind"] == "workaround":
                name += f" *(workaround for {code(v['workaround_for'])})*"
            lines.append(f"| {name} | " + " | ".join(entries[i] for _, entries in groups) + " |")
        skipped = len(variants) - len(ran)
        if skipped:
            lines.append(f"\n{skipped} variant(s) ran in no cell (CUDA variants without a GPU, or an unmet requirement).")
        lines.append("")
    return "\n".join(lines) + "\n"


def _flaky_section(history: Mapping[str, Any] | None) -> list[str]:
    """Every flaky (variant, cell) the history knows, changed tonight or not: a flaky mark is never a silent pass."""
    flaky = [(variant, h.flaky) for variant, h in (history or {}).items() if getattr(h, "flaky", None)]
    if not flaky:
        return []
    lines = [f"## ≈ Flaky (changed back and forth within the last {WINDOW} nights)", ""]
    lines += [f"- {code(variant)} in {', '.join(code(c) for c in cells)}" for variant, cells in flaky[:SUMMARY_CHANGE_LIMIT]]
    if len(flaky) > SUMMARY_CHANGE_LIMIT:
        lines.append(f"- … and {len(flaky) - SUMMARY_CHANGE_LIMIT} more (see index.html)")
    return [*lines, ""]


def render_step_summary(compat: dict[str, Any], changes: list[Change], history: Mapping[str, Any] | None = None) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY``: changes first, then the flaky pairs (``history``), then outcome counts per case."""
    lines = [
        f"# bugmatrix {escape_md(compat['profile'])}",
        "",
        f"{len(compat['cells'])} cells · {len(compat['variants'])} variants · commit {code(compat['commit'])}",
        "",
        *_tracking_lines(compat),
        *explained_lines(compat),
        *_changes_section(changes, SUMMARY_CHANGE_LIMIT),
        *_flaky_section(history),
        "## Outcomes per case",
        "",
    ]
    outcomes = list(OUTCOMES)
    lines.append("| case | " + " | ".join(label(o) for o in outcomes) + " |")
    lines.append("|---" * (len(outcomes) + 1) + "|")
    counts: dict[str, Counter[str]] = {}
    for variant in compat["variants"]:
        counter = counts.setdefault(variant["case"], Counter())
        counter.update(e["outcome"] for e in compat["results"].get(variant["id"], {}).values())
    for case, counter in counts.items():
        lines.append(f"| {escape_md(case)} | " + " | ".join(str(counter.get(o, 0)) for o in outcomes) + " |")
    return "\n".join(lines) + "\n\n"


#: The step summary stays readable (GitHub truncates it at 1 MiB anyway); compat.json has everything.
LINE_LIMIT = 40


def explained_lines(compat: Mapping[str, Any], limit: int | None = LINE_LIMIT) -> list[str]:
    """Markdown sections for new releases (regression candidates first) and moved distributions; [] when neither."""
    lines: list[str] = []
    groups = release_groups(compat.get("releases") or [])
    if groups:
        lines += ["## New releases", ""]
        listed = 0
        for group in groups:
            lines.append(f"- {escape_md(group_headline(group))}")
            for note in group["notable"]:
                if limit is not None and listed >= limit:
                    break
                lines.append(f"  - {escape_md(note['text'])}")
                listed += 1
        hidden = sum(len(g["notable"]) for g in groups) - listed
        if hidden > 0:
            lines.append(f"- … and {hidden} more (compat.json: releases)")
        lines.append("")
    moved = compat.get("moved") or []
    if moved:
        lines += ["## Outcomes that changed since the baseline, and what moved in their cell", ""]
        for entry in moved[:limit]:
            why = "; ".join(entry["moved"]) or "no installed distribution changed"
            lines.append(f"- `{entry['variant']}` in `{entry['cell']}`: {entry['before']} → {entry['after']} — {escape_md(why)}")
        if limit is not None and len(moved) > limit:
            lines.append(f"- … and {len(moved) - limit} more (compat.json: moved)")
        lines.append("")
    return lines
