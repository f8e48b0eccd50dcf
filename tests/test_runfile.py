"""The run file: atomic writes, a versioned schema, and one-line errors for anything corrupt."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from bugmatrix.cell.runfile import SCHEMA, RunRecord, VariantRecord, load_run_file
from bugmatrix.documents.run import load_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic, write_text_atomic


def record(**overrides: object) -> VariantRecord:
    fields: dict[str, object] = {
        "id": "autocast_cache::core[cpu]", "case": "autocast_cache", "variant": "core", "device": "cpu", "kind": "core",
        "workaround_for": None, "outcome": "reproduced", "expected": "reproduced", "verdict": "as-expected",
        "signature_matched": True, "message": "RuntimeError: element 0 of tensors does not require grad", "duration_s": 0.25,
        "evidence": "pytorch/pytorch#165068", "log": "Traceback ...",
    }  # fmt: skip
    fields.update(overrides)
    return VariantRecord(**fields)  # type: ignore[arg-type]


def run(cell: str = "py311-torch2.5.1", results: list[VariantRecord] | None = None) -> RunRecord:
    return RunRecord(
        cell=cell,
        pins={"python": "3.11", "torch": "2.5.1"},
        environment={"python": "3.11.7", "torch": "2.5.1+cpu", "cuda": None},
        started="2026-01-01T00:00:00+00:00",
        finished="2026-01-01T00:01:00+00:00",
        results=[record()] if results is None else results,
    )


def written(tmp_path: Path, data: object, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def assert_one_line(info: pytest.ExceptionInfo[BugmatrixError], path: Path, needle: str) -> None:
    message = str(info.value)
    assert message.startswith(f"{path}: ") and needle in message and "\n" not in message, message
    assert "re-run its cell" in message, "says what to do"


def test_round_trip(tmp_path: Path) -> None:
    """What is written is what is read back, field for field."""
    path = tmp_path / "runs" / "cell.json"  # the directory is created
    original = run(results=[record(), record(id="autocast_cache::core[cuda]", device="cuda", outcome="skipped", verdict="not-run")])
    write_json_atomic(path, original.to_json())
    loaded = load_run_file(path)
    assert loaded == original and loaded.schema == SCHEMA
    assert json.loads(path.read_text())["install"] == {"status": "ok", "reason": ""}


def test_tracked_is_optional_and_round_trips(tmp_path: Path) -> None:
    """A run of a "latest" cell records requested and resolved; files written before the field load with {}."""
    path = tmp_path / "cell.json"
    tracked = run(results=[record()])
    tracked.tracked = {"torch": {"requested": "latest", "resolved": "2.15.0"}}
    write_json_atomic(path, tracked.to_json())
    assert load_run_file(path).tracked == tracked.tracked
    data = json.loads(path.read_text())
    del data["tracked"]
    path.write_text(json.dumps(data))
    assert load_run_file(path).tracked == {}


def test_written_files_are_world_readable(tmp_path: Path) -> None:
    """mkstemp's 0600 must not leak into reports that a CI artifact reader or web server serves."""
    path = tmp_path / "report.md"
    write_text_atomic(path, "# report\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_truncated_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A run killed mid-write by something else (or a bad copy) is reported, not a traceback."""
    text = json.dumps(run().to_json(), indent=1)
    path = written(tmp_path, text[: len(text) // 2])
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert_one_line(info, path, "not valid JSON")


@pytest.mark.parametrize("schema", ["bugmatrix.run/4", "bugmatrix.run/0", None])
def test_unknown_schema_version(tmp_path: Path, schema: str | None) -> None:
    """A file from another version of bugmatrix is refused by name."""
    data = run().to_json() | {"schema": schema}
    path = written(tmp_path, data)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert_one_line(info, path, f"schema {schema!r} is not 'bugmatrix.run/3'")


@pytest.mark.parametrize("content", ["[]", '"text"', "42", "null"])
def test_a_run_file_must_be_an_object(tmp_path: Path, content: str) -> None:
    """Valid JSON of the wrong shape is still refused in one line."""
    path = written(tmp_path, content)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert_one_line(info, path, "must be a JSON object")


@pytest.mark.parametrize(
    ("field", "value"),
    [("outcome", "exploded"), ("verdict", "meh"), ("outcome", None)],
)
def test_unknown_outcome_or_verdict_is_rejected(tmp_path: Path, field: str, value: object) -> None:
    """Only documented outcomes and verdicts are accepted; the message names the bad value."""
    data = run().to_json()
    data["results"][0][field] = value
    path = written(tmp_path, data)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert_one_line(info, path, "malformed run file")
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("missing", ["results", "cell", "install", "pins"])
def test_missing_fields_are_malformed(tmp_path: Path, missing: str) -> None:
    """A file missing a required field names the field."""
    data = run().to_json()
    del data[missing]
    path = written(tmp_path, data)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    assert_one_line(info, path, f"KeyError: {missing!r}")


def test_unreadable_path_is_one_line(tmp_path: Path) -> None:
    """A missing file (or a directory in its place) is reported with its path."""
    with pytest.raises(BugmatrixError) as info:
        load_run_file(tmp_path)
    assert_one_line(info, tmp_path, "a directory (a run file is read from a regular file only)")


def test_unknown_record_fields_are_ignored(tmp_path: Path) -> None:
    """A field added by a newer writer within the same schema does not break older readers."""
    data = run().to_json()
    data["results"][0]["future_field"] = 1
    assert load_run_file(written(tmp_path, data)).results == [record()]


def test_run_dir_loads_every_file_sorted_by_cell(tmp_path: Path) -> None:
    """The report reads a directory; order is by cell id, not by file name or mtime."""
    for cell in ("py311-torch2.6.0", "py311-torch2.10.0", "py311-torch2.0.1"):
        write_json_atomic(tmp_path / f"{cell}.json", run(cell=cell).to_json())
    assert [r.cell for r in load_run_dir(tmp_path)] == ["py311-torch2.0.1", "py311-torch2.10.0", "py311-torch2.6.0"]
    with pytest.raises(BugmatrixError, match="no run directory"):
        load_run_dir(tmp_path / "missing")


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("where", ["os.fsync", "os.replace"])
def test_interrupted_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Ctrl-C after the temporary file is written (before or at the rename) leaves the old file whole and no temp file."""
    path = tmp_path / "run.json"
    previous = run(results=[record()]).to_json()
    write_json_atomic(path, previous)

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(f"bugmatrix.files.{where}", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, run(results=[record(), record(id="x::y[cpu]")]).to_json())
    monkeypatch.undo()
    assert load_run_file(path).to_json() == previous
    assert _leftovers(tmp_path) == ["run.json"], "no temporary file left behind"


def test_interrupted_serialisation_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted while serialising (json.dumps): no new file appears at all."""
    path = tmp_path / "run.json"

    def interrupt(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr("bugmatrix.files.json.dumps", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, run().to_json())
    assert _leftovers(tmp_path) == []
