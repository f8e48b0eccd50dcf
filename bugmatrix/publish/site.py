"""The GitHub Pages site (``nox -s site``): the root profile's newest night at the root, each night under its date.

Pages serves only what the last deployment uploaded, so :func:`build_site` makes the new site from the previous one
and tonight's report. The previous site is untrusted: only regular files of its kinds are taken, under caps, and
written anew; anything else stops the build with one line. The site is built beside ``--out`` and moved into place.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

import msgspec
from msgspec.structs import replace

from bugmatrix import values
from bugmatrix.documents.nights import SITE_SCHEMA, NightsFile, SiteNight
from bugmatrix.errors import BugmatrixError, OutputError
from bugmatrix.files import LIMITS, check_writable_dir, read_bytes, read_json, write_json_atomic
from bugmatrix.publish import read_compat
from bugmatrix.publish.nights import write_history_pages
from bugmatrix.report.history import KEEP_NIGHTS
from bugmatrix.report.outputs import PAGES
from bugmatrix.tools.repro import MANIFEST as REPRO_MANIFEST

__all__ = [
    "KINDS",
    "MAX_FILE_BYTES",
    "MAX_SITE_BYTES",
    "ROOT_PROFILE",
    "add_arguments",
    "build_site",
    "load_site_nights",
    "night_path",
    "run",
]

#: The profile the scheduled nightly runs: the workflow makes its newest night the site's root (``--root-profile``).
ROOT_PROFILE = "nightly"
#: The kinds of file the site writes (pages, nights.json, issue bodies, repro scripts, requirements and locks).
KINDS = frozenset({".html", ".md", ".json", ".py", ".txt"})
#: The largest file taken from a previous site (a night's compat.json of the full profile is about 2 MB).
MAX_FILE_BYTES = LIMITS["site file"]
#: The whole site, previous nights and tonight together (GitHub Pages' own limit is 1 GB).
MAX_SITE_BYTES = 900 * 1024 * 1024
_REFUSED = "refused; the nightly falls back to an older site"


def night_path(profile: str, date: str, root_profile: str = ROOT_PROFILE) -> str:
    """``2026-11-23`` for the root profile, ``full/2026-11-23`` for another."""
    return date if profile == root_profile else f"{profile}/{date}"


def load_site_nights(site: Path) -> tuple[list[SiteNight], str | None]:
    """The nights a previous site holds (``nights.json``) and its root profile; an empty or absent directory is a new site."""
    index = site / "nights.json"
    if not site.is_dir() or not any(site.iterdir()):
        return [], None
    if site.is_symlink() or index.is_symlink():
        msg = f"{site if site.is_symlink() else index}: a symlink; a previous site holds regular files only (refused)"
        raise BugmatrixError(msg)
    try:
        document = msgspec.convert(read_json(index, "site index"), NightsFile)
        nights = [replace(n, path=n.path or night_path(n.profile, n.date)) for n in document.nights]
        root = values.profile_name(document.root or next((n.profile for n in nights if n.path == n.date), ROOT_PROFILE), "root")
        for n in nights:
            if n.path != night_path(n.profile, n.date, root) or not (site / n.path).is_dir():
                msg = f"the night {n.path}/ it lists is not in the site, or not where its root profile {root!r} puts it"
                raise ValueError(msg)
    except (BugmatrixError, ValueError) as exc:
        fix = f"remove {site} to start a new site (the nightly falls back to an older run's site by itself)"
        msg = f"{index}: not a readable bugmatrix site ({exc}); {fix}"
        raise BugmatrixError(msg) from None
    return nights, root


def _kept(nights: Iterable[SiteNight], tonight: SiteNight, keep: int) -> list[SiteNight]:
    """Tonight added (replacing the same date and profile), each profile's newest ``keep``; newest first."""
    merged = [n for n in nights if (n.date, n.profile) != (tonight.date, tonight.profile)] + [tonight]
    kept: list[SiteNight] = []
    for profile in dict.fromkeys(n.profile for n in merged):
        kept += sorted((n for n in merged if n.profile == profile), key=lambda n: n.date, reverse=True)[:keep]
    return sorted(kept, key=lambda n: (n.date, n.profile), reverse=True)


def _take(source: Path, target: Path, option: str, used: int, notes: list[str]) -> int:
    """Copy each file under ``source`` the site may take to ``target`` (a link or special file is refused, other kinds left
    out, sizes capped); the bytes used so far after it."""
    for top, dirs, files in os.walk(source, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(top) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                msg = f"{option} {path}: {kind}; a site holds regular files only ({_REFUSED})"
                raise BugmatrixError(msg)
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:  # os.walk's surrogate escapes: a name no page could link or write
                notes.append(f"site: left out {str(path)!a} (its name is not UTF-8; the site never writes one)")
                if name in dirs:
                    dirs.remove(name)
                continue
            if stat.S_ISDIR(info.st_mode):
                continue
            if info.st_nlink > 1:
                msg = f"{option} {path}: a hard link ({info.st_nlink} names for one file); the site never writes one ({_REFUSED})"
                raise BugmatrixError(msg)
            if path.suffix not in KINDS:
                if name != REPRO_MANIFEST:  # the repro export's own bookkeeping, never published
                    notes.append(f"site: left out {path} (not a kind of file the site writes)")
                continue
            used += info.st_size
            if info.st_size > MAX_FILE_BYTES or used > MAX_SITE_BYTES:
                cap = f"{MAX_FILE_BYTES:,} bytes per file" if info.st_size > MAX_FILE_BYTES else f"{MAX_SITE_BYTES:,} bytes for the site"
                msg = f"{option} {path}: {info.st_size:,} bytes, over the cap of {cap} (refused)"
                raise BugmatrixError(msg)
            copy = target / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(read_bytes(path, "site file", fix=_REFUSED))
    return used


def build_site(
    reports: Path,
    out: Path,
    *,
    date: str,
    profile: str | None = None,
    previous: Path | None = None,
    issues: Path | None = None,
    keep: int = KEEP_NIGHTS,
    root_profile: str | None = None,
    notes: list[str] | None = None,
) -> tuple[NightsFile, SiteNight]:
    """Write the site to ``out`` (absent or empty): ``previous``'s nights plus tonight's report and ``issues``; its index and tonight."""
    notes = [] if notes is None else notes
    date = values.iso_date(date, "--date:")
    missing = [name for name in PAGES if not (reports / name).is_file()]
    if missing:
        msg = f"--reports {reports}: no {missing[0]}; run the report first (nox -s report)"
        raise BugmatrixError(msg)
    if issues is not None and not issues.is_dir():
        msg = f"--issues {issues}: no such directory; pass the report's --issue-bodies directory or leave --issues out"
        raise BugmatrixError(msg)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        msg = f"--out {out}: exists and is not an empty directory; pass a new directory"
        raise BugmatrixError(msg)
    if os.path.ismount(out):  # the site is made beside --out and renamed into place: a mount point cannot be replaced
        msg = f"--out {out}: is a mount point; pass a new directory under it (e.g. {out / 'site'})"
        raise BugmatrixError(msg)
    check_writable_dir(out.parent, "--out", shown=out)  # read-only, /proc: one line before anything is read
    if keep < 1:
        msg = f"--keep {keep}: keep at least one night"
        raise BugmatrixError(msg)
    before, previous_root = load_site_nights(previous) if previous is not None else ([], None)
    compat = read_compat(reports / "compat.json", "run the report first (nox -s report)")  # --profile may not contradict it
    if profile is not None and compat.profile and profile != compat.profile:
        msg = f"--profile {profile}: the report in {reports} is of profile {compat.profile!r}; leave --profile out or pass --profile {compat.profile}"
        raise BugmatrixError(msg)
    profile = profile or compat.profile
    if not profile:
        msg = f"--reports {reports}: its compat.json names no profile; pass --profile P (the report's --profile)"
        raise BugmatrixError(msg)
    root = root_profile or previous_root or profile
    for option, name in (("--profile", profile), ("--root-profile", root)):
        values.profile_name(name, option)
    if previous_root is not None and root != previous_root:
        notes.append(f"site: the root is now profile {root} (was {previous_root}): {previous_root}'s nights moved under {previous_root}/")
    sources: dict[tuple[str, str], Path] = {}  # each past night kept: where it is in the previous site
    for n in before:
        assert previous is not None  # only a previous site has nights before tonight
        if lacking := [name for name in PAGES if not (previous / n.path / name).is_file()]:
            notes.append(f"site: skipped the night {n.path}/ of the previous site: it has no {lacking[0]}")
        else:
            sources[(n.date, n.profile)] = previous / n.path
    moved = [replace(n, path=night_path(n.profile, n.date, root)) for n in before if (n.date, n.profile) in sources]
    tonight = SiteNight(date, profile, compat.commit, night_path(profile, date, root))
    index = NightsFile(SITE_SCHEMA, _kept(moved, tonight, keep), root)

    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)  # a build killed earlier
    try:
        staging.mkdir(parents=True)
        used = 0
        for night in index.nights:
            if night is tonight:
                (staging / night.path).mkdir(parents=True)
                for name in PAGES:
                    (staging / night.path / name).write_bytes(read_bytes(reports / name, "site file", fix="run the report again"))
                if issues is not None:
                    used = _take(issues, staging / night.path / "issues", "--issues", used, notes)
                continue
            past = sources[(night.date, night.profile)]
            for above in (past.parent, past):  # <date>/ or <profile>/<date>/ (load_site_nights): no symlink on the way
                if above.is_symlink():
                    msg = f"--previous {above}: a symlink; a previous site holds regular files only ({_REFUSED})"
                    raise BugmatrixError(msg)
            used = _take(past, staging / night.path, "--previous", used, notes)
        write_json_atomic(staging / "nights.json", msgspec.to_builtins(index))
        write_history_pages(staging, index.nights, root)  # each profile's root pages, nights.html, badge, issue pages
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except OSError as exc:  # a full disk mid-copy: one line, and nothing partial left behind
        shutil.rmtree(staging, ignore_errors=True)
        msg = f"--out {out}: cannot write the site ({exc.strerror or exc}); nothing was written: free space or pass another directory"
        raise OutputError(msg) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # nothing partial left behind
        raise
    return index, tonight


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bugmatrix site`` (``nox -s site``): the options of :func:`build_site`."""
    parser.add_argument("--reports", type=Path, required=True, help="the report's directory (index.html, compat.md, compat.json)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the site (absent or empty)")
    parser.add_argument("--date", required=True, help="tonight's date, YYYY-MM-DD (the report's --date)")
    parser.add_argument("--profile", type=values.profile, help="the report's profile (default: the one its compat.json records)")
    parser.add_argument("--previous", type=Path, help="the previous site, unpacked (absent or empty: a new site)")
    parser.add_argument("--issues", type=Path, help="the report's --issue-bodies directory, published as <night>/issues/")
    parser.add_argument("--keep", type=values.count, default=KEEP_NIGHTS, help="nights kept per profile (default: %(default)s)")
    what = "the profile whose newest night is the root (default: the previous site's, else the report's profile)"
    parser.add_argument("--root-profile", type=values.profile, help=what)


def run(args: argparse.Namespace) -> int:
    """Build the site; print what it holds."""
    notes: list[str] = []
    options = {name: getattr(args, name) for name in ("date", "profile", "previous", "issues", "keep", "root_profile")}
    index, tonight = build_site(args.reports, args.out, notes=notes, **options)
    for note in notes:
        print(note, file=sys.stderr)
    own = [n for n in index.nights if n.profile == tonight.profile]
    print(
        f"site: {args.out} holds {len(index.nights)} night(s); {tonight.profile}: {own[-1].date} to {own[0].date}"
        f" ({len(own)} of at most {args.keep}); root profile: {index.root}"
    )
    return 0
