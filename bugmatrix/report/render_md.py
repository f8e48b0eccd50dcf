"""GitHub-flavoured Markdown: compat.md and the CI step summary.

Rows are case variants, columns the cells where that case ran (one table per
case keeps each readable), entries a symbol *and* a word. Everything that
comes from a run (messages, versions) is escaped: a ``|`` would break the
table, and ``<script>`` must stay text.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bugmatrix.report import SYMBOLS, label
from bugmatrix.report.diff import Change

__all__ = ["cell_label", "escape_md", "render_markdown", "render_step_summary"]

AXIS_SHORT = {"python": "py", "torch": "torch", "lightning": "pl", "transformers": "tf"}


def escape_md(text: object) -> str:
    """Make arbitrary text safe inside a Markdown table cell."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(out.split())


def cell_label(cell: dict[str, Any]) -> str:
    """``torch 2.5.1 · pl 2.0.3`` (python shown only when it is not the only one)."""
    pins = cell.get("pins") or {}
    parts = [f"{AXIS_SHORT[a]} {pins[a]}" for a in AXIS_SHORT if a in pins and a != "python"]
    return escape_md(" · ".join(parts) or cell["id"])


def _entry(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return ""
    text = label(entry["outcome"])
    if entry.get("verdict") in ("regression", "unexpected-fix", "new-failure-mode"):
        text = f"**{text}** ({entry['verdict']})"
    elif entry.get("verdict") == "new":
        text += " (new)"
    if entry.get("workarounds"):
        text += " — works: " + ", ".join(escape_md(w) for w in entry["workarounds"])
    return text


def _changes(changes: list[Change]) -> list[str]:
    lines = ["## Changes since baseline", ""]
    shown = [c for c in changes if c.kind not in ("new-cell", "new-variant")]
    if not shown:
        lines.append("No regressions, new failure modes or unexpected fixes.")
    for c in shown:
        lines.append(
            f"- **{c.kind}**: `{escape_md(c.variant_id)}` in `{escape_md(c.cell_id)}`: {escape_md(c.before or '—')} → {escape_md(c.after)} — {escape_md(c.message[:200])}"
        )
    informational = len(changes) - len(shown)
    if informational:
        lines.append(f"- {informational} new cell(s)/variant(s) not in the baseline.")
    return [*lines, ""]


def render_markdown(compat: dict[str, Any], changes: list[Change]) -> str:
    """The full compat.md."""
    lines = [
        "# bugmatrix compatibility report",
        "",
        f"Profile `{escape_md(compat['profile'])}` · {len(compat['cells'])} cells · generated {escape_md(compat['generated'])} · commit `{escape_md(compat['commit'])}`",
        "",
        "Legend: " + ", ".join(label(o) for o in SYMBOLS) + ". *works:* the workaround variants that are fixed in that same cell.",
        "",
        *_changes(changes),
    ]
    cells = compat["cells"]
    by_case: dict[str, list[dict[str, Any]]] = {}
    for variant in compat["variants"]:
        by_case.setdefault(variant["case"], []).append(variant)
    for case, variants in by_case.items():
        ran = [v for v in variants if any(e["outcome"] != "skipped" for e in compat["results"].get(v["id"], {}).values())]
        columns = [c for c in cells if any(c["id"] in compat["results"].get(v["id"], {}) for v in ran)]
        lines += [f"## {escape_md(case)}", ""]
        if not ran:
            lines += ["Every variant was skipped in every cell (see the HTML report for the reasons).", ""]
            continue
        lines.append("| variant | " + " | ".join(cell_label(c) for c in columns) + " |")
        lines.append("|---" * (len(columns) + 1) + "|")
        for v in ran:
            row = compat["results"].get(v["id"], {})
            name = f"`{escape_md(v['variant'])}[{escape_md(v['device'])}]`" + (" *(workaround)*" if v["kind"] == "workaround" else "")
            lines.append(f"| {name} | " + " | ".join(_entry(row.get(c["id"])) for c in columns) + " |")
        skipped = len(variants) - len(ran)
        if skipped:
            lines.append(f"\n{skipped} variant(s) skipped in every cell (CUDA variants without a GPU, or an unmet requirement).")
        lines.append("")
    return "\n".join(lines) + "\n"


def render_step_summary(compat: dict[str, Any], changes: list[Change]) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY``: changes first, then counts per case."""
    lines = ["# bugmatrix nightly", "", *_changes(changes), "## Outcomes per case", ""]
    outcomes = list(SYMBOLS)
    lines.append("| case | " + " | ".join(label(o) for o in outcomes) + " |")
    lines.append("|---" * (len(outcomes) + 1) + "|")
    counts: dict[str, Counter[str]] = {}
    for variant in compat["variants"]:
        counter = counts.setdefault(variant["case"], Counter())
        counter.update(e["outcome"] for e in compat["results"].get(variant["id"], {}).values())
    for case, counter in counts.items():
        lines.append(f"| {escape_md(case)} | " + " | ".join(str(counter.get(o, 0)) for o in outcomes) + " |")
    return "\n".join(lines) + "\n\n"
