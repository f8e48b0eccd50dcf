"""Issue bodies rendered from the typed report: four fixture nights (a regression, a flaky variant, a missing cell, a broken release).

Each body is checked for what the issue promises (what changed, in which
cells, since which night, what moved below the pins, the boundary, the repro
export), for its marker, and for what it must never do on GitHub: mention a
user, back-link an upstream issue, or carry a run's HTML.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import msgspec
import pytest

from bugmatrix.cell.outcomes import Outcome
from bugmatrix.publish.bodies import ReproExporter
from bugmatrix.publish.issue_body import BODY_LIMIT, Attachment, Links, fenced, literal, render_issue
from bugmatrix.publish.markers import State, digest_of, file_stem, finding_marker, parse_markers
from bugmatrix.report.diff import ChangeKind
from bugmatrix.report.history import Night, append_night, night_from_compat
from bugmatrix.report.model import Compat
from bugmatrix.report.night import Finding, NightReport, analyse
from tests.test_report import CORE, CRASHED, FIXED, FIXTURES, REPRODUCED, UNINSTALLABLE, WORKS, fixture_compat

ROOT = Path(__file__).resolve().parents[1]
DATES = ("2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23")
NIGHT = DATES[-1]
FRAMEWORK = "autocast_cache::lightning_manual_optimization[cpu]"
HOSTILE = "RuntimeError: <script>alert(1)</script> | @octocat see pytorch/pytorch#165068 and `code` **bold**"
LINKS = Links.for_site("https://o.github.io/r/", "smoke", NIGHT, "https://github.com/o/r/actions/runs/7")


def history(*nights: Compat) -> list[Night]:
    kept: list[Night] = []
    for date, compat in zip(DATES[-len(nights) :], nights, strict=True):
        kept = append_night(kept, night_from_compat(compat, date))
    return kept


def regression_night() -> NightReport:
    """Two regressions in FIXED (one with a hostile message), and the CRASHED cell lost: every result there missing."""
    baseline = fixture_compat()
    tonight = baseline.with_entry(CORE, FIXED, outcome=Outcome.REPRODUCED, message=HOSTILE)
    tonight = tonight.with_entry(FRAMEWORK, FIXED, outcome=Outcome.REPRODUCED, message="RuntimeError: element 0 of tensors")
    for variant in [v.id for v in tonight.variants]:
        if tonight.entry(variant, CRASHED) is not None:
            tonight = tonight.with_entry(variant, CRASHED, outcome=Outcome.MISSING, message="no run file for this cell (its job died)")
    return analyse(tonight, baseline, history(baseline, baseline, tonight))


def flaky_night() -> NightReport:
    """WORKS in REPRODUCED: fixed, timeout, fixed, timeout: tonight's timeout is flaky, not a new failure mode."""
    fixed = fixture_compat()
    timeout = fixed.with_entry(WORKS, REPRODUCED, outcome=Outcome.TIMEOUT, message="timed out after 60 s")
    return analyse(timeout, fixed, history(fixed, timeout, fixed, timeout))


def broken_release_night() -> NightReport:
    """The baseline never had torch 9.0.0; tonight its cell does not install."""
    tonight = fixture_compat()
    baseline = msgspec.structs.replace(
        tonight, cells=tuple(c for c in tonight.cells if c.id != UNINSTALLABLE),
        results={v: {c: e for c, e in per.items() if c != UNINSTALLABLE} for v, per in tonight.results.items()},
    )  # fmt: skip
    return analyse(tonight, baseline, history(tonight))


def clean_night() -> NightReport:
    compat = fixture_compat()
    return analyse(compat, compat, history(compat, compat))


def finding(report: NightReport, kind: ChangeKind, subject: str) -> Finding:
    return next(f for f in report.findings() if (f.kind, f.subject) == (kind, subject))


def body_of(report: NightReport, found: Finding, attachment: Attachment | None = None) -> str:
    return render_issue(found, report, NIGHT, LINKS, attachment or Attachment(note="not exported in this test"))[1]


def outside_code(markdown: str) -> str:
    """The text GitHub would link and mention in: fenced blocks and code spans removed."""
    text = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", markdown)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)


def test_the_fixture_nights_hold_the_findings_they_are_named_for() -> None:
    assert {(f.kind, f.subject) for f in regression_night().findings()} == {
        (ChangeKind.REGRESSION, CORE), (ChangeKind.REGRESSION, FRAMEWORK), (ChangeKind.MISSING, CRASHED),
    }  # fmt: skip
    assert {(f.kind, f.subject) for f in flaky_night().findings()} == {(ChangeKind.FLAKY, WORKS)}
    assert {(f.kind, f.subject) for f in broken_release_night().findings()} == {(ChangeKind.RELEASE_DOES_NOT_INSTALL, "torch 9.0.0")}
    assert clean_night().findings() == []


def test_a_regression_body_says_what_changed_where_since_when_the_boundary_and_how_to_reproduce() -> None:
    report = regression_night()
    found = finding(report, ChangeKind.REGRESSION, CORE)
    attachment = Attachment("d", {"requirements.txt": "torch==2.11.0\n", "repro.py": "print('OUTCOME: reproduced')\n"}, True, "3.11",
                            f'nox -s repro -- "{CORE}" --cell {FIXED}', "venv/bin/python repro.py")  # fmt: skip
    title, body = render_issue(found, report, NIGHT, LINKS, attachment)
    assert title == f"bugmatrix: regression: {CORE} reproduces where it was fixed"
    (marker,) = [m for m in parse_markers(body) if m.state is State.OPENED]
    assert body.startswith(marker.render()) and marker.key == f"regression:{CORE}" and marker.title == title
    assert marker.cells == (FIXED,) and marker.night == NIGHT and marker.digest == digest_of(found)
    row = next(line for line in body.splitlines() if line.startswith(f"| `{FIXED}`"))
    assert "✓ fixed → ✗ reproduced" in row and f"| {NIGHT} |" in row and "`torch 2.11.0 · pl 2.6.6`" in row.replace("py 3.11 · ", "")
    assert "Boundary in tonight's run: `✗ reproduced everywhere`" in body, "2.11.0 reproduces tonight and 2.12.0 is lost"
    assert "The expectation's evidence:" in body
    assert "### Below the pins (since the baseline)" in body and f"`{FIXED}`: cannot say" in body, "the fixtures record no distributions"
    assert "https://o.github.io/r/smoke/2026-11-23/index.html" in body, "the night's own page: a link that keeps working"
    assert "(https://o.github.io/r/smoke/2026-11-23/issues/d/requirements.lock.txt)" in body
    assert "uv pip sync --require-hashes --python venv/bin/python requirements.lock.txt" in body
    assert "print('OUTCOME: reproduced')" in body and "<details><summary>repro.py" in body


def test_run_text_cannot_mention_link_or_inject() -> None:
    report = regression_night()
    body = body_of(report, finding(report, ChangeKind.REGRESSION, CORE))
    assert "@octocat" in body and "pytorch/pytorch#165068" in body, "the message is there, as text"
    visible = outside_code(body)
    assert "@octocat" not in visible and "#165068" not in visible and "<script>" not in visible, "only inside code"
    for line in body.splitlines():
        if line.startswith("| `"):
            assert line.count(" | ") + 2 == line.count("|") - line.count("\\|"), f"a | in run text split the table row: {line}"


def test_a_missing_cell_is_one_body_for_all_of_its_variants() -> None:
    report = regression_night()
    found = finding(report, ChangeKind.MISSING, CRASHED)
    assert found.variant_id == "" and len(found.variants) >= 5
    title, body = render_issue(found, report, NIGHT, LINKS, Attachment(note="x"))
    assert title == f"bugmatrix: results missing in cell {CRASHED}"
    row = next(line for line in body.splitlines() if line.startswith(f"| `{CRASHED}`"))
    assert f"| {NIGHT} |" in row and "no run file for this cell" in row
    assert "Below the pins" not in body, "a lost cell has no environment to compare"
    assert f"The {len(found.variants)} variant(s) it is about: `{found.variants[0]}`" in body


def test_a_flaky_body_tells_the_flips_night_by_night() -> None:
    report = flaky_night()
    found = finding(report, ChangeKind.FLAKY, WORKS)
    assert found.cells == (REPRODUCED,) and [c.kind for c in found.changes] == [ChangeKind.FLAKY]
    title, body = render_issue(found, report, NIGHT, LINKS, Attachment(note="x"))
    assert title == f"bugmatrix: flaky: {WORKS} changes back and forth"
    assert "2026-11-20 fixed → 2026-11-21 timeout → 2026-11-22 fixed → 2026-11-23 timeout" in body
    assert not [f for f in report.findings() if f.kind is ChangeKind.NEW_FAILURE_MODE], "the flap files no new-failure-mode issue"


def test_a_broken_release_body_names_the_release_its_cells_and_uvs_reason() -> None:
    report = broken_release_night()
    found = finding(report, ChangeKind.RELEASE_DOES_NOT_INSTALL, "torch 9.0.0")
    assert found.release == ("torch", "9.0.0") and found.cells == (UNINSTALLABLE,)
    title, body = render_issue(found, report, NIGHT, LINKS, Attachment(note="x"))
    assert title == "bugmatrix: new release torch 9.0.0 does not install"
    row = next(line for line in body.splitlines() if line.startswith(f"| `{UNINSTALLABLE}`"))
    assert "No solution found when resolving dependencies" in row and "<b>" not in outside_code(row)


def test_the_same_night_gives_the_same_keys_digests_and_bodies() -> None:
    first, second = regression_night(), regression_night()
    assert [f.key for f in first.findings()] == [f.key for f in second.findings()]
    assert [body_of(first, f) for f in first.findings()] == [body_of(second, f) for f in second.findings()]


def test_the_digest_follows_what_the_finding_holds_not_its_messages() -> None:
    report = regression_night()
    found = finding(report, ChangeKind.REGRESSION, CORE)
    reworded = dataclasses.replace(
        found, message="another wording", changes=tuple(dataclasses.replace(c, message="x") for c in found.changes)
    )
    assert digest_of(reworded) == digest_of(found)
    spread = dataclasses.replace(found, cells=(*found.cells, REPRODUCED))
    assert digest_of(spread) != digest_of(found), "a finding in one more cell is news"


def test_markers_round_trip_and_nothing_in_an_id_can_end_the_comment() -> None:
    report = regression_night()
    found = dataclasses.replace(finding(report, ChangeKind.REGRESSION, CORE), subject="a--b-->c")
    marker = finding_marker(found, NIGHT, "title --> with arrows")
    text = marker.render()
    assert text.count("-->") == 1 and text.endswith(" -->") and "--" not in text[4:-3]
    assert parse_markers(f"intro\n{text}\nmore") == [marker]
    assert parse_markers("<!-- bugmatrix-finding {not json} -->") == [], "a hand-broken marker is no marker"
    assert parse_markers('<!-- bugmatrix-finding {"key": "k", "state": "closed-forever", "night": "n"} -->') == []


def test_file_stems_are_readable_unique_and_safe() -> None:
    keys = [f"regression:{CORE}", f"regression:{CORE.replace('[cpu]', '(cpu)')}", "release-does-not-install:torch 9.0.0"]
    stems = [file_stem(k) for k in keys]
    assert len(set(stems)) == 3 and all(re.fullmatch(r"[A-Za-z0-9_.-]+", s) for s in stems)
    assert stems[0].startswith("regression-autocast_cache-core-cpu-")


def test_a_repro_too_long_for_github_is_linked_not_inlined() -> None:
    report = regression_night()
    found = finding(report, ChangeKind.REGRESSION, CORE)
    huge = Attachment("d", {"requirements.txt": "torch==2.11.0\n", "repro.py": "x = 1\n" * 15_000}, True, "3.11", "cmd", "run")
    body = body_of(report, found, huge)
    assert len(body) < BODY_LIMIT and "repro.py (90,000 characters) is too long to show here" in body
    assert "[repro.py](https://o.github.io/r/smoke/2026-11-23/issues/d/repro.py)" in body


def test_without_a_site_the_body_points_at_the_workflow_runs_artifact() -> None:
    report = regression_night()
    found = finding(report, ChangeKind.REGRESSION, CORE)
    links = Links.for_site("", "nightly", NIGHT, "https://github.com/o/r/actions/runs/7")
    body = render_issue(found, report, NIGHT, links, Attachment("d", {"requirements.txt": "t\n"}, False, "3.11", "cmd", "run"))[1]
    assert "[the workflow run](https://github.com/o/r/actions/runs/7)" in body and "`issues` artifact" in body
    assert Links.for_site("https://o.github.io/r", "nightly", NIGHT).night == "https://o.github.io/r/2026-11-23/index.html"


def test_literal_and_fenced_outlast_any_backticks_in_the_text() -> None:
    assert literal("a ``b`` c") == "```a ``b`` c```" and literal("`x`") == "`` `x` ``" and literal("") == "—"
    assert literal("a|b", table=True) == "`a\\|b`" and literal("x" * 400).endswith("…`")
    assert fenced("```inside```\n") == "````\n```inside```\n````"


def test_the_exporter_attaches_the_real_repro_the_lock_and_says_why_when_it_cannot(tmp_path: Path) -> None:
    """The real cases and matrix: repro.py, requirements, the cell's lock; a renamed variant and a broken matrix are notes."""
    report = regression_night()
    exporter = ReproExporter(ROOT / "matrix.toml", ROOT / "cases", FIXTURES)
    attachment = exporter.export(finding(report, ChangeKind.REGRESSION, CORE), report.compat, tmp_path / "core")
    assert "OUTCOME" in attachment.files["repro.py"] and attachment.files["requirements.txt"].startswith("torch==2.11.0")
    assert attachment.locked == (ROOT / "locks" / f"{FIXED}.txt").is_file() and attachment.python == "3.11"
    assert (tmp_path / "core" / "ISSUE.md").is_file(), "the upstream issue draft comes along"
    renamed = dataclasses.replace(finding(report, ChangeKind.REGRESSION, CORE), subject="autocast_cache::gone[cpu]")
    assert "unknown variant" in exporter.export(renamed, report.compat, tmp_path / "gone").note
    cell = exporter.export(finding(report, ChangeKind.MISSING, CRASHED), report.compat, tmp_path / "cell")
    assert cell.run.startswith(f'nox -s "cell({CRASHED})"') and "torch==2.12.0" in cell.files["requirements.txt"]
    broken = ReproExporter(tmp_path / "no-matrix.toml", ROOT / "cases", FIXTURES)
    assert "could not be loaded" in broken.export(finding(report, ChangeKind.REGRESSION, CORE), report.compat, tmp_path / "b").note


@pytest.mark.parametrize("night", [regression_night, flaky_night, broken_release_night], ids=lambda f: f.__name__)
def test_every_body_fits_github_and_starts_with_its_marker(night: object) -> None:
    report = night()  # type: ignore[operator]
    for found in report.findings():
        body = body_of(report, found)
        assert len(body) < 65_536 and parse_markers(body)[0].key == found.key
        assert "bugmatrix-finding" in outside_code(body.split("\n", 1)[1]), "the visible footer carries the search word"


# -- the documented example (docs/site.md) ---------------------------------------------------------

README = ROOT / "docs" / "site.md"
EXAMPLE = re.compile(r"<!-- bugmatrix:issue-example[^>]*-->\n````markdown\n(.*?)````\n<!-- /bugmatrix:issue-example -->", re.S)
CUT = "… (repro.py is cut here in docs/site.md; the issue shows it whole)"


def readme_example(tmp_path: Path) -> str:
    """docs/site.md's issue body: a regression on the fixture night, rendered with the real repro export; repro.py's block cut."""
    baseline = msgspec.structs.replace(fixture_compat(), profile="nightly")
    message = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"
    tonight = baseline.with_entry(CORE, FIXED, outcome=Outcome.REPRODUCED, message=message)
    report = analyse(tonight, baseline, history(baseline, baseline, tonight))
    found = finding(report, ChangeKind.REGRESSION, CORE)
    attachment = ReproExporter(ROOT / "matrix.toml", ROOT / "cases", FIXTURES).export(found, report.compat, tmp_path / file_stem(found.key))
    links = Links.for_site("https://OWNER.github.io/bugmatrix/", "nightly", NIGHT, "")
    body = render_issue(found, report, NIGHT, links, attachment)[1]
    body = re.sub(
        r"(<details><summary>repro\.py) \([\d,]+ characters\)(</summary>\n\n(`{3,})python\n).*?\n\3\n",
        rf"\1 (… characters)\2{CUT}\n\3\n",
        body,
        flags=re.S,
    )
    return body


def test_the_readme_shows_a_body_exactly_as_the_renderer_writes_it(tmp_path: Path) -> None:
    """Regenerate with: python -c 'import tests.test_issue_bodies as t, pathlib, tempfile; print(t.readme_example(pathlib.Path(tempfile.mkdtemp())))'."""
    shown = EXAMPLE.search(README.read_text(encoding="utf-8"))
    assert shown, "docs/site.md: the issue example block (<!-- bugmatrix:issue-example -->) is gone"
    assert shown.group(1) == readme_example(tmp_path), "docs/site.md's issue example is stale; regenerate it (this test's docstring)"


def test_a_profile_and_a_cell_id_from_the_run_reach_the_body_only_as_text() -> None:
    report = regression_night()
    evil = "@octocat <img src=x onerror=alert(1)>"
    tonight = report.compat.with_entry(CORE, FIXED, log="Traceback: boom")
    # The document refuses such a profile (bugmatrix.values.profile_name); the body must hold it as text all the same.
    msgspec.structs.force_setattr(tonight, "profile", evil)
    hostile = analyse(tonight, report.baseline, report.own_nights)
    body = body_of(hostile, finding(hostile, ChangeKind.REGRESSION, CORE))
    outside = re.sub(r"(`+).*?\1", "", body, flags=re.DOTALL)
    assert "@octocat" not in outside and "<img" not in outside, outside
    assert f"<summary>Log recorded in <code>{FIXED}</code>" in body
