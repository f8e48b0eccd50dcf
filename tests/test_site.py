"""The Pages site: latest night at the root, each night under its date, bounded, other profiles apart, a bad previous site refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from bugmatrix.cli import main
from bugmatrix.documents.nights import NightsFile, SiteNight
from bugmatrix.errors import BugmatrixError
from bugmatrix.publish.site import build_site, load_site_nights
from bugmatrix.report.outputs import PAGES


def report(tmp_path: Path, night: str, commit: str = "abc1234", profile: str = "nightly") -> Path:
    """A report directory whose pages say which night they are."""
    reports = tmp_path / f"reports-{night}"
    reports.mkdir()
    (reports / "index.html").write_text(f"<p>{night}</p>")
    (reports / "compat.md").write_text(f"# {night}\n")
    compat = {"schema": "bugmatrix.compat/4", "commit": commit, "profile": profile, "cells": [], "variants": [], "results": {}}
    (reports / "compat.json").write_text(json.dumps(compat))
    return reports


def nights(
    tmp_path: Path, dates: list[str], *, keep: int = 90, profile: str = "nightly", start: Path | None = None, root: str | None = None
) -> Path:
    """Build one site per date, each from the previous one, as the nightly does; the last site's path."""
    previous = start
    for index, date in enumerate(dates):
        out = tmp_path / f"site-{profile}-{index}-{date}"
        reports = report(tmp_path, f"{profile}-{index}-{date}", profile=profile)
        build_site(reports, out, date=date, previous=previous, keep=keep, root_profile=root)
        previous = out
    assert previous is not None
    return previous


def test_the_first_night_is_at_the_root_and_under_its_date(tmp_path: Path) -> None:
    site = nights(tmp_path, ["2026-11-23"])
    assert (site / "index.html").read_text() == (site / "2026-11-23" / "index.html").read_text() == "<p>nightly-0-2026-11-23</p>"
    assert all((site / name).is_file() and (site / "2026-11-23" / name).is_file() for name in PAGES)
    index = json.loads((site / "nights.json").read_text())
    assert index["nights"] == [{"date": "2026-11-23", "profile": "nightly", "commit": "abc1234", "path": "2026-11-23"}]
    assert 'href="2026-11-23/index.html"' in (site / "nights.html").read_text()


def test_past_nights_are_kept_up_to_the_bound_and_the_root_is_the_newest(tmp_path: Path) -> None:
    site = nights(tmp_path, ["2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"], keep=3)
    assert sorted(p.name for p in site.iterdir() if p.is_dir()) == ["2026-11-21", "2026-11-22", "2026-11-23"]
    assert (site / "index.html").read_text() == "<p>nightly-3-2026-11-23</p>"
    assert (site / "2026-11-21" / "index.html").read_text() == "<p>nightly-1-2026-11-21</p>", "a kept night is the page of that night"
    assert [n.date for n in load_site_nights(site)[0]] == ["2026-11-23", "2026-11-22", "2026-11-21"]


def test_a_rerun_replaces_its_date_and_an_older_date_does_not_take_the_root(tmp_path: Path) -> None:
    site = nights(tmp_path, ["2026-11-22", "2026-11-23", "2026-11-23", "2026-11-21"])
    assert (site / "2026-11-23" / "index.html").read_text() == "<p>nightly-2-2026-11-23</p>", "the re-run replaced the first run"
    assert (site / "index.html").read_text() == "<p>nightly-2-2026-11-23</p>", "the root stays the newest night"
    assert [n.date for n in load_site_nights(site)[0]] == ["2026-11-23", "2026-11-22", "2026-11-21"]


def test_another_profile_lives_under_its_name_and_leaves_the_root_alone(tmp_path: Path) -> None:
    nightly = nights(tmp_path, ["2026-11-22"])
    site = nights(tmp_path, ["2026-11-23"], profile="full", start=nightly)
    assert (site / "index.html").read_text() == "<p>nightly-0-2026-11-22</p>"
    assert (site / "full" / "index.html").read_text() == (site / "full" / "2026-11-23" / "index.html").read_text()
    assert {(n.profile, n.path) for n in load_site_nights(site)[0]} == {("nightly", "2026-11-22"), ("full", "full/2026-11-23")}


def test_without_a_night_of_the_root_profile_yet_the_root_lists_the_nights(tmp_path: Path) -> None:
    site = nights(tmp_path, ["2026-11-23"], profile="smoke", root="nightly")
    assert 'href="smoke/2026-11-23/index.html"' in (site / "index.html").read_text()


def test_a_site_follows_the_profile_it_was_built_for_and_says_it(tmp_path: Path) -> None:
    """Issue 42: no --profile and no --root-profile: the report's profile is the site's (root, badge), never "nightly"."""
    site = nights(tmp_path, ["2026-11-23"], profile="smoke")
    assert (site / "index.html").read_text() == (site / "2026-11-23" / "index.html").read_text() == "<p>smoke-0-2026-11-23</p>"
    index = json.loads((site / "nights.json").read_text())
    assert index["root"] == "smoke" and index["nights"][0]["path"] == "2026-11-23"
    badge = json.loads((site / "badge.json").read_text())
    assert badge["label"] == "bugmatrix smoke" and badge["message"] == "2026-11-23 · 0 findings", badge
    later = nights(tmp_path, ["2026-11-24"], profile="full", start=site)
    assert json.loads((later / "nights.json").read_text())["root"] == "smoke", "the previous site's root stays"
    assert (later / "full" / "2026-11-24" / "index.html").is_file() and (later / "2026-11-23" / "index.html").is_file()


def test_the_root_profile_changes_without_deleting_the_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The old root's nights move under their profile's folder, the new root's nights to the root; nothing is lost."""
    site = nights(tmp_path, ["2026-11-21", "2026-11-22"], profile="smoke")
    (tmp_path / "b").mkdir()
    site = nights(tmp_path / "b", ["2026-11-22"], start=site)  # a nightly on the smoke site: under nightly/
    assert (site / "nightly" / "2026-11-22" / "index.html").is_file()
    out = tmp_path / "switched"
    args = ["site", "--reports", str(report(tmp_path, "tonight")), "--out", str(out), "--date", "2026-11-23", "--previous", str(site)]
    assert main([*args, "--root-profile", "nightly"]) == 0
    assert "the root is now profile nightly (was smoke)" in capsys.readouterr().err
    paths = {(n.profile, n.date): n.path for n in load_site_nights(out)[0]}
    assert paths == {
        ("nightly", "2026-11-23"): "2026-11-23", ("nightly", "2026-11-22"): "2026-11-22",
        ("smoke", "2026-11-22"): "smoke/2026-11-22", ("smoke", "2026-11-21"): "smoke/2026-11-21",
    }  # fmt: skip
    assert (out / "smoke" / "2026-11-21" / "index.html").read_text() == "<p>smoke-0-2026-11-21</p>", "moved, not lost"
    assert (out / "2026-11-22" / "index.html").read_text() == "<p>nightly-0-2026-11-22</p>"
    assert (out / "index.html").read_text() == "<p>tonight</p>" and (
        out / "smoke" / "index.html"
    ).read_text() == "<p>smoke-1-2026-11-22</p>"
    assert not (out / "nightly").exists(), "no night is left where the old root put it"
    assert json.loads((out / "badge.json").read_text())["label"] == "bugmatrix nightly"


def test_the_profile_comes_from_the_report_and_a_contradiction_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = report(tmp_path, "n", profile="smoke")
    args = ["site", "--reports", str(reports), "--out", str(tmp_path / "s"), "--date", "2026-11-23"]
    assert main([*args, "--profile", "nightly"]) == 2
    err = capsys.readouterr().err
    assert "--profile nightly: the report in" in err and "is of profile 'smoke'" in err and err.count("\n") == 1, err
    assert not (tmp_path / "s").exists()
    assert main(args) == 0
    assert "smoke: 2026-11-23 to 2026-11-23" in capsys.readouterr().out


def test_the_issue_bodies_are_published_under_their_night(tmp_path: Path) -> None:
    bodies = tmp_path / "issues"
    (bodies / "regression-abc").mkdir(parents=True)
    (bodies / "regression-abc.md").write_text("body")
    (bodies / "regression-abc" / "requirements.lock.txt").write_text("torch==2.5.1 --hash=sha256:00")
    site = tmp_path / "site"
    build_site(report(tmp_path, "n"), site, date="2026-11-23", profile="nightly", issues=bodies)
    assert (site / "2026-11-23" / "issues" / "regression-abc" / "requirements.lock.txt").is_file()


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{", "not a readable bugmatrix site"), ('{"schema": "other/1", "nights": []}', "schema"),
     ('{"schema": "bugmatrix.site/1", "nights": [{"date": "2026-11-22", "profile": "nightly"}]}', "2026-11-22/ it lists is not in the site"),
     ('{"schema": "bugmatrix.site/1", "nights": [{"date": "yesterday", "profile": "nightly"}]}', "is not a date")],
    ids=["truncated", "schema", "lost-night", "bad-date"],
)  # fmt: skip
def test_a_previous_site_that_cannot_be_read_is_one_line_and_nothing_is_written(tmp_path: Path, content: str, needle: str) -> None:
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "nights.json").write_text(content)
    out = tmp_path / "site"
    with pytest.raises(BugmatrixError, match=needle) as error:
        build_site(report(tmp_path, "n"), out, date="2026-11-23", profile="nightly", previous=previous)
    assert "nights.json" in str(error.value) and "\n" not in str(error.value)
    assert not out.exists()


def test_nights_json_is_its_model_and_an_index_from_before_root_and_path_still_loads(tmp_path: Path) -> None:
    """nights.json is read and written through bugmatrix.documents.nights; keys an older site lacks take their defaults."""
    site = nights(tmp_path, ["2026-11-22", "2026-11-23"])
    written = msgspec.json.decode((site / "nights.json").read_bytes(), type=NightsFile)
    assert written.root == "nightly" and [n.path for n in written.nights] == ["2026-11-23", "2026-11-22"]
    older = {
        "schema": "bugmatrix.site/1",
        "nights": [{"date": "2026-11-23", "profile": "nightly"}, {"date": "2026-11-22", "profile": "nightly"}],
    }
    (site / "nights.json").write_text(json.dumps(older))
    assert load_site_nights(site) == (
        [SiteNight("2026-11-23", "nightly", "", "2026-11-23"), SiteNight("2026-11-22", "nightly", "", "2026-11-22")],
        "nightly",
    )
    (site / "nights.json").write_text(json.dumps({**older, "surprise": 1}))
    with pytest.raises(BugmatrixError, match=r"not a readable bugmatrix site.*surprise"):
        load_site_nights(site)


def test_the_cli_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = report(tmp_path, "n")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("a user's file")
    foreign = report(tmp_path, "foreign")
    (foreign / "compat.json").write_text('{"commit": "abc1234", "results": 1}')
    cases = [
        (["--reports", str(foreign), "--out", str(tmp_path / "s"), "--date", "2026-11-23"], "not a compat document"),
        (["--reports", str(reports), "--out", str(occupied), "--date", "2026-11-23"], "is not an empty directory"),
        (["--reports", str(tmp_path), "--out", str(tmp_path / "s"), "--date", "2026-11-23"], "no compat.json; run the report first"),
        (["--reports", str(reports), "--out", str(tmp_path / "s"), "--date", "23.11.2026"], "is not a date"),
        (["--reports", str(reports), "--out", str(tmp_path / "s"), "--date", "2026-11-23", "--issues", str(tmp_path / "no")], "--issues"),
    ]
    for argv, needle in cases:
        assert main(["site", *argv]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
    assert (occupied / "keep.txt").read_text() == "a user's file"
    assert not (tmp_path / "s").exists()
    assert main(["site", "--reports", str(reports), "--out", str(tmp_path / "s"), "--date", "2026-11-23"]) == 0
    assert "1 night(s)" in capsys.readouterr().out


def _refused(tmp_path: Path, previous: Path, capsys: pytest.CaptureFixture[str], needle: str) -> None:
    """The CLI refuses ``previous`` in one line, and leaves no site and nothing partial behind."""
    tmp_path = tmp_path / f"try-{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    out = tmp_path / "site"
    args = ["site", "--reports", str(report(tmp_path, "tonight")), "--out", str(out), "--date", "2026-11-25", "--previous", str(previous)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert not out.exists() and not (tmp_path / ".site.partial").exists()


def test_symlinks_in_a_previous_site_are_refused_and_nothing_outside_reaches_the_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token.txt").write_text("secret")
    for name in PAGES:
        (outside / name).write_text("planted")
    # A night directory that is a link out of the tree.
    (tmp_path / "a").mkdir()
    site = nights(tmp_path / "a", ["2026-11-23", "2026-11-24"])
    night = site / "2026-11-23"
    for path in night.iterdir():
        path.unlink()
    night.rmdir()
    night.symlink_to(outside)
    _refused(tmp_path, site, capsys, "2026-11-23: a symlink")
    # A file inside a night that is a link to a file outside, and a link to the whole filesystem.
    for link, target in (("token.txt", outside / "token.txt"), ("rootfs", Path("/"))):
        (tmp_path / link).mkdir()
        site = nights(tmp_path / link, ["2026-11-23", "2026-11-24"])
        (site / "2026-11-23" / link).symlink_to(target)
        _refused(tmp_path, site, capsys, f"{link}: a symlink")


def test_an_oversized_file_in_a_previous_site_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bugmatrix.publish.site.MAX_FILE_BYTES", 1000)
    (tmp_path / "a").mkdir()
    site = nights(tmp_path / "a", ["2026-11-23", "2026-11-24"])
    (site / "2026-11-23" / "compat.json").write_text("x" * 2000)
    _refused(tmp_path, site, capsys, "over the cap of 1,000 bytes per file")


def test_a_past_night_missing_a_page_is_named_and_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    site = nights(tmp_path / "a", ["2026-11-23", "2026-11-24"])
    (site / "2026-11-23" / "compat.md").unlink()
    (site / "2026-11-24" / "notes.sh").write_text("echo not ours")
    out = tmp_path / "site"
    args = ["site", "--reports", str(report(tmp_path, "tonight")), "--out", str(out), "--date", "2026-11-25", "--previous", str(site)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "skipped the night 2026-11-23/" in err and "no compat.md" in err and "left out" in err and "notes.sh" in err, err
    assert not (out / "2026-11-23").exists() and (out / "2026-11-24" / "index.html").is_file()
    assert not (out / "2026-11-24" / "notes.sh").exists()
    assert [n["date"] for n in json.loads((out / "nights.json").read_text())["nights"]] == ["2026-11-25", "2026-11-24"]


def test_a_hard_link_in_a_previous_site_is_refused_and_nothing_of_it_is_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45, item 6: a second name of a file outside the tree (a hard link to a secret) was published as a page."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the secret\n")
    (tmp_path / "a").mkdir()
    site = nights(tmp_path / "a", ["2026-11-23", "2026-11-24"])
    os.link(secret, site / "2026-11-23" / "passwd.txt")
    _refused(tmp_path, site, capsys, "passwd.txt: a hard link (2 names for one file)")
    # Every page that is published is a new file: nothing in a built site is a link to what it was made from.
    out = tmp_path / "fresh-site"
    build_site(report(tmp_path, "n"), out, date="2026-11-25", profile="nightly", previous=nights(tmp_path / "a", ["2026-11-20"]))
    assert all(p.stat().st_nlink == 1 for p in out.rglob("*") if p.is_file())


def test_a_name_that_is_not_utf8_in_a_previous_site_is_left_out_and_the_site_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45, item 7: a file name that is not UTF-8 was a UnicodeEncodeError traceback from write_text_atomic."""
    (tmp_path / "a").mkdir()
    site = nights(tmp_path / "a", ["2026-11-23", "2026-11-24"])
    issues = os.fsencode(site / "2026-11-23" / "issues")
    os.mkdir(issues)
    with open(os.path.join(issues, b"regression-\xff.md"), "wb") as handle:
        handle.write(b"<!-- bugmatrix:finding -->\n# a finding\n")
    os.mkdir(os.path.join(issues, b"dir-\xfe"))
    out = tmp_path / "site"
    args = ["site", "--reports", str(report(tmp_path, "tonight")), "--out", str(out), "--date", "2026-11-25", "--previous", str(site)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "regression-\\udcff.md" in err and "its name is not UTF-8" in err and "dir-\\udcfe" in err, err
    assert (out / "2026-11-23" / "index.html").is_file() and not list((out / "2026-11-23").glob("issues/*"))
    assert "regression-" not in (out / "nights.html").read_text()
