"""The GitHub Pages site: the latest night at the root, each night under its date, a bounded number kept.

GitHub Pages serves exactly what the last deployment uploaded, so a site with
past nights has to be carried from night to night: the nightly restores the
previous run's ``github-pages`` artifact, and :func:`build_site` makes the new
site from it and tonight's report (``nox -s site``)::

    index.html, compat.md, compat.json     the newest night of the nightly profile: the stable address
    2026-11-23/                             that night's page (+ issues/: the issue bodies and their repro files)
    full/index.html, full/2026-11-20/ ...   other profiles, under their own name, so a manual run never replaces the root
    nights.json, nights.html                every night kept, newest first

A night is kept for :data:`KEEP_NIGHTS` nights of its profile (the history's
span), so a link in an issue keeps working for a season; a re-run of a date
replaces that date. The site is built beside ``--out`` and moved into place
whole, and a previous site that cannot be read stops the build with one line
(nothing half-built is deployed; the workflow then falls back to an older
run's site).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.publish.nights import write_history_pages
from bugmatrix.report.history import KEEP_NIGHTS

__all__ = [
    "KEEP_NIGHTS",
    "PAGES",
    "ROOT_PROFILE",
    "SITE_SCHEMA",
    "SiteNight",
    "add_arguments",
    "build_site",
    "load_site_nights",
    "night_path",
    "run",
]

SITE_SCHEMA = "bugmatrix.site/1"
#: What the report writes and each night publishes.
PAGES = ("index.html", "compat.md", "compat.json")
#: The profile the scheduled nightly runs: its newest night is the site's root.
ROOT_PROFILE = "nightly"
_PROFILE = re.compile(r"[A-Za-z][\w-]*")


@dataclass(frozen=True)
class SiteNight:
    """One published night: where its page is, relative to the site's root."""

    date: str
    profile: str
    commit: str
    path: str


def night_path(profile: str, date: str, root_profile: str = ROOT_PROFILE) -> str:
    """``2026-11-23`` for the root profile, ``full/2026-11-23`` for another."""
    return date if profile == root_profile else f"{profile}/{date}"


def _profile_root(profile: str, root_profile: str) -> str:
    return "" if profile == root_profile else profile


def _checked_date(value: object, where: str) -> str:
    try:
        return dt.date.fromisoformat(str(value)).isoformat()
    except ValueError:
        msg = f"{where}: {value!r} is not a date (YYYY-MM-DD)"
        raise BugmatrixError(msg) from None


def load_site_nights(site: Path, root_profile: str = ROOT_PROFILE) -> list[SiteNight]:
    """The nights a previous site holds (``nights.json``); an empty or absent directory is a new site."""
    index = site / "nights.json"
    if not site.is_dir() or not any(site.iterdir()):
        return []
    fix = f"remove {site} to start a new site (the nightly falls back to an older run's site by itself)"
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        if data.get("schema") != SITE_SCHEMA:
            msg = f"schema {data.get('schema')!r} is not {SITE_SCHEMA!r}"
            raise ValueError(msg)
        nights = []
        for entry in data["nights"]:
            date = _checked_date(entry["date"], str(index))
            profile = str(entry["profile"])
            if not _PROFILE.fullmatch(profile):
                msg = f"profile {profile!r} is not a profile name"
                raise ValueError(msg)
            path = night_path(profile, date, root_profile)
            if not (site / path).is_dir():
                msg = f"the night {path}/ it lists is not in the site"
                raise ValueError(msg)
            nights.append(SiteNight(date, profile, str(entry.get("commit", "")), path))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{index}: not a readable bugmatrix site ({exc}); {fix}"
        raise BugmatrixError(msg) from None
    return nights


def _kept(nights: Iterable[SiteNight], tonight: SiteNight, keep: int) -> list[SiteNight]:
    """Tonight added (replacing the same date and profile), each profile's newest ``keep``; newest first."""
    merged = [n for n in nights if (n.date, n.profile) != (tonight.date, tonight.profile)] + [tonight]
    kept: list[SiteNight] = []
    for profile in dict.fromkeys(n.profile for n in merged):
        kept += sorted((n for n in merged if n.profile == profile), key=lambda n: n.date, reverse=True)[:keep]
    return sorted(kept, key=lambda n: (n.date, n.profile), reverse=True)


def _commit(reports: Path) -> str:
    compat = reports / "compat.json"
    try:
        return str(json.loads(compat.read_text(encoding="utf-8")).get("commit", ""))
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        msg = f"{compat}: cannot read tonight's report ({exc}); run the report first (nox -s report)"
        raise BugmatrixError(msg) from None


def build_site(
    reports: Path,
    out: Path,
    *,
    date: str,
    profile: str,
    previous: Path | None = None,
    attachments: Path | None = None,
    keep: int = KEEP_NIGHTS,
    root_profile: str = ROOT_PROFILE,
) -> list[SiteNight]:
    """Write the site to ``out`` (absent or empty): ``previous``'s nights plus tonight's report; returns the nights kept.

    ``attachments`` (the issue bodies and their repro files) is published as
    ``<night>/issues/``, so an issue can link the lock of the cell it is about.
    """
    date = _checked_date(date, "--date")
    if not _PROFILE.fullmatch(profile):
        msg = f"--profile {profile!r}: not a profile name (letters, digits, - and _)"
        raise BugmatrixError(msg)
    missing = [name for name in PAGES if not (reports / name).is_file()]
    if missing:
        msg = f"--reports {reports}: no {missing[0]}; run the report first (nox -s report)"
        raise BugmatrixError(msg)
    if attachments is not None and not attachments.is_dir():
        msg = f"--issues {attachments}: no such directory; pass the report's --issue-bodies directory or leave --issues out"
        raise BugmatrixError(msg)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        msg = f"--out {out}: exists and is not an empty directory; pass a new directory"
        raise BugmatrixError(msg)
    if keep < 1:
        msg = f"--keep {keep}: keep at least one night"
        raise BugmatrixError(msg)
    before = load_site_nights(previous, root_profile) if previous is not None else []
    tonight = SiteNight(date, profile, _commit(reports), night_path(profile, date, root_profile))
    nights = _kept(before, tonight, keep)

    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)  # a build killed earlier
    staging.mkdir(parents=True)
    for night in nights:
        if night is tonight:
            (staging / night.path).mkdir(parents=True)
            for name in PAGES:
                shutil.copy2(reports / name, staging / night.path / name)
            if attachments is not None and any(attachments.iterdir()):
                shutil.copytree(attachments, staging / night.path / "issues")
        else:
            assert previous is not None  # only tonight comes from elsewhere
            shutil.copytree(previous / night.path, staging / night.path)
    newest = {}
    for night in nights:  # newest first: the first of each profile is its root
        newest.setdefault(night.profile, night)
    for night in newest.values():
        root = staging / _profile_root(night.profile, root_profile)
        for name in PAGES:
            shutil.copy2(staging / night.path / name, root / name)
    write_json_atomic(staging / "nights.json", {"schema": SITE_SCHEMA, "nights": [asdict(n) for n in nights]})
    write_history_pages(staging, [(n.date, n.profile, n.commit, n.path) for n in nights], root_profile)  # nights.html, badge, issue pages
    if root_profile not in newest:  # no nightly yet (a manual run of another profile came first): the root lists the nights
        shutil.copy2(staging / "nights.html", staging / "index.html")
    if out.exists():
        out.rmdir()
    staging.rename(out)
    return nights


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix site`` (``nox -s site``): the options of :func:`build_site`."""
    parser.add_argument("--reports", type=Path, required=True, help="the report's directory (index.html, compat.md, compat.json)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the site (absent or empty)")
    parser.add_argument("--date", required=True, help="tonight's date, YYYY-MM-DD (the report's --date)")
    parser.add_argument("--profile", default=ROOT_PROFILE, help="the report's profile (default: %(default)s)")
    parser.add_argument("--previous", type=Path, help="the previous site, unpacked (absent or empty: a new site)")
    parser.add_argument("--issues", type=Path, help="the report's --issue-bodies directory, published as <night>/issues/")
    parser.add_argument("--keep", type=int, default=KEEP_NIGHTS, help="nights kept per profile (default: %(default)s)")
    parser.add_argument("--root-profile", default=ROOT_PROFILE, help="the profile whose newest night is the root (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Build the site; print what it holds."""
    nights = build_site(
        args.reports,
        args.out,
        date=args.date,
        profile=args.profile,
        previous=args.previous,
        attachments=args.issues,
        keep=args.keep,
        root_profile=args.root_profile,
    )
    own = [n for n in nights if n.profile == args.profile]
    print(
        f"site: {args.out} holds {len(nights)} night(s); {args.profile}: {own[-1].date} to {own[0].date} ({len(own)} of at most {args.keep})"
    )
    return 0
