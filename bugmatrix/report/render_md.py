"""GitHub-flavoured Markdown: compat.md and the CI step summary, both views of one :class:`~bugmatrix.report.night.NightReport`.

Both lead with what needs a maintainer (missing results, the lane, new releases, what moved, the changes); compat.md
then has each case's boundaries, agreement and table, neighbouring cells that agree sharing a column
(:func:`_column_groups`). Run data is escaped by :mod:`~bugmatrix.report.markdown` only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.report.boundaries import Picture, boundary_text
from bugmatrix.report.diff import INFORMATIONAL, PER_CELL, Change, ChangeKind
from bugmatrix.report.envdiff import source_build_lines
from bugmatrix.report.history import WINDOW
from bugmatrix.report.markdown import code, escape_md
from bugmatrix.report.model import Cell, Compat, Entry, Variant, reused_note
from bugmatrix.report.night import NightReport
from bugmatrix.report.render_lane import REUSED, lane_lines, reuse_lines

__all__ = ["LINE_LIMIT", "SUMMARY_CHANGE_LIMIT", "change_lines", "explained_lines", "render_markdown", "render_step_summary"]

#: GitHub rejects step summaries over 1 MiB; a nightly with a broken index could list thousands of changes.
SUMMARY_CHANGE_LIMIT = 30
MESSAGE_CHARS = 200
#: The step summary stays readable (GitHub truncates it at 1 MiB anyway); compat.json has everything.
LINE_LIMIT = 40


def _entry(entry: Entry | None, variant: Variant) -> str:
    if entry is None:
        return "·"  # the variant was not part of this cell's run (e.g. selected out with -k)
    text = entry.outcome.label
    if entry.flagged:
        text = f"**{text}** ({entry.verdict})"
    elif entry.verdict is Verdict.NEW:
        text += " (new)"
    if variant.old_check(entry):
        text += " (under an old check)"
    if entry.workarounds:
        text += " — works: " + ", ".join(escape_md(w) for w in entry.workarounds)
    return text


def _bullet(item: Change | list[Change]) -> str:
    if isinstance(item, list):  # every variant of one cell that is missing or no longer installs; a cell of a release
        first = item[0]
        if not first.variant_id:
            return f"- **{first.kind}**: {code(first.cell_id)} — {escape_md(first.message[:MESSAGE_CHARS])}"
        return (
            f"- **{first.kind}**: {code(first.cell_id)} ({len(item)} variants) — {escape_md(first.message[:MESSAGE_CHARS])}"
            f"{escape_md(first.reused_note)}"
        )
    return (
        f"- **{item.kind}**: {code(item.variant_id)} in {code(item.cell_id)}: {escape_md(item.before or '—')} → {escape_md(item.after)}"
        f" — {escape_md(item.message[:MESSAGE_CHARS])}{escape_md(item.reused_note)}"
    )


def change_lines(changes: Sequence[Change], limit: int | None = None) -> list[str]:
    """Markdown bullets, most severe first; a missing or uninstallable cell is one line, not one per variant."""
    items: list[Change | list[Change]] = []
    per_cell: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        if c.kind in INFORMATIONAL:
            continue
        if c.kind not in PER_CELL or not c.variant_id:
            items.append(c if c.variant_id else [c])
        elif (c.kind, c.cell_id) in per_cell:
            per_cell[(c.kind, c.cell_id)].append(c)
        else:
            per_cell[(c.kind, c.cell_id)] = [c]
            items.append(per_cell[(c.kind, c.cell_id)])  # the group keeps the severity slot of its first change
    lines = [_bullet(item) for item in items]
    if limit is not None and len(lines) > limit:
        lines = [*lines[:limit], f"- … and {len(lines) - limit} more (see compat.md or index.html)"]
    return lines


def _column_groups(compat: Compat, columns: list[Cell], ran: list[Variant], varying: list[str]) -> list[tuple[str, list[str]]]:
    """(heading, one entry per row) for each column of a case's table.

    Neighbouring cells that differ in one axis and agree on every row share a column (``tf 4.29.2, 4.30.2, 5.23.0``).
    """
    groups: list[tuple[list[Cell], str | None, list[str]]] = []
    rows = [(v, compat.entries(v.id)) for v in ran]
    for cell in columns:
        mark = f" {REUSED}" if cell.reused else ""  # never shown as fresh: the Reused section names its origin
        entries = [_entry(per_cell.get(cell.id), v) + (mark if cell.id in per_cell else "") for v, per_cell in rows]
        if groups:
            cells, axis, previous = groups[-1]
            first, pins = cells[0].pins, cell.pins
            differ = [a for a in varying if first.get(a) != pins.get(a)]
            # Both must pin the axis: "tf 4.29.2" must not stand for a cell without that axis.
            if entries == previous and len(differ) == 1 and axis in (None, differ[0]) and first.get(differ[0]) and pins.get(differ[0]):
                groups[-1] = ([*cells, cell], differ[0], previous)
                continue
        groups.append(([cell], None, entries))
    headings = []
    for cells, axis, entries in groups:
        pins = cells[0].pins
        parts = []
        for a in varying:
            values = [c.pins[a] for c in cells] if a == axis else [pins[a]] if a in pins else []
            if values:
                parts.append(f"{compat.short(a)} {', '.join(values)}")
        reused = f" {REUSED}" if any(c.reused for c in cells) else ""
        headings.append((escape_md(" · ".join(parts) or ", ".join(c.id for c in cells)) + reused, entries))
    return headings


def _missing_section(report: NightReport, limit: int | None = None) -> list[str]:
    """Expected results no run recorded, one line per cell: first in every view (a hole is never silent)."""
    missing = report.missing
    return [f"## ? Missing: {len(missing)} expected result(s) not recorded", "", *change_lines(missing, limit), ""] if missing else []


def _changes_section(report: NightReport, limit: int | None = None) -> list[str]:
    rest = [c for c in report.changes if c.kind is not ChangeKind.MISSING]
    lines = ["## Changes since baseline", "", *change_lines(rest, limit)]
    if len(lines) == 2:
        nothing = "regressions" if report.missing else "missing results, regressions"
        lines.append(f"No {nothing}, new failure modes, install failures or unexpected fixes.")
    if report.informational:
        lines.append(f"\n{report.informational} new cell(s)/variant(s) not in the baseline.")
    return [*lines, ""]


def _environment_line(compat: Compat) -> str:
    hosts = []
    interpreter = (compat.interpreter or "interpreter").capitalize()
    for host in compat.environments:
        cuda = ", ".join(host.cuda) or "none"
        hosts.append(f"{host.platform} · GPU: {host.gpu or 'none'} · CUDA builds: {cuda} · {interpreter} {', '.join(host.interpreters)}")
    gpu = f"\n\nGPU runs: {escape_md(compat.gpu_runs_text())}" if compat.gpu_runs_text() else ""
    return ("Ran on: " + escape_md("; ".join(hosts)) if hosts else "Ran on: no cell recorded an environment.") + gpu


def _boundary_lines(drawn: list[Picture], compat: Compat) -> list[str]:
    """One bullet per drawn variant: its flips, as the HTML labels them ("fixed in torch 2.11.0"), a GPU variant's line;
    ♻ when it reads a reused result."""
    lines = []
    for picture in drawn:
        for track in picture.tracks:
            flips = (
                # Another device than the CPU says what was observed and where, and nothing else (boundaries.py).
                (boundary_text(picture, track) if picture.observed_on else "")
                or "; ".join(f.label for f in track.flips)
                or track.unread
                or "no flip along " + " × ".join(picture.short(a) for a in picture.axes)
            )
            role = f" *({track.role})*" if track.role else ""
            reused = f" {REUSED}" if compat.reuses(track.variant.id) else ""
            lines.append(f"- {code(track.name)}{role}{reused}: {escape_md(flips)}")
    return ["**Boundaries**", "", *lines, ""] if lines else []


def _agreement_lines(case: str, report: NightReport) -> list[str]:
    """The case's upstream variants against its own, cell by cell."""
    lines, idle = report.agreement.get(case, ([], []))
    if not lines and not idle:
        return []
    out = ["**Upstream agreement**", ""]
    out += [f"- {code(a.upstream)} vs {code(a.counterpart)}: {escape_md(a.text)}" for a in lines]
    if idle:
        out.append("- not compared (never ran in a cell with its counterpart): " + ", ".join(code(n) for n in idle))
    return [*out, ""]


def _tracking_lines(compat: Compat) -> list[str]:
    """ "Tracking: torch latest = …" and a blank line, or nothing when the profile tracks no release."""
    text = compat.tracking_text()
    return [f"Tracking: {escape_md(text)}", ""] if text else []


def render_markdown(report: NightReport) -> str:
    """The full compat.md: header, missing results, new releases, changes since the baseline, then per case its boundaries, agreement and table."""
    compat = report.compat
    cells = compat.cells
    varying, shared = compat.varying_and_shared
    lines = [
        "# bugmatrix compatibility report",
        "",
        f"Profile {code(compat.profile)} · {len(cells)} cells · generated {escape_md(compat.generated)} · commit {code(compat.commit)}",
        "",
        _environment_line(compat),
        "",
        *[f"- {escape_md(line)}" for line in source_build_lines(compat)],
        *([""] if source_build_lines(compat) else []),
        *_tracking_lines(compat),
        escape_md(report.expectation_text),
        "",
        "Legend: "
        + ", ".join(o.label for o in Outcome)
        + ", · not in this cell's run. *works:* the workaround variants that are fixed in that same cell."
        + (f" {REUSED}: reused from an earlier run with the same inputs (see Reused)." if compat.reused_cells else ""),
        "",
        *_missing_section(report),
        *lane_lines(report),
        *explained_lines(report, limit=None),
        *_changes_section(report),
        *reuse_lines(report),
    ]
    if shared:
        lines += ["Every cell pins " + escape_md(", ".join(f"{compat.short(a)} {v}" for a, v in shared.items())) + ".", ""]
    drawn: dict[str, list[Picture]] = {}
    for picture in report.boundary[0]:
        drawn.setdefault(picture.variant.case, []).append(picture)
    by_case: dict[str, list[Variant]] = {}
    for variant in compat.variants:
        by_case.setdefault(variant.case, []).append(variant)
    for case, variants in by_case.items():
        # Rows that only skipped, or sat in cells that never installed, are counted below the table instead.
        ran = [v for v in variants if compat.ran_anywhere(v.id)]
        columns = [c for c in cells if any(c.id in compat.entries(v.id) for v in ran)]
        lines += [f"## {escape_md(case)}", "", *_boundary_lines(drawn.get(case, []), report.compat), *_agreement_lines(case, report)]
        if not ran:
            lines += ["No variant ran in any cell: skipped everywhere, or no cell installed (see the HTML report for the reasons).", ""]
            continue
        groups = _column_groups(compat, columns, ran, varying)
        lines.append("| variant | " + " | ".join(heading for heading, _ in groups) + " |")
        lines.append("|---" * (len(groups) + 1) + "|")
        for i, v in enumerate(ran):
            name = code(v.label)
            if v.kind is Kind.WORKAROUND:
                name += f" *(workaround for {code(v.workaround_for)})*"
            lines.append(f"| {name} | " + " | ".join(entries[i] for _, entries in groups) + " |")
        skipped = len(variants) - len(ran)
        if skipped:
            lines.append(f"\n{skipped} variant(s) ran in no cell (CUDA variants not run on a GPU, or an unmet requirement).")
        lines.append("")
    lines += closing_lines(report)
    return "\n".join(lines) + "\n"


def _flaky_section(report: NightReport) -> list[str]:
    """Every flaky (variant, cell) the history knows, changed tonight or not: a flaky mark is never a silent pass."""
    flaky = [(variant, h.flaky) for variant, h in report.history.items() if h.flaky]
    if not flaky:
        return []
    lines = [f"## ≈ Flaky (changed back and forth within the last {WINDOW} nights)", ""]
    lines += [f"- {code(variant)} in {', '.join(code(c) for c in cells)}" for variant, cells in flaky[:SUMMARY_CHANGE_LIMIT]]
    if len(flaky) > SUMMARY_CHANGE_LIMIT:
        lines.append(f"- … and {len(flaky) - SUMMARY_CHANGE_LIMIT} more (see index.html)")
    return [*lines, ""]


def render_step_summary(report: NightReport) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY``: missing, new releases, changes, the flaky pairs, then outcome counts per case."""
    compat = report.compat
    lines = [
        f"# bugmatrix {escape_md(compat.profile)}",
        "",
        f"{len(compat.cells)} cells · {len(compat.variants)} variants · commit {code(compat.commit)}",
        "",
        *_tracking_lines(compat),
        escape_md(report.expectation_text),
        "",
        *_missing_section(report, SUMMARY_CHANGE_LIMIT),
        *lane_lines(report, SUMMARY_CHANGE_LIMIT),
        *explained_lines(report),
        *_changes_section(report, SUMMARY_CHANGE_LIMIT),
        *_flaky_section(report),
        *reuse_lines(report, SUMMARY_CHANGE_LIMIT),
        "## Outcomes per case",
        "",
    ]
    outcomes = list(Outcome)
    lines.append("| case | " + " | ".join(o.label for o in outcomes) + " |")
    lines.append("|---" * (len(outcomes) + 1) + "|")
    counts: dict[str, Counter[Outcome]] = {}
    for variant in compat.variants:
        counter = counts.setdefault(variant.case, Counter())
        counter.update(e.outcome for e in compat.entries(variant.id).values())
    for case, counter in counts.items():
        lines.append(f"| {escape_md(case)} | " + " | ".join(str(counter.get(o, 0)) for o in outcomes) + " |")
    closing = closing_lines(report)
    if closing:  # after the table, without the blank line it ends with (the summary ends in two newlines)
        lines += ["", *closing[:-1]]
    return "\n".join(lines) + "\n\n"


def closing_lines(report: NightReport) -> list[str]:
    """What ends compat.md and the step summary: pins new to this matrix on purpose, and what the plan dropped (no findings)."""
    lines: list[str] = []
    if report.additions:
        lines += [
            "## New in this matrix",
            "",
            "Added on purpose (a new axis, or an older release a profile lists); not new upstream releases.",
            "",
        ]
        for group in report.additions:
            lines.append(f"- {escape_md(group.headline)}")
            lines += [f"  - {escape_md(note.text)}" for note in group.notable[:LINE_LIMIT]]
        lines.append("")
    if report.dropped_text:
        lines += [escape_md(report.dropped_text), ""]
    return lines


def explained_lines(report: NightReport, limit: int | None = LINE_LIMIT) -> list[str]:
    """Markdown sections for new releases (those that do not install and regression candidates first) and moved distributions."""
    lines: list[str] = []
    if report.upstream_releases:
        lines += ["## New releases", ""]
        listed = 0
        for group in report.upstream_releases:
            lines.append(f"- {escape_md(group.headline)}")
            for note in (*group.not_installed, *group.notable):
                if limit is not None and listed >= limit:
                    break
                lines.append(f"  - {escape_md(note.text)}")
                listed += 1
        hidden = sum(len(g.notable) + len(g.not_installed) for g in report.upstream_releases) - listed
        if hidden > 0:
            lines.append(f"- … and {hidden} more (compat.json: releases)")
        lines.append("")
    if report.moved:
        lines += ["## Outcomes that changed since the baseline, and what moved in their cell", ""]
        for entry in report.moved[:limit]:
            why = "; ".join(entry.moved) or "no installed distribution changed"
            why += reused_note(report.compat.reused_origins.get(entry.cell, ""))
            lines.append(f"- {code(entry.variant)} in {code(entry.cell)}: {entry.before} → {entry.after} — {escape_md(why)}")
        if limit is not None and len(report.moved) > limit:
            lines.append(f"- … and {len(report.moved) - limit} more (compat.json: moved)")
        lines.append("")
    return lines
