"""The nightly workflow: actionlint and zizmor accept it (and reject broken ones), and it consumes exactly what `plan` emits."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
BROKEN = ROOT / "tests" / "fixtures" / "workflows" / "broken.yml"
UNSAFE = ROOT / "tests" / "fixtures" / "workflows" / "unsafe.yml"
#: zizmor severities that fail the audit (issue 27: no medium or high finding).
BLOCKING = {"Medium", "High"}
PIN = re.compile(r"uses:\s*(?P<action>[\w.-]+/[\w./-]+)@(?P<ref>\S+)(?:\s+#\s*(?P<tag>\S+))?")


def find_tool(name: str) -> str | None:
    """``name`` on PATH, else beside this interpreter (a venv that was never activated)."""
    beside = Path(sys.executable).with_name(name)
    return shutil.which(name) or (str(beside) if beside.exists() else None)


def actionlint(path: Path) -> list[dict[str, Any]]:
    """actionlint's findings for ``path`` (empty when it passes); shellcheck runs too where installed."""
    exe = find_tool("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (the tests session installs it from PyPI)")
    result = subprocess.run([exe, "-format", "{{json .}}", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    # 0: clean, 1: problems found; anything else means actionlint itself failed, not the file.
    assert result.returncode in (0, 1), f"actionlint exited {result.returncode}: {result.stderr}"
    findings = json.loads(result.stdout or "[]")
    assert (result.returncode == 1) == bool(findings), result.stdout + result.stderr
    return findings


def zizmor(path: Path) -> list[dict[str, Any]]:
    """zizmor's findings for ``path``, offline (no audit that needs the network or a token), no config file."""
    exe = find_tool("zizmor")
    if exe is None:
        pytest.skip("zizmor is not installed (the tests session installs it from PyPI)")
    result = subprocess.run(
        [exe, "--offline", "--no-config", "--no-progress", "--format", "json", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    findings = json.loads(result.stdout or "null")
    assert isinstance(findings, list), f"zizmor exited {result.returncode}: {result.stderr}"
    # 0: clean; 10 + the highest severity otherwise (zizmor's exit codes); anything else is zizmor itself failing.
    assert result.returncode == 0 or 10 <= result.returncode <= 14, f"zizmor exited {result.returncode}: {result.stderr}"
    return findings


def severities(findings: list[dict[str, Any]]) -> dict[str, str]:
    return {
        f"{f['ident']} @ {f['locations'][0]['concrete']['location']['start_point']['row'] + 1}": f["determinations"]["severity"]
        for f in findings
    }


def load_workflow() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (the tests session installs it)")
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    return workflow.get("on", workflow.get(True))


def plan(profile: str) -> list[dict[str, Any]]:
    """The CI matrix's entries, exactly as `python -m bugmatrix plan --json` prints them."""
    result = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "plan", "--profile", profile, "--json"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["include"]


def step_running(job: dict[str, Any], pattern: str) -> dict[str, Any]:
    steps = [s for s in job["steps"] if re.search(pattern, s.get("run", ""))]
    assert len(steps) == 1, f"expected one step running {pattern!r}, found {len(steps)}"
    return steps[0]


def step_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(f"{action}@")]


def test_actionlint_passes_on_the_workflow() -> None:
    assert actionlint(WORKFLOW) == []


def test_actionlint_rejects_the_broken_fixture() -> None:
    kinds = {finding["kind"] for finding in actionlint(BROKEN)}
    assert {"job-needs", "expression"} <= kinds, kinds


def test_zizmor_finds_nothing_in_the_workflow() -> None:
    """Not even low or informational findings at the regular persona; medium or high would fail the issue's acceptance."""
    found = severities(zizmor(WORKFLOW))
    assert not {k: v for k, v in found.items() if v in BLOCKING}, found
    assert found == {}, found


def test_zizmor_flags_the_unsafe_fixture() -> None:
    """The audit is live: the workflow as it was before issue 27 (a checkout keeping its token, a matrix value in a script)."""
    found = zizmor(UNSAFE)
    idents = {f["ident"] for f in found if f["determinations"]["severity"] in BLOCKING}
    assert {"artipacked", "template-injection"} <= idents, severities(found)


def test_every_checkout_drops_its_token_and_no_script_expands_an_expression() -> None:
    """What zizmor checks, said directly: a run: script gets values through env:, never ${{ }} (template injection)."""
    for name, job in load_workflow()["jobs"].items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"{name}: checkout without persist-credentials: false"
            assert "${{" not in step.get("run", ""), f"{name}: {step.get('name', step['run'][:40])!r} expands an expression in its script"


def test_every_action_is_pinned_to_a_commit_with_its_version() -> None:
    pins = [PIN.search(line) for line in WORKFLOW.read_text(encoding="utf-8").splitlines() if "uses:" in line]
    assert pins and all(pins)
    for pin in pins:
        assert re.fullmatch(r"[0-9a-f]{40}", pin["ref"]), f"{pin['action']}@{pin['ref']} is not a full commit SHA"
        assert pin["tag"] and re.fullmatch(r"v\d+\.\d+\.\d+", pin["tag"]), f"{pin['action']}: add a `# vX.Y.Z` comment"


def test_triggers_and_permissions() -> None:
    workflow = load_workflow()
    on = triggers(workflow)
    assert on["schedule"] and all("cron" in entry for entry in on["schedule"])
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["profile"]["default"] == "nightly" and "gpu-runner" in inputs
    # Profiles are data: the input is a string the plan job validates, never a list that drifts from matrix.toml.
    assert inputs["profile"]["type"] == "string" and "options" not in inputs["profile"]
    assert inputs["profile"]["default"] in tomllib.loads((ROOT / "matrix.toml").read_text())["profiles"]
    # A scheduled run has no inputs: it must still plan the nightly profile.
    assert workflow["env"]["PROFILE"] == "${{ inputs.profile || 'nightly' }}"
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["group"]
    assert all(job.get("timeout-minutes") for job in workflow["jobs"].values())


def test_the_plan_job_publishes_what_plan_prints() -> None:
    job = load_workflow()["jobs"]["plan"]
    step = step_running(job, r"\bnox -s plan -- --profile \"\$PROFILE\" --json\b")
    assert re.search(r"^matrix=\"\$\(nox -s plan -- [^)]*\)\"$", step["run"], re.M), "capture stdout so a failed plan fails the step"
    assert 'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"' in step["run"]
    assert step.get("id") == "plan" and job["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"


def test_the_plan_job_refuses_a_profile_matrix_toml_does_not_declare() -> None:
    """The dispatch's profile is a free string: the plan step (the first that reads it) fails in one line listing the profiles."""
    job = load_workflow()["jobs"]["plan"]
    first = next(i for i, s in enumerate(job["steps"]) if "$PROFILE" in s.get("run", ""))
    assert job["steps"][first] is step_running(job, r"\bnox -s plan -- --profile \"\$PROFILE\"")
    done = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "plan", "--profile", "no-such-profile", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    profiles = ", ".join(tomllib.loads((ROOT / "matrix.toml").read_text())["profiles"])
    assert done.returncode == 2 and not done.stdout.strip(), "nothing for the cells job to run"
    assert f"unknown profile 'no-such-profile'; use one of {profiles}" in done.stderr.strip().splitlines()[-1]


def test_the_cells_job_consumes_the_plan_as_is() -> None:
    job = load_workflow()["jobs"]["cells"]
    assert job["needs"] == "plan"
    assert job["strategy"] == {"fail-fast": False, "matrix": "${{ fromJSON(needs.plan.outputs.matrix) }}"}
    # The planned label, unless a manual run overrides the CUDA cells' runner.
    assert job["runs-on"] == "${{ (matrix.device == 'cuda' && inputs.gpu-runner) || matrix.runs-on }}"
    run = step_running(job, r'^nox -s "\$SESSION"$')
    assert run["env"]["SESSION"] == "${{ matrix.session }}"
    # The cell's Python for its venv, and 3.11 last: the default one nox and the harness run in.
    assert [s["with"]["python-version"].split() for s in step_using(job, "actions/setup-python")] == [
        ["${{", "matrix.python", "}}", "3.11"]
    ]


@pytest.mark.parametrize("profile", ["smoke", "nightly"])
def test_planned_entries_have_every_key_the_workflow_references(profile: str) -> None:
    referenced = set(re.findall(r"(?<![\w'.])matrix\.([\w-]+)", json.dumps(load_workflow()["jobs"]["cells"])))
    assert {"cell", "session", "python", "runs-on", "device", "cache-key", "cache-save"} <= referenced
    entries = plan(profile)
    assert entries
    for entry in entries:
        assert referenced <= set(entry), f"{entry['cell']}: plan lacks {referenced - set(entry)}"
        # The artifact paths use the cell id; the session writes its run file under the same id.
        assert entry["session"] == f"cell({entry['cell']})"


def test_cuda_cells_run_on_the_gpu_runner_from_matrix_toml() -> None:
    gpu_runner = tomllib.loads((ROOT / "matrix.toml").read_text())["gpu"]["runner"]
    entries = plan("nightly")
    cuda = [e for e in entries if e["device"] == "cuda"]
    assert cuda, "nightly plans no CUDA cell: [gpu] in matrix.toml selects none"
    assert all(e["runs-on"] == gpu_runner for e in cuda)
    assert all(e["runs-on"] == "ubuntu-latest" for e in entries if e["device"] == "cpu")


@pytest.mark.parametrize("profile", ["smoke", "nightly"])
def test_planned_sessions_are_the_nox_sessions_of_that_profile(profile: str) -> None:
    nox = find_tool("nox")
    if nox is None:
        pytest.skip("nox is not installed here")
    planned = {entry["session"] for entry in plan(profile)}  # first: it saves the resolution of 'latest' that listing reads
    listed = subprocess.run(
        [nox, "-l", "--json", "-t", profile, f"gpu-{profile}"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )  # fmt: skip
    sessions = {s["session"] for s in json.loads(listed.stdout) if s["name"] == "cell"}
    assert planned == sessions, f"plan only: {sorted(planned - sessions)}; nox only: {sorted(sessions - planned)}"


def test_the_report_job_gathers_every_run_file_and_publishes_the_report() -> None:
    jobs = load_workflow()["jobs"]
    cells, report = jobs["cells"], jobs["report"]
    assert report["needs"] == "cells" and report["if"] == "always()"
    uploads = {s["with"]["name"]: s for s in step_using(cells, "actions/upload-artifact")}
    assert all(s["if"] == "always()" for s in uploads.values())
    (download,) = [s for s in step_using(report, "actions/download-artifact") if s["with"].get("pattern") == "run-*"]
    assert download["with"]["merge-multiple"] is True
    assert download["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/runs"
    # Every cell's run file, and nothing else, lands in runs/ where `report` reads it.
    for entry in plan("nightly"):
        names = {name.replace("${{ matrix.cell }}", entry["cell"]): s for name, s in uploads.items()}
        picked = [s for name, s in names.items() if fnmatch.fnmatchcase(name, download["with"]["pattern"])]
        assert [s["with"]["path"] for s in picked] == ["${{ env.BUGMATRIX_REPORTS }}/runs/${{ matrix.cell }}.json"]
    assert any(s["with"]["path"].endswith("/junit/${{ matrix.cell }}.xml") for s in uploads.values())
    run = step_running(report, r"\bpython -m bugmatrix report\b")["run"]
    for flag in ('--profile "$PROFILE"', "--fail-on-regression", '--step-summary "$GITHUB_STEP_SUMMARY"', "reports/baseline.json"):
        assert flag in run
    published = {s["with"]["name"]: s for s in step_using(report, "actions/upload-artifact")}
    assert published["compat-report-${{ env.PROFILE }}"]["if"] == "always()", "a failing report still publishes what it wrote"
    report_files = published["compat-report-${{ env.PROFILE }}"]["with"]["path"]
    assert {Path(p).name for p in report_files.splitlines()} == {"index.html", "compat.md", "compat.json"}


def test_the_report_job_carries_the_history_from_night_to_night() -> None:
    """Restore the last night's `history` artifact, pass it to `report`, upload it again for the next night."""
    report = load_workflow()["jobs"]["report"]
    # Reading other runs' artifacts is a job-level grant (tests/test_workflow_publish.py checks every job's permissions).
    assert report["permissions"]["actions"] == "read"
    names = [s.get("name", s.get("uses", "")) for s in report["steps"]]
    restore = step_running(report, r"\bgh run download\b.* -n history\b")
    assert restore["env"]["GH_TOKEN"] == "${{ github.token }}"
    script = restore["run"]
    assert re.search(r"gh run list [^\n]*--workflow nightly\.yml", script) and "--json databaseId" in script
    # Failed nights count: a night with a regression fails the run, and the flaky rule needs exactly those nights.
    assert "--status completed" in script and "--status success" not in script
    assert re.search(r'gh run download "\$run_id" [^\n]*-n history -D "\$BUGMATRIX_REPORTS"', script)
    assert "starting a new one" in script and "exit 0" in script, "no history found is not an error"
    report_step = step_running(report, r"\bpython -m bugmatrix report\b")
    assert '--history "$BUGMATRIX_REPORTS/history.jsonl"' in report_step["run"]
    (upload,) = [s for s in step_using(report, "actions/upload-artifact") if s["with"]["name"] == "history"]
    # A night that fails on a regression still passes its history on; one the report did not extend does not.
    assert upload["if"] == "always() && steps.history.outputs.appended == 'true'"
    appended = next(s for s in report["steps"] if s.get("id") == "history")
    assert appended["if"] == "always()" and "RESTORED_HISTORY" in appended["run"] and "RESTORED_HISTORY" in script
    assert upload["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/history.jsonl"
    assert upload["with"]["retention-days"] == 90
    # Order: restored before the report reads it, uploaded after the report appended tonight.
    assert names.index(restore["name"]) < names.index(report_step["name"]) < names.index(appended["name"]) < names.index(upload["name"])


def fake_gh(tmp_path: Path, download: str) -> tuple[Path, str]:
    """A fake ``gh`` and the PATH that puts it first: ``gh run list`` names runs 42 and 41, and only the older one
    has the artifact: ``gh run download 41 ... -D DIR`` runs the shell ``download`` with ``$2`` = DIR; anything else
    fails. Returns the script (a test rewrites it to fail) and the PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gh"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$2" = list ]; then printf "42\\n41\\n"; exit 0; fi\n'
        f'if [ "$3" = 41 ]; then shift 3; while [ "$1" != -D ]; do shift; done; {download}; exit 0; fi\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    return fake, f"{bin_dir}:{os.environ['PATH']}"


def test_the_restore_script_starts_a_new_history_when_there_is_none(tmp_path: Path) -> None:
    """Run the step's shell with a fake `gh`: a listing failure or no artifact must not fail the night."""
    script = step_running(load_workflow()["jobs"]["report"], r"\bgh run download\b.* -n history\b")["run"]
    fake, path = fake_gh(tmp_path, 'echo night > "$2/history.jsonl"')
    github_env, github_output = tmp_path / "env", tmp_path / "output"
    env = {
        **os.environ, "PATH": path, "BUGMATRIX_REPORTS": str(tmp_path / "r"),
        "GITHUB_REPOSITORY": "o/r", "GITHUB_ENV": str(github_env), "GITHUB_OUTPUT": str(github_output),
    }  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and "restored from run 41" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "r" / "history.jsonl").read_text() == "night\n"
    # The "appended?" step: unchanged (the report died on it) -> not uploaded; extended -> uploaded.
    check = next(s for s in load_workflow()["jobs"]["report"]["steps"] if s.get("id") == "history")["run"]
    restored = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    env_after = {**env, **restored}
    subprocess.run(["bash", "-e", "-c", check], env=env_after, capture_output=True, text=True, timeout=30, check=True)
    assert not github_output.exists() or "appended=true" not in github_output.read_text()
    (tmp_path / "r" / "history.jsonl").write_text("night\ntonight\n")
    subprocess.run(["bash", "-e", "-c", check], env=env_after, capture_output=True, text=True, timeout=30, check=True)
    assert "appended=true" in github_output.read_text()
    fake.write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "r" / "history.jsonl").unlink()
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and "starting a new one" in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / "r" / "history.jsonl").exists()


def test_the_report_checks_completeness_against_the_plan_the_cells_ran_from() -> None:
    """The plan job writes the plan document beside the CI matrix; the report gets it, so a lost cell is `missing`."""
    jobs = load_workflow()["jobs"]
    plan_run = step_running(jobs["plan"], r"\bnox -s plan --")["run"]
    assert "--json" in plan_run and '--out "$BUGMATRIX_REPORTS/plan.json"' in plan_run, "one call: the matrix and the plan agree"
    (upload,) = [s for s in step_using(jobs["plan"], "actions/upload-artifact") if s["with"]["name"] == "plan"]
    assert upload["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/plan.json" and upload["with"]["if-no-files-found"] == "error"
    steps = jobs["report"]["steps"]
    (download,) = [s for s in step_using(jobs["report"], "actions/download-artifact") if s["with"].get("name") == "plan"]
    report = step_running(jobs["report"], r"\bpython -m bugmatrix report\b")
    assert '--plan "$BUGMATRIX_REPORTS/plan.json"' in report["run"] and "--fail-on-regression" in report["run"]
    assert steps.index(download) < steps.index(report)


def test_every_job_after_the_plan_reads_the_plans_resolution_of_latest() -> None:
    """The plan job resolves "latest" once and uploads the answer; cells and report download it before nox plans."""
    jobs = load_workflow()["jobs"]
    assert "--resolve" in step_running(jobs["plan"], r"\bnox -s plan --")["run"]
    (upload,) = [s for s in step_using(jobs["plan"], "actions/upload-artifact") if s["with"]["name"] == "resolution"]
    assert upload["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/resolution.json"
    for name in ("cells", "report"):
        steps = jobs[name]["steps"]
        (download,) = [s for s in step_using(jobs[name], "actions/download-artifact") if s["with"].get("name") == "resolution"]
        assert download["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}"
        first_nox = next(i for i, s in enumerate(steps) if "nox -s" in s.get("run", ""))
        assert steps.index(download) < first_nox, f"{name}: nox plans before the resolution is there"


def test_one_job_per_torch_release_saves_the_shared_uv_cache() -> None:
    entries = plan("nightly")
    keys: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        keys.setdefault(entry["cache-key"], []).append(entry)
    for key, sharing in keys.items():
        savers = [e["cell"] for e in sharing if e["cache-save"] is True]
        assert len(savers) == 1, f"{key}: saved by {savers}"
        assert [e["device"] for e in sharing if e["cache-save"]] == ["cpu"], f"{key}: a CPU cell saves (ubuntu-latest runs it)"
        # The key names the torch release and the Python: cells sharing it install the same torch wheel.
        assert all(f"torch{key.split('-')[1]}-" in e["cell"] + "-" and e["python"] == key.rsplit("-py", 1)[1] for e in sharing), key
    assert len(keys) < len([e for e in entries if e["device"] == "cpu"]), "cells must share caches, not key one each"


def test_the_uv_cache_is_restored_everywhere_and_saved_once_under_the_same_key() -> None:
    job = load_workflow()["jobs"]["cells"]
    assert step_using(job, "actions/cache") == [], "restore and save separately: every job would save with actions/cache"
    (restore,) = step_using(job, "actions/cache/restore")
    (save,) = step_using(job, "actions/cache/save")
    assert restore["with"]["key"] == "uv-${{ runner.os }}-${{ matrix.cache-key }}-${{ env.CACHE_GENERATION }}"
    assert save["with"]["key"] == "${{ steps.restore-uv-cache.outputs.cache-primary-key }}" and restore["id"] == "restore-uv-cache"
    assert save["with"]["path"] == restore["with"]["path"] == "${{ steps.uv-cache.outputs.dir }}"
    assert "matrix.cache-save" in save["if"] and "cache-hit != 'true'" in save["if"]
    assert restore["uses"].split("@")[1] == save["uses"].split("@")[1]
    trim = step_running(job, r"uv cache clean")
    assert trim["if"] == save["if"], "trim exactly when saving: the cell's own install has already run"
    steps = job["steps"]
    assert steps.index(restore) < steps.index(step_running(job, r'^nox -s "\$SESSION"$')) < steps.index(trim) < steps.index(save)


def test_the_previous_nights_results_travel_to_every_cell_job(tmp_path: Path) -> None:
    """The report uploads tonight's results; the next night's plan job restores them and hands them to every cell as $BUGMATRIX_PREVIOUS."""
    from bugmatrix.run.reuse import NO_REUSE_ENV, PREVIOUS_ENV, previous_run_files

    workflow = load_workflow()
    jobs = workflow["jobs"]
    assert workflow["env"][PREVIOUS_ENV] == "${{ github.workspace }}/previous"
    # A dispatch can switch reuse off; a scheduled run (no inputs) reuses.
    assert workflow["env"][NO_REUSE_ENV] == "${{ inputs.reuse == false && '1' || '' }}"
    reuse = triggers(workflow)["workflow_dispatch"]["inputs"]["reuse"]
    assert (reuse["type"], reuse["default"]) == ("boolean", True)
    (upload,) = [s for s in step_using(jobs["report"], "actions/upload-artifact") if s["with"]["name"] == "night-results"]
    assert upload["if"] == "always()", "a night with a regression still hands its results on"
    reports = "${{ env.BUGMATRIX_REPORTS }}/"
    paths = [p.removeprefix(reports) for p in upload["with"]["path"].splitlines()]
    assert paths == ["runs/*.json", "fresh/runs/*.json", "history.jsonl"]
    # An artifact keeps paths below their common root (BUGMATRIX_REPORTS): downloaded into previous/, they are what the runner reads.
    previous = tmp_path / "previous"
    for path in paths:
        (previous / path.replace("*", "py311-c")).parent.mkdir(parents=True, exist_ok=True)
        (previous / path.replace("*", "py311-c")).write_text("{}")
    found = [p.relative_to(previous).as_posix() for p in previous_run_files(previous, "py311-c")]
    assert found == ["runs/py311-c.json", "fresh/runs/py311-c.json"] and (previous / "history.jsonl").exists()
    plan_job = jobs["plan"]
    assert plan_job["permissions"] == {"contents": "read", "actions": "read"}
    restore = step_running(plan_job, r"-n night-results")
    assert restore["env"]["GH_TOKEN"] == "${{ github.token }}" and "--status completed" in restore["run"]
    (handed,) = [s for s in step_using(plan_job, "actions/upload-artifact") if s["with"]["name"] == "previous"]
    assert handed["with"]["path"] == "${{ env.BUGMATRIX_PREVIOUS }}"
    steps = jobs["cells"]["steps"]
    (download,) = [s for s in step_using(jobs["cells"], "actions/download-artifact") if s["with"].get("name") == "previous"]
    assert download["with"]["path"] == "${{ env.BUGMATRIX_PREVIOUS }}" and download["continue-on-error"] is True
    assert steps.index(download) < steps.index(step_running(jobs["cells"], r'^nox -s "\$SESSION"$'))


def test_the_lane_runs_once_in_the_plan_job_and_its_patch_is_uploaded() -> None:
    """Re-resolve in the plan job, hand the fresh locks to the cells, run moved cells fresh, upload locks.patch and the fresh runs."""
    jobs = load_workflow()["jobs"]
    plan_steps = jobs["plan"]["steps"]
    lane = step_running(jobs["plan"], r"^nox -s reresolve -- --profile \"\$PROFILE\"$")
    uploads = {s["with"]["name"]: s for s in step_using(jobs["plan"], "actions/upload-artifact")}
    assert uploads["locks-patch"]["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/fresh/locks.patch"
    assert uploads["locks-patch"]["with"]["if-no-files-found"] == "ignore", "nothing moved: no patch, no failure"
    assert uploads["fresh"]["with"]["path"].splitlines() == [
        "${{ env.BUGMATRIX_REPORTS }}/fresh/resolve.json",
        "${{ env.BUGMATRIX_REPORTS }}/fresh/locks/",
    ]
    assert plan_steps.index(lane) < plan_steps.index(uploads["fresh"]) and plan_steps.index(lane) < plan_steps.index(uploads["locks-patch"])
    cells = jobs["cells"]
    steps = cells["steps"]
    (fresh_in,) = [s for s in step_using(cells, "actions/download-artifact") if s["with"].get("name") == "fresh"]
    assert fresh_in["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/fresh", "where nox -s fresh(<id>) reads the lane"
    sibling = step_running(cells, r'^nox -s "fresh\(\$CELL\)"$')
    assert sibling["env"]["CELL"] == "${{ matrix.cell }}", "through env, never expanded into the script"
    assert steps.index(fresh_in) < steps.index(step_running(cells, r'^nox -s "\$SESSION"$')) < steps.index(sibling)
    (upload,) = [s for s in step_using(cells, "actions/upload-artifact") if s["with"]["name"] == "fresh-run-${{ matrix.cell }}"]
    assert upload["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/fresh/runs/${{ matrix.cell }}.json" and upload["if"] == "always()"
    report = jobs["report"]
    (gather,) = [s for s in step_using(report, "actions/download-artifact") if s["with"].get("pattern") == "fresh-run-*"]
    assert gather["with"]["path"] == "${{ env.BUGMATRIX_REPORTS }}/fresh/runs" and gather["with"]["merge-multiple"] is True
    assert any(s["with"].get("name") == "fresh" for s in step_using(report, "actions/download-artifact"))
    # run-* (the locked run files) must not pick up the fresh ones: they would overwrite the locked results.
    assert not fnmatch.fnmatchcase("fresh-run-x", "run-*")


def test_the_previous_results_restore_script_falls_back_to_every_cell_running(tmp_path: Path) -> None:
    """Run the plan job's restore step with a fake `gh`: the newest run with results is used; none found is not an error."""
    script = step_running(load_workflow()["jobs"]["plan"], r"-n night-results")["run"]
    fake, path = fake_gh(tmp_path, 'mkdir -p "$2/runs"; echo {} > "$2/runs/c.json"')
    env = {
        **os.environ,
        "PATH": path,
        "BUGMATRIX_PREVIOUS": str(tmp_path / "prev"),
        "GITHUB_REPOSITORY": "o/r",
    }
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and "restored from run 41 (1 run files)" in done.stdout, done.stdout + done.stderr
    fake.write_text("#!/bin/sh\nexit 1\n")
    env["BUGMATRIX_PREVIOUS"] = str(tmp_path / "none")
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and "every cell runs" in done.stdout, done.stdout + done.stderr


def test_earlier_results_come_only_from_the_nightlys_own_nights_on_the_default_branch(tmp_path: Path) -> None:
    """Every restore (previous results, history, site) lists only nightly.yml runs on the default branch, scheduled or by hand."""
    jobs = load_workflow()["jobs"]
    restores = [
        step_running(jobs["plan"], r"\bgh run download\b.* -n night-results\b"),
        step_running(jobs["report"], r"\bgh run download\b.* -n history\b"),
        step_running(jobs["report"], r"\bgh run download\b.* -n github-pages\b"),
    ]
    for step in restores:
        assert step["env"]["DEFAULT_BRANCH"] == "${{ github.event.repository.default_branch }}"
        listing = re.search(r"gh run list (.*?)\)\"", step["run"], re.S)
        assert listing, step["run"]
        assert '--workflow nightly.yml --branch "$DEFAULT_BRANCH"' in listing.group(1) and "--json databaseId,event" in listing.group(1)
        assert 'select(.event == "schedule" or .event == "workflow_dispatch")' in listing.group(1)
    # Run one for real: gh is asked for the default branch's runs, whatever branch this run is on.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text('#!/bin/sh\necho "$@" >> "$GH_LOG"\nexit 1\n')
    (bin_dir / "gh").chmod(0o755)
    env = {
        **os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GH_LOG": str(tmp_path / "log"), "DEFAULT_BRANCH": "main",
        "GITHUB_REF": "refs/heads/attacker", "BUGMATRIX_REPORTS": str(tmp_path / "r"), "GITHUB_REPOSITORY": "o/r",
        "GITHUB_ENV": str(tmp_path / "env"),
    }  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", restores[1]["run"]], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert "--branch main" in (tmp_path / "log").read_text()


def test_the_report_step_runs_the_cli_itself_and_passes_on_its_exit_code() -> None:
    """nox makes every failure exit 1; the step runs the CLI in nox's tools venv, so 1, 2 and 3 stay apart and are said."""
    report = load_workflow()["jobs"]["report"]
    step = step_running(report, r"\bpython -m bugmatrix report\b")
    script = step["run"]
    assert step["id"] == "report" and "nox -s report --install-only" in script
    assert script.index("nox -s report --install-only") < script.index(".nox/report/bin/python -m bugmatrix report")
    assert "|| status=$?" in script and 'echo "exit=$status" >> "$GITHUB_OUTPUT"' in script and script.rstrip().endswith('exit "$status"')
    for code, meaning in (("1", "a missing, regressed or uninstallable result"), ("2", "bad input"), ("3", "could not write")):
        assert re.search(rf"{code}\) echo \"::error::report: exit {code} \({re.escape(meaning)}", script), code
    assert report["outputs"]["report-exit"] == "${{ steps.report.outputs.exit }}"
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert re.search(r"@nox\.session[^\n]*\n(?:@[^\n]*\n)*def report\(session", noxfile), "the --install-only session is `report`"
