"""Every version the matrix names is a release on the registry, checked when the plan is made (issue 22 item 7).

Against a stand-in registry on 127.0.0.1 (``BUGMATRIX_INDEX_URL``) and a cache
in a temporary directory (``BUGMATRIX_REGISTRY_CACHE``): a version that does not
exist is one line naming the key, through ``plan`` and ``nox -l`` alike; the
answer is cached so a second plan asks nothing; an unreachable registry is a
warning and the plan is still made.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from bugmatrix.errors import USAGE_EXIT_CODE, BugmatrixError
from bugmatrix.plan.matrix import load_matrix
from bugmatrix.releases.registry import CACHE_ENV, INDEX_URL_ENV, Releases
from tests.test_noxfile import IN_THIS_VENV, this_venvs_nox
from tests.test_registry import QuietHandler, publish, wheel

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "matrix" / "tiny.toml"


class Counting(QuietHandler):
    """Serves the files and counts the requests, so a test can say "no network"."""

    requests: list[str]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.requests.append(self.path)
        super().do_GET()


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[str]]]:
    """A registry listing tiny.toml's releases (lightning 2.0.3 only as pytorch-lightning; a yanked torch 2.2.0)."""
    served = tmp_path / "pypi"
    served.mkdir()
    requests: list[str] = []
    handler = type("Handler", (Counting,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(INDEX_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    publish(served, "torch", {v: [wheel()] for v in ("2.0.1", "2.1.2", "2.3.1")} | {"2.2.0": [wheel(yanked=True)]})
    publish(served, "lightning", {"2.2.5": [wheel()]})
    publish(served, "pytorch-lightning", {"2.0.3": [wheel()], "2.2.5": [wheel()]})
    publish(served, "transformers", {"4.30.2": [wheel()], "4.46.3": [wheel()]})
    yield served, requests
    server.shutdown()
    server.server_close()
    thread.join()


def tiny_with(tmp_path: Path, old: str, new: str) -> Path:
    text = TINY.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_every_listed_version_is_found_on_one_of_its_axis_distributions(stand_in: tuple[Path, list[str]]) -> None:
    """lightning 2.0.3 exists only as pytorch-lightning: still a release of the axis."""
    Releases().check_versions(load_matrix(TINY))


def test_a_version_that_does_not_exist_is_one_line_naming_the_key(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    path = tiny_with(tmp_path, 'versions = ["2.0.1", "2.1.2", "2.3.1"]', 'versions = ["2.0.1", "2.1.2", "2.2.9", "2.3.1"]')
    with pytest.raises(BugmatrixError) as info:
        Releases().check_versions(load_matrix(path))
    assert str(info.value) == (
        f"{path}: axes.torch.versions[2]: '2.2.9' is not a release of torch on the registry; "
        "correct the version or remove it (and its uses in profiles, [base], [[include]], [gpu])"
    )


def test_a_yanked_release_does_not_count(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    path = tiny_with(tmp_path, 'versions = ["2.0.1", "2.1.2", "2.3.1"]', 'versions = ["2.0.1", "2.1.2", "2.2.0", "2.3.1"]')
    with pytest.raises(BugmatrixError, match=r"axes\.torch\.versions\[2\]: '2\.2\.0' is not a release"):
        Releases().check_versions(load_matrix(path))


def test_the_answer_is_cached_and_a_new_version_asks_again(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    """The second plan makes no request; a version the cache lacks (shipped since) makes exactly one for its distribution."""
    served, requests = stand_in
    Releases().check_versions(load_matrix(TINY))
    first = len(requests)
    assert first >= 3 and (tmp_path / "cache" / "torch.json").exists()
    Releases().check_versions(load_matrix(TINY))
    assert len(requests) == first, "nox -l must not ask the registry each time"
    publish(served, "transformers", {"4.30.2": [wheel()], "4.46.3": [wheel()], "4.47.0": [wheel()]})
    Releases().check_versions(
        load_matrix(tiny_with(tmp_path, 'versions = ["4.30.2", "4.46.3"]', 'versions = ["4.30.2", "4.46.3", "4.47.0"]'))
    )
    assert requests[first:] == ["/transformers/json"]


def test_a_misspelt_distribution_names_the_key(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    path = tiny_with(tmp_path, 'distributions = { transformers = "transformers" }', 'distributions = { transformer = "transformers" }')
    with pytest.raises(BugmatrixError, match=r"axes\.transformers\.distributions\.transformer: 'transformer' is not on the registry"):
        Releases().check_versions(load_matrix(path))


def test_an_unreachable_registry_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens on the port: one warning per unchecked axis, and the plan goes on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv(INDEX_URL_ENV, f"http://127.0.0.1:{port}")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    warnings: list[str] = []
    Releases(warn=warnings.append).check_versions(load_matrix(TINY))
    assert [w.partition(" (")[0] for w in warnings] == [
        f"{TINY}: axes.{axis}.versions not checked against the registry" for axis in ("torch", "lightning", "transformers")
    ]


def test_plan_refuses_it_in_one_line_exit_2(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    """``python -m bugmatrix plan``: exit 2, the one line, nothing on stdout."""
    path = tiny_with(tmp_path, 'versions = ["2.0.1", "2.1.2", "2.3.1"]', 'versions = ["2.0.1", "2.1.2", "2.2.9", "2.3.1"]')
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix", "--matrix", str(path), "--cases", str(ROOT / "tests" / "fixtures" / "fifth_axis" / "cases"), "plan"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == USAGE_EXIT_CODE and run.stdout == ""
    assert run.stderr.splitlines() == [f"bugmatrix: error: {path}: axes.torch.versions[2]: '2.2.9' is not a release of torch on the registry; "
                                       "correct the version or remove it (and its uses in profiles, [base], [[include]], [gpu])"]  # fmt: skip


def test_nox_list_says_it_in_one_line_and_lists_the_other_sessions(stand_in: tuple[Path, list[str]], tmp_path: Path) -> None:
    """``nox -l`` asks no registry: against what a plan cached, the same line, once (where the cache has no answer, the
    version is left to the plan); the sessions that need no plan are still listed."""
    nox = this_venvs_nox()
    _, requests = stand_in
    path = tiny_with(tmp_path, 'versions = ["2.0.1", "2.1.2", "2.3.1"]', 'versions = ["2.0.1", "2.1.2", "2.2.9", "2.3.1"]')
    with pytest.raises(BugmatrixError):
        Releases().check_versions(load_matrix(path))  # what `nox -s plan` does first: the registry's answers are cached
    asked = len(requests)
    run = subprocess.run(
        [nox, "-l"],
        cwd=ROOT,
        env={**os.environ, **IN_THIS_VENV, "BUGMATRIX_MATRIX": str(path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert errors == [f"bugmatrix: error: {path}: axes.torch.versions[2]: '2.2.9' is not a release of torch on the registry "
                      f"(as cached in {tmp_path / 'cache'}; `nox -s plan` asks the registry again); "
                      "correct the version or remove it (and its uses in profiles, [base], [[include]], [gpu])"]  # fmt: skip
    listed = {line[2:].split()[0] for line in run.stdout.splitlines() if line[:2] in ("* ", "- ")}
    assert {"lint", "plan", "tests"} <= listed and not any(s.startswith("cell(") for s in listed)
    assert len(requests) == asked, "nox -l asked the registry"
