"""The nightly's publishing: Pages with the official actions, write permissions only where used, skipped cleanly when off.

The steps' shell runs here against a fake ``gh`` on PATH (a stand-in for the
GitHub CLI, not a library under test) answering as a repository with Pages or
issues on, off, or unreadable would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.test_workflow import load_workflow, step_running, step_using

#: Every job's own permissions (None: the workflow's read-only default). Write access lives in one job per kind.
PERMISSIONS: dict[str, dict[str, str] | None] = {
    "plan": {"contents": "read", "actions": "read"},  # gh run download: the previous night's results (bugmatrix/run/reuse.py)
    "cells": None,
    "report": {"contents": "read", "actions": "read", "pages": "read"},
    "pages": {"pages": "write", "id-token": "write"},
    "issues": {"contents": "read", "issues": "write"},
}

FAKE_GH = """#!{python}
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if args[:2] == ["api", "repos/o/r"]:
    answer = os.environ["FAKE_REPO"]
elif args[:2] == ["api", "repos/o/r/pages"]:
    answer = os.environ.get("FAKE_PAGES", "fail")
elif args[:2] == ["run", "list"]:
    answer = "42\\n41"
elif args[:2] == ["run", "download"] and args[2] == "41" and os.environ.get("FAKE_SITE_TAR"):
    target = args[args.index("-D") + 1]
    os.makedirs(target, exist_ok=True)
    import shutil
    shutil.copy(os.environ["FAKE_SITE_TAR"], os.path.join(target, "artifact.tar"))
    answer = ""
else:
    answer = "fail"
if answer == "fail":
    print("HTTP 404: Not Found", file=sys.stderr)
    sys.exit(1)
print(answer)
"""


def run_step(tmp_path: Path, script: str, **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """Run a step's script as GitHub does (bash -e -o pipefail) with the fake gh; returns the run and the step's outputs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "gh"
    fake.write_text(FAKE_GH.format(python=sys.executable))
    fake.chmod(0o755)
    output = tmp_path / "output"
    output.unlink(missing_ok=True)
    full_env = {
        **os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GITHUB_REPOSITORY": "o/r", "GITHUB_REF": "refs/heads/main",
        "GITHUB_OUTPUT": str(output), "FAKE_GH_LOG": str(tmp_path / "gh.log"), "RUNNER_TEMP": str(tmp_path / "temp"),
        "BUGMATRIX_REPORTS": str(tmp_path / "reports"), "PUBLISH": "", "PAGES_SWITCH": "", "ISSUES_SWITCH": "", **env,
    }  # fmt: skip
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], env=full_env, capture_output=True, text=True, timeout=30, check=False
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() else {}
    return done, outputs


def report_step(job: str, step_id: str) -> dict[str, Any]:
    return next(s for s in load_workflow()["jobs"][job]["steps"] if s.get("id") == step_id)


def test_write_permissions_live_only_in_the_job_that_uses_them() -> None:
    workflow = load_workflow()
    assert workflow["permissions"] == {"contents": "read"}, "the workflow-wide default stays read-only"
    jobs = workflow["jobs"]
    assert {name: job.get("permissions") for name, job in jobs.items()} == PERMISSIONS
    writers = {name for name, job in jobs.items() if "write" in (job.get("permissions") or {}).values()}
    assert writers == {"pages", "issues"}


def test_the_deploy_job_runs_only_the_official_action() -> None:
    """The job holding pages/id-token write checks out nothing and runs no script of this repository."""
    jobs = load_workflow()["jobs"]
    pages = jobs["pages"]
    assert pages["needs"] == "report"
    assert pages["if"] == "${{ !cancelled() && needs.report.outputs.site == 'true' }}", "a night failing on a regression still publishes"
    assert pages["environment"] == {"name": "github-pages", "url": "${{ steps.deployment.outputs.page_url }}"}
    assert [s["uses"].split("@")[0] for s in pages["steps"]] == ["actions/deploy-pages"]
    assert not any("run" in s for s in pages["steps"])
    assert jobs["report"]["outputs"]["site"] == "${{ steps.site.outputs.built }}"


def test_the_report_job_builds_the_site_and_uploads_it_with_the_official_action() -> None:
    report = load_workflow()["jobs"]["report"]
    steps = report["steps"]
    targets, site = report_step("report", "targets"), report_step("report", "site")
    run = step_running(report, r"\bpython -m bugmatrix report\b")
    assert '--date "$NIGHT"' in run["run"] and run["env"]["NIGHT"] == "${{ steps.targets.outputs.night }}"
    assert site["env"]["NIGHT"] == run["env"]["NIGHT"], "the site files the night under the date the report used"
    assert "nox -s site --" in site["run"] and '--previous "$RUNNER_TEMP/previous-site"' in site["run"] and '--date "$NIGHT"' in site["run"]
    assert "--root-profile nightly" in site["run"], "the issues link nights where Links.for_site puts them: the nightly's at the root"
    restore = step_running(report, r"-n github-pages\b")
    (upload,) = step_using(report, "actions/upload-pages-artifact")
    assert upload["with"] == {"path": "${{ runner.temp }}/site", "retention-days": 90}, "the next night restores the site from it"
    assert upload["if"] == "always() && steps.site.outputs.built == 'true'"
    for step in (restore, site):
        assert step["if"] == "always() && steps.targets.outputs.pages == 'true'"
    assert steps.index(targets) < steps.index(run) < steps.index(restore) < steps.index(site) < steps.index(upload)


def repo(has_issues: str = "true", has_pages: str = "true", branch: str = "main") -> str:
    return f"{has_issues}\t{has_pages}\t{branch}"


ON = "workflow\thttps://o.github.io/r/"


@pytest.mark.parametrize(
    ("env", "pages", "issues", "why"),
    [
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON}, "true", "true", "Pages: on, at https://o.github.io/r/"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON, "PUBLISH": "true"}, "true", "true", "issues: on"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON, "PUBLISH": "false"}, "false", "false", "publish input"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON, "GITHUB_REF": "refs/heads/topic"}, "false", "false", "not the default branch"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON, "PAGES_SWITCH": "off"}, "false", "true", "BUGMATRIX_PAGES=off"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": ON, "ISSUES_SWITCH": "off"}, "true", "false", "BUGMATRIX_ISSUES=off"),
        ({"FAKE_REPO": repo(has_pages="false")}, "false", "true", "Pages: not enabled"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": "legacy\thttps://o.github.io/r/"}, "false", "true", "built from a branch"),
        ({"FAKE_REPO": repo(), "FAKE_PAGES": "fail"}, "false", "true", "built from a branch"),
        ({"FAKE_REPO": repo(has_issues="false"), "FAKE_PAGES": ON}, "true", "false", "issues: disabled"),
        ({"FAKE_REPO": "fail"}, "false", "false", "could not read"),
    ],
    ids=["on", "input-on", "input-off", "topic-branch", "pages-var-off", "issues-var-off", "no-pages", "legacy-pages", "pages-unreadable",
         "no-issues", "settings-unreadable"],
)  # fmt: skip
def test_where_findings_go_is_decided_without_ever_failing_the_night(
    tmp_path: Path, env: dict[str, str], pages: str, issues: str, why: str
) -> None:
    done, outputs = run_step(tmp_path, report_step("report", "targets")["run"], **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (outputs["pages"], outputs["issues"]) == (pages, issues), done.stdout
    assert outputs["site-url"] == ("https://o.github.io/r/" if pages == "true" else "")
    assert why in done.stdout, done.stdout
    assert len(outputs["night"]) == 10


def test_the_targets_step_reads_the_switches_through_env() -> None:
    env = report_step("report", "targets")["env"]
    assert env["PUBLISH"] == "${{ inputs.publish }}"
    assert env["PAGES_SWITCH"] == "${{ vars.BUGMATRIX_PAGES }}" and env["ISSUES_SWITCH"] == "${{ vars.BUGMATRIX_ISSUES }}"
    inputs = load_workflow()[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads `on` as True
    assert inputs["publish"] == {"description": inputs["publish"]["description"], "type": "boolean", "default": True}


def test_the_site_is_restored_from_the_newest_run_that_has_one(tmp_path: Path) -> None:
    previous = tmp_path / "old-site"
    (previous / "2026-11-22").mkdir(parents=True)
    (previous / "2026-11-22" / "index.html").write_text("old night")
    tar = tmp_path / "artifact.tar"
    with tarfile.open(tar, "w") as archive:
        archive.add(previous, arcname=".")
    script = step_running(load_workflow()["jobs"]["report"], r"-n github-pages\b")["run"]
    done, _ = run_step(tmp_path, script, FAKE_SITE_TAR=str(tar))
    assert done.returncode == 0 and "restored from run 41" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "temp" / "previous-site" / "2026-11-22" / "index.html").read_text() == "old night"
    elsewhere = tmp_path / "no-artifact"
    elsewhere.mkdir()
    done, _ = run_step(elsewhere, script)
    assert done.returncode == 0 and "starting a new one" in done.stdout, done.stdout + done.stderr


def test_no_report_tonight_leaves_the_published_site_as_it_was(tmp_path: Path) -> None:
    done, outputs = run_step(tmp_path, report_step("report", "site")["run"], NIGHT="2026-11-23", PROFILE="nightly")
    assert done.returncode == 0 and "stays as it was" in done.stdout
    assert "built" not in outputs, "nothing to deploy: the pages job is skipped"


FAKE_NOX = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_NOX_ARGS"
echo "open regression:x: new finding -> https://github.com/o/r/issues/1"
echo "issues: 1 finding(s); 1 open"
exit "${FAKE_NOX_EXIT:-0}"
"""


def test_the_issues_job_files_what_the_report_job_rendered_with_the_only_issues_write() -> None:
    jobs = load_workflow()["jobs"]
    job = jobs["issues"]
    assert job["needs"] == ["report", "pages"], "after the deploy: the links in a new issue already work"
    assert job["if"] == "${{ !cancelled() && needs.report.outputs.issues == 'true' }}", "a night failing on a regression files its issues"
    report = jobs["report"]
    assert report["outputs"]["issues"] == "${{ steps.bodies.outputs.written }}"
    assert report["outputs"]["findings"] == "${{ steps.bodies.outputs.findings }}"
    run = step_running(report, r"\bpython -m bugmatrix report\b")["run"]
    assert '--issue-bodies "$BUGMATRIX_REPORTS/issues"' in run and '--site-url "$SITE_URL"' in run
    assert '--issues "$BUGMATRIX_REPORTS/issues"' in report_step("report", "site")["run"], "the bodies' repro files go on the site"
    (upload,) = [s for s in step_using(report, "actions/upload-artifact") if s["with"]["name"] == "issues"]
    assert upload["if"] == "always() && steps.bodies.outputs.written == 'true' && steps.bodies.outputs.findings != '0'"
    downloads = {s["with"]["name"]: s for s in step_using(job, "actions/download-artifact") if "name" in s["with"]}
    assert downloads["issues"]["if"] == "needs.report.outputs.findings != '0'"
    assert downloads["compat-report-${{ env.PROFILE }}"]["with"]["path"] == "${{ runner.temp }}/report"
    filing = step_running(job, r"\bnox -s issues --")
    assert filing["env"]["GH_TOKEN"] == "${{ github.token }}" and filing["env"]["NIGHT"] == "${{ needs.report.outputs.night }}"


def test_the_bodies_step_counts_tonights_findings_only_when_the_report_wrote_them(tmp_path: Path) -> None:
    script = report_step("report", "bodies")["run"]
    done, outputs = run_step(tmp_path, script)
    assert done.returncode == 0 and "written" not in outputs and "wrote no issue bodies" in done.stdout
    issues = tmp_path / "reports" / "issues"
    issues.mkdir(parents=True)
    (tmp_path / "reports" / "compat.json").write_text("{}")
    done, outputs = run_step(tmp_path, script)
    assert outputs == {"written": "true", "findings": "0"}, "a clean night: filed anyway, for the back-to-baseline notes"
    for name in ("a.md", "b.md"):
        (issues / name).write_text("body")
    (issues / "a").mkdir()
    (issues / "a" / "repro.py").write_text("x")
    done, outputs = run_step(tmp_path, script)
    assert outputs == {"written": "true", "findings": "2"}


@pytest.mark.parametrize("code", [0, 2])
def test_the_filing_step_passes_the_night_through_and_keeps_nox_exit_status(tmp_path: Path, code: int) -> None:
    job = load_workflow()["jobs"]["issues"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nox").write_text(FAKE_NOX)
    (bin_dir / "nox").chmod(0o755)
    summary = tmp_path / "summary.md"
    done, _ = run_step(
        tmp_path, step_running(job, r"\bnox -s issues --")["run"], PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_NOX_ARGS=str(tmp_path / "args"),
        FAKE_NOX_EXIT=str(code), NIGHT="2026-11-23", SITE_URL="https://o.github.io/r/", GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_SERVER_URL="https://github.com", GITHUB_RUN_ID="7",
    )  # fmt: skip
    assert done.returncode == code and "open regression:x" in done.stdout
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:3] == ["-s", "issues", "--"] and (tmp_path / "temp" / "report" / "issues").is_dir(), "an empty directory: no findings"
    for flag, value in {"--repo": "o/r", "--night": "2026-11-23", "--site-url": "https://o.github.io/r/",
                        "--run-url": "https://github.com/o/r/actions/runs/7"}.items():  # fmt: skip
        assert args[args.index(flag) + 1] == value
    assert summary.read_text().startswith("### Issues\n\n- open regression:x")
