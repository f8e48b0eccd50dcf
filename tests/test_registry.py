"""Release tracking against a registry stand-in: a real HTTP server on 127.0.0.1 serving JSON files.

No outside traffic: ``BUGMATRIX_INDEX_URL`` points the client at the stand-in,
and "unreachable" is a closed port on 127.0.0.1.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.version import Version

from bugmatrix.cli import main
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic
from bugmatrix.plan.cells import plan_cells
from bugmatrix.plan.matrix import Matrix, load_matrix
from bugmatrix.releases.registry import (
    INDEX_URL_ENV,
    Resolution,
    Resolved,
    dedupe_versions,
    load_resolution,
    release_time,
    resolve_axes,
    resolve_latest,
)
from bugmatrix.releases.tracking import RESOLUTION_ENV, apply_resolution, resolve_matrix, tracked_for, without_symbolic
from bugmatrix.tools.bisect import registry_versions
from tests.test_plan import declared

DISTRIBUTIONS = {"torch": "torch", "lightning": "lightning", "transformers": "transformers"}


def save_resolution(path: Path, resolution: Resolution) -> None:
    """What the plan saves: the resolution's file, written atomically."""
    write_json_atomic(path, resolution.to_json())


def wheel(*, yanked: bool = False, uploaded: str = "2026-01-01T00:00:00Z") -> dict[str, object]:
    return {"filename": "x.whl", "yanked": yanked, "upload_time_iso_8601": uploaded, "size": 1}


def publish(root: Path, name: str, releases: dict[str, list[dict[str, object]]]) -> None:
    """Put ``<root>/<name>/json`` where the stand-in serves it, as PyPI lays it out."""
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "json").write_text(json.dumps({"info": {"name": name}, "releases": releases}))


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in registry on 127.0.0.1; returns the directory it serves."""
    served = tmp_path / "pypi"
    served.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(INDEX_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    publish(served, "torch", {
        "2.14.1": [wheel()], "2.15.0": [wheel(uploaded="2026-10-28T15:21:05Z")], "2.15.1": [wheel(yanked=True)],
        "2.16.0rc1": [wheel()], "2.16.0.dev20261101": [wheel()], "2.15.0.post1": [wheel()], "2.15.0+cpu": [wheel()],
        "2.17.0": [], "not-a-version": [wheel()],
    })  # fmt: skip
    publish(served, "lightning", {"2.6.6": [wheel()], "2.5.6": [wheel()]})
    yield served
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def closed_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the client at a port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv(INDEX_URL_ENV, f"http://127.0.0.1:{port}")


def test_latest_is_the_newest_final_release(registry: Path) -> None:
    # Not the yanked 2.15.1, the rc, the dev build, the post release, the local build or the release without files.
    assert resolve_latest("torch", pre=False) == "2.15.0"


def test_a_new_release_changes_the_resolution(registry: Path) -> None:
    before = resolve_axes({"torch": ["2.14.1", "latest"]}, DISTRIBUTIONS)
    publish(registry, "torch", {"2.15.0": [wheel()], "2.16.0": [wheel()]})
    after = resolve_axes({"torch": ["2.14.1", "latest"]}, DISTRIBUTIONS)
    assert before.version("torch", "latest") == "2.15.0"
    assert after.version("torch", "latest") == "2.16.0"
    assert after.apply({"torch": ["2.14.1", "latest"]}) == {"torch": ["2.14.1", "2.16.0"]}


def test_pre_releases_only_when_asked(registry: Path) -> None:
    assert resolve_latest("torch", pre=True) == "2.16.0rc1"
    resolution = resolve_axes({"torch": ["latest", "latest-pre"]}, DISTRIBUTIONS)
    assert resolution.apply({"torch": ["latest", "latest-pre"]}) == {"torch": ["2.15.0", "2.16.0rc1"]}
    assert resolution.to_json()["axes"]["torch"] == [
        {"requested": "latest", "resolved": "2.15.0"},
        {"requested": "latest-pre", "resolved": "2.16.0rc1"},
    ]


def test_latest_equal_to_a_listed_version_is_one_value(registry: Path) -> None:
    resolution = resolve_axes({"torch": ["2.14.1", "2.15.0", "latest"], "lightning": ["latest"]}, DISTRIBUTIONS)
    assert resolution.apply({"torch": ["2.14.1", "2.15.0", "latest"]}) == {"torch": ["2.14.1", "2.15.0"]}
    assert dedupe_versions(["2.15", "2.15.0", "2.14.1"]) == ["2.15", "2.14.1"]


def test_the_resolution_round_trips_through_its_file(registry: Path, tmp_path: Path) -> None:
    resolution = resolve_axes({"torch": ["latest"], "lightning": ["2.5.6", "latest"]}, DISTRIBUTIONS)
    assert resolution.to_json()["axes"] == {
        "lightning": {"requested": "latest", "resolved": "2.6.6"},
        "torch": {"requested": "latest", "resolved": "2.15.0"},
    }
    path = tmp_path / "plan" / "resolution.json"
    save_resolution(path, resolution)
    assert load_resolution(path) == resolution
    path.write_text("{")
    with pytest.raises(BugmatrixError, match=r"resolution.json: not valid JSON .* re-run the plan"):
        load_resolution(path)


def test_unknown_distribution_and_no_release_are_one_line(registry: Path) -> None:
    with pytest.raises(BugmatrixError, match=r"'nosuch' is not on the registry .*404"):
        resolve_latest("nosuch", pre=False)
    publish(registry, "nothing-final", {"1.0rc1": [wheel()]})
    with pytest.raises(BugmatrixError, match="no final release of 'nothing-final'; use latest-pre"):
        resolve_latest("nothing-final", pre=False)


def test_release_time_is_the_last_upload(registry: Path) -> None:
    from bugmatrix.releases.registry import fetch_project

    assert release_time(fetch_project("torch"), "2.15.0").isoformat() == "2026-10-28T15:21:05+00:00"


def test_bisect_lists_versions_through_the_same_client(registry: Path) -> None:
    assert registry_versions("torch", low="2.14.1", high=None)[0] == ["2.14.1", "2.15.0"]


def test_unreachable_without_a_saved_resolution_is_one_line(closed_port: None, tmp_path: Path) -> None:
    with pytest.raises(BugmatrixError) as info:
        resolve_axes({"torch": ["latest"]}, DISTRIBUTIONS, saved=tmp_path / "resolution.json")
    message = str(info.value)
    assert "\n" not in message and "cannot read torch's release list" in message and INDEX_URL_ENV in message
    assert "no saved resolution" in message


def test_unreachable_falls_back_to_the_saved_resolution_with_a_warning(closed_port: None, tmp_path: Path) -> None:
    saved = tmp_path / "resolution.json"
    save_resolution(
        saved,
        Resolution.from_json(
            {"axes": {"torch": {"requested": "latest", "resolved": "2.15.0"}}, "resolved_at": "2026-11-22T03:17:00+00:00"}
        ),
    )
    warnings: list[str] = []
    resolution = resolve_axes({"torch": ["latest"]}, DISTRIBUTIONS, saved=saved, warn=warnings.append)
    assert resolution.stale and resolution.version("torch", "latest") == "2.15.0"
    assert len(warnings) == 1 and "registry unreachable" in warnings[0] and "2026-11-22T03:17:00" in warnings[0]
    # A saved resolution that does not cover what is asked now is no fallback.
    with pytest.raises(BugmatrixError, match=r"no saved resolution .* covers it"):
        resolve_axes({"lightning": ["latest"]}, DISTRIBUTIONS, saved=saved, warn=warnings.append)


def test_pinned_axes_never_ask_the_registry(closed_port: None) -> None:
    resolution = resolve_axes({"torch": ["2.15.0"]}, DISTRIBUTIONS)
    assert resolution.entries == () and resolution.apply({"torch": ["2.15.0"]}) == {"torch": ["2.15.0"]}


def test_the_real_registry_resolves_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client against pypi.org itself (the JSON API this machine can reach); skipped cleanly offline."""
    monkeypatch.delenv(INDEX_URL_ENV, raising=False)
    from bugmatrix.releases.registry import RegistryUnreachable

    try:
        latest = resolve_latest("torch", pre=False)
    except RegistryUnreachable as exc:
        pytest.skip(f"pypi.org unreachable: {exc}")
    assert Version(latest) >= Version("2.15.0") and not Version(latest).is_prerelease


# --- "latest" in a profile, through the planner (bugmatrix.releases.tracking) ---

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "matrix" / "tiny.toml"
CATALOGUE = ROOT / "tests" / "fixtures" / "catalogue" / "cases"


def tracking_matrix(tmp_path: Path) -> Matrix:
    """tiny.toml with nightly/full tracking torch's latest (2.3.1 listed; the stand-in's 2.15.0 is not)."""
    text = TINY.read_text().replace(
        '[profiles.nightly]\ntorch = ["2.0.1", "2.1.2", "2.3.1"]', '[profiles.nightly]\ntorch = ["2.0.1", "2.1.2", "2.3.1", "latest"]'
    )
    text = text.replace(
        'python = ["3.10", "3.11"]\ntorch = ["2.0.1", "2.1.2", "2.3.1"]',
        'python = ["3.10", "3.11"]\ntorch = ["2.0.1", "2.1.2", "2.3.1", "latest"]',
    )
    path = tmp_path / "tracking.toml"
    path.write_text(text)
    return load_matrix(path)


def nightly_ids(matrix: Matrix) -> set[str]:
    catalog = declared(("torch",), ("lightning", "torch"))
    return {c.id for c in plan_cells(matrix, "nightly", catalog) if c.device == "cpu"}


def test_latest_plans_the_resolved_release_and_saves_it(registry: Path, tmp_path: Path) -> None:
    declared_matrix = tracking_matrix(tmp_path)
    saved = tmp_path / "resolution.json"
    matrix, resolution = resolve_matrix(declared_matrix, saved=saved)
    assert resolution.version("torch", "latest") == "2.15.0" and saved.exists()
    before = nightly_ids(apply_resolution(declared_matrix, Resolution((Resolved("torch", "latest", "2.3.1"),))))
    after = nightly_ids(matrix)
    # The new release adds exactly its own cells: one in the torch-only case's slice, and the torch x lightning
    # case's one per lightning; every other id is unchanged.
    assert after - before == {"py311-torch2.15.0", "py311-torch2.15.0-pl2.0.3", "py311-torch2.15.0-pl2.2.5"}
    assert before <= after
    pins = {"python": "3.11", "torch": "2.15.0"}
    assert tracked_for(declared_matrix, resolution, pins, ("nightly",)) == {"torch": {"requested": "latest", "resolved": "2.15.0"}}
    assert tracked_for(declared_matrix, resolution, pins, ("smoke",)) == {}  # smoke does not track


def test_a_saved_resolution_is_reused_and_a_listed_latest_is_one_cell(closed_port: None, tmp_path: Path) -> None:
    saved = tmp_path / "resolution.json"
    save_resolution(saved, Resolution((Resolved("torch", "latest", "2.3.1"),), "2026-11-01T00:00:00+00:00"))
    matrix, resolution = resolve_matrix(tracking_matrix(tmp_path), saved=saved)
    assert not resolution.stale and matrix.profiles["nightly"]["torch"] == ("2.0.1", "2.1.2", "2.3.1")  # one 2.3.1 cell
    with pytest.raises(BugmatrixError, match=r"unreachable|cannot read"):
        resolve_matrix(tracking_matrix(tmp_path), saved=tmp_path / "none.json")
    warnings: list[str] = []
    matrix, resolution = resolve_matrix(tracking_matrix(tmp_path), saved=saved, refresh=True, warn=warnings.append)
    assert resolution.stale and warnings and "registry unreachable" in warnings[0]


def test_plan_command_prints_the_resolution_and_writes_it_into_the_plan(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RESOLUTION_ENV, str(tmp_path / "resolution.json"))
    matrix_path = tracking_matrix(tmp_path).path
    out = tmp_path / "plan.json"
    code = main(["--matrix", str(matrix_path), "--cases", str(CATALOGUE), "plan", "--profile", "nightly", "--resolve", "--out", str(out)])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["resolution"]["axes"]["torch"] == {"requested": "latest", "resolved": "2.15.0"}
    assert any(c["pins"].get("torch") == "2.15.0" for c in document["cells"])


def test_latest_is_refused_where_it_cannot_be_resolved(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(TINY.read_text().replace('python = ["3.10", "3.11"]\ntorch', 'python = ["3.10", "latest"]\ntorch'))
    with pytest.raises(BugmatrixError, match=r"profiles\.full\.python\[1\]: 'latest' is not a valid version"):
        load_matrix(path)


def test_the_era_cutoff_follows_the_newest_pins_last_upload(registry: Path) -> None:
    from bugmatrix.run.lock import exclude_newer_for

    publish(registry, "lightning", {"2.6.6": [wheel(uploaded="2026-09-10T09:41:00Z"), wheel(uploaded="2026-09-10T09:41:03.009182Z")]})
    assert exclude_newer_for({"torch": "2.15.0", "lightning": "2.6.6"}) == "2026-10-29T15:21:05Z"


def test_nox_lists_the_pinned_cells_without_registry_or_saved_resolution(closed_port: None, tmp_path: Path) -> None:
    """Offline and never resolved: nox warns that 'latest' is left out and still lists (and runs) the pinned cells."""
    nox = shutil.which("nox") or str(Path(sys.executable).with_name("nox"))
    if not Path(nox).exists():
        pytest.skip("nox is not installed here")
    env = {**os.environ, RESOLUTION_ENV: str(tmp_path / "never-saved.json")}
    listed = subprocess.run([nox, "-l", "-t", "nightly"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "'latest' left out of every profile" in listed.stderr and "cell(py311-torch2.15.0-pl2.6.6-tf5.23.0)" in listed.stdout
    assert without_symbolic(load_matrix(ROOT / "matrix.toml")).profiles["nightly"]["torch"][-1] == "2.15.0"


def test_plan_resolve_offline_without_a_saved_resolution_is_one_line_and_exit_2(
    closed_port: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(RESOLUTION_ENV, str(tmp_path / "never-saved.json"))
    code = main(["--matrix", str(tracking_matrix(tmp_path).path), "--cases", str(CATALOGUE), "plan", "--profile", "nightly", "--resolve"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("bugmatrix: error: cannot read torch's release list"), err
    assert "no saved resolution" in err and not (tmp_path / "never-saved.json").exists()


def test_a_saved_resolution_is_read_like_the_matrix(tmp_path: Path) -> None:
    """A removed axis is no KeyError (its entry is dropped); a value that is not a version is one line, never InvalidVersion."""
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.releases.registry import Resolution, Resolved
    from bugmatrix.releases.tracking import requests, resolve_matrix

    matrix = load_matrix(Path(__file__).resolve().parents[1] / "matrix.toml")
    wanted = requests(matrix)
    assert wanted, "matrix.toml asks for a latest release somewhere"
    saved = tmp_path / "resolution.json"
    released = {"torch": "2.15.0", "lightning": "2.6.6", "transformers": "5.23.0"}  # real releases: a saved resolution is checked
    entries = [Resolved(axis, requested, released[axis]) for axis, rs in wanted.items() for requested in rs]
    save_resolution(saved, Resolution((*entries, Resolved("removed_axis", "latest", "1.0"))))
    resolved, resolution = resolve_matrix(matrix, saved=saved, offline=True)
    assert {e.axis for e in resolution.entries} == set(wanted) and "removed_axis" not in resolved.axes
    save_resolution(saved, Resolution((Resolved(entries[0].axis, entries[0].requested, "../../etc"), *entries[1:])))
    with pytest.raises(BugmatrixError, match=r"resolution.json: \w+\.resolved: '\.\./\.\./etc' is not a version; delete") as raised:
        resolve_matrix(matrix, saved=saved, offline=True)
    assert "\n" not in str(raised.value)


def test_a_saved_resolution_naming_no_release_is_refused_before_a_cell_is_planned(tmp_path: Path) -> None:
    """``latest = 9.9.9`` in a saved resolution (hand-edited, or from another registry) is checked like matrix.toml's versions."""
    from bugmatrix.plan.matrix import load_matrix
    from bugmatrix.releases.registry import Releases, Resolution, Resolved
    from bugmatrix.releases.tracking import load_plan, requests

    root = Path(__file__).resolve().parents[1]
    matrix = load_matrix(root / "matrix.toml")
    entries = [
        Resolved(axis, requested, "2.15.0" if axis == "torch" else "2.6.6") for axis, rs in requests(matrix).items() for requested in rs
    ]
    saved = tmp_path / "resolution.json"
    bad = Resolution(tuple(Resolved(e.axis, e.requested, "9.9.9") if e.axis == "torch" else e for e in entries))
    save_resolution(saved, bad)
    # offline (nox -l): the registry's cached answer for torch holds no 9.9.9, so it is refused without a request
    with pytest.raises(
        BugmatrixError, match=r"resolution.json: torch\.resolved: '9\.9\.9' is not a release of torch on the registry; delete"
    ) as raised:
        load_plan(matrix, root / "cases", offline=True, saved=saved)
    assert "\n" not in str(raised.value)
    # asked: a version the cache lacks makes one fresh request, whose answer decides
    asked: list[str] = []

    def registry(name: str) -> dict:
        asked.append(name)
        return {"releases": {e.resolved: [{"yanked": False}] for e in entries}}

    with pytest.raises(BugmatrixError, match=r"'9\.9\.9' is not a release of torch"):
        Releases(tmp_path / "cache", registry).check_resolved(bad, matrix, saved)
    assert asked[0] == "torch"
    Releases(tmp_path / "cache", registry).check_resolved(Resolution(tuple(entries)), matrix, saved)  # a real release passes


@pytest.mark.parametrize("command", ["report", "repro"])
def test_every_command_checks_a_saved_resolution_as_plan_does(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Issue 45, item 11: ``report --profile nightly`` planned 4 cells on a saved ``latest = 9.9.9`` that plan refuses."""
    from bugmatrix.cli import main

    root = Path(__file__).resolve().parents[1]
    cache = tmp_path / "cache"  # the stand-in's answers land here, never in the cache other tests plan from
    shutil.copytree(root / "tests" / "fixtures" / "registry", cache)
    monkeypatch.setenv("BUGMATRIX_REGISTRY_CACHE", str(cache))
    saved = json.loads((root / "tests" / "fixtures" / "resolution.json").read_text())
    saved["axes"]["torch"]["resolved"] = "9.9.9"
    (tmp_path / "resolution.json").write_text(json.dumps(saved))
    monkeypatch.setenv(RESOLUTION_ENV, str(tmp_path / "resolution.json"))
    reports = tmp_path / "reports"
    shutil.copytree(root / "reports" / "runs", reports / "runs")
    argv = {
        "report": ["report", "--reports", str(reports), "--profile", "nightly", "--date", "2026-11-24"],
        "repro": ["repro", "autocast_cache::core[cpu]", "--out", str(tmp_path / "repro")],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch.resolved: '9.9.9' is not a release of torch on the registry" in err, err
    assert not (reports / "compat.json").exists() and not (tmp_path / "repro").exists()
