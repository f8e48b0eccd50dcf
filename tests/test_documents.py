"""The documents between stages are declared once (bugmatrix/documents/): their schema files, the noxfile's script
block, and every committed document are checked against the models here."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import nox.project
import pytest
from packaging.requirements import Requirement

from bugmatrix.cell.runfile import RunRecord, VariantRecord
from bugmatrix.documents import schemas
from bugmatrix.documents.compat import Compat
from bugmatrix.documents.run import Result, RunFile, load_run_file, read_run_dir
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import write_json_atomic

ROOT = Path(__file__).resolve().parent.parent
#: Each committed document's model, by where it lies under reports/.
MODELS: dict[str, type[msgspec.Struct]] = {"compat.json": Compat, "baseline.json": Compat, "runs/*.json": RunFile}
#: Committed measurements of the tools (benchmark, stability): outputs for people that no stage reads back.
TOOL_OUTPUTS = {"benchmark.json", "benchmark-full.json", "stability.json"}


def _committed() -> list[str]:
    """reports/*.json and reports/runs/*.json (globbed: the tests also run in copies of the project without .git)."""
    reports = ROOT / "reports"
    return sorted(str(p.relative_to(reports)) for p in [*reports.glob("*.json"), *reports.glob("runs/*.json")])


def _model(name: str) -> type[msgspec.Struct]:
    return MODELS["runs/*.json" if name.startswith("runs/") else name]


def _without_added(encoded: Any, original: Any, added: set[str]) -> Any:
    """``encoded`` less the keys ``original`` lacks (a default the model fills in), each one's name put in ``added``."""
    if isinstance(encoded, dict) and isinstance(original, dict):
        added |= set(encoded) - set(original)
        return {k: _without_added(v, original[k], added) for k, v in encoded.items() if k in original}
    if isinstance(encoded, list) and isinstance(original, list) and len(encoded) == len(original):
        return [_without_added(e, o, added) for e, o in zip(encoded, original, strict=True)]
    return encoded


def test_the_schema_files_are_what_the_models_generate() -> None:
    assert schemas.stale() == [], "run: python -m bugmatrix.documents.schemas --write"
    assert schemas.main([]) == 0


def test_a_schema_file_edited_by_hand_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(schemas, "DIRECTORY", tmp_path)
    assert schemas.main(["--write"]) == 0 and schemas.stale() == []
    edited = tmp_path / "run.schema.json"
    edited.write_text(edited.read_text().replace('"string"', '"number"', 1))
    assert schemas.stale() == [edited] and schemas.main([]) == 1
    assert str(edited) in capsys.readouterr().err


def test_the_noxfile_script_block_lists_pyprojects_dependencies_and_nox() -> None:
    """nox runs the noxfile in an env of these (script mode): the noxfile imports the harness, which needs them all."""
    block = nox.project.load_toml(ROOT / "noxfile.py")
    pyproject = nox.project.load_toml(ROOT / "pyproject.toml")
    needs = re.search(r'^nox\.needs_version = "([^"]+)"', (ROOT / "noxfile.py").read_text(encoding="utf-8"), re.MULTILINE)
    assert needs is not None
    assert block["dependencies"] == [f"nox{needs[1]}", *pyproject["project"]["dependencies"]]
    assert {Requirement(d).name for d in block["dependencies"]} >= {"nox", "msgspec"}
    assert block["tool"]["nox"]["script-venv-backend"] == "uv"


@pytest.mark.parametrize("name", [n for n in _committed() if n not in TOOL_OUTPUTS])
def test_every_committed_document_reads_back_unchanged(name: str) -> None:
    raw = (ROOT / "reports" / name).read_bytes()
    original = json.loads(raw)
    encoded = json.loads(msgspec.json.encode(msgspec.json.decode(raw, type=_model(name))))
    added: set[str] = set()
    assert _without_added(encoded, original, added) == original
    # Only keys newer than the file may be filled in, each with its default (the report's writer omits them when empty).
    assert added <= {"pinned", "old_checks", "tried"}, added


def test_every_committed_document_has_a_model_or_is_a_tool_output() -> None:
    names = _committed()
    assert "compat.json" in names and any(n.startswith("runs/") for n in names)
    assert [n for n in names if n not in TOOL_OUTPUTS and not n.startswith("runs/") and n not in MODELS] == []


def test_the_run_model_has_the_fields_the_cell_writes() -> None:
    """The cell writes the run file with the standard library (its dataclasses); the harness's model has the same keys."""
    assert set(Result.__struct_fields__) == {f.name for f in dataclasses.fields(VariantRecord)}
    assert set(RunFile.__struct_fields__) == {f.name for f in dataclasses.fields(RunRecord)} - {"digest"}


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (lambda d: d["results"][0].update(duration_s="1.5"), "`$.results[0].duration_s`"),
        (lambda d: d["results"][0].update(outcome="exploded"), "`$.results[0].outcome`"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d["install"].update(status="maybe"), "`$.install.status`"),
        (lambda d: d.update(origin={"date": "x"}), "`$.origin`"),
    ],
)
def test_the_harness_refuses_a_malformed_run_file_in_one_line(tmp_path: Path, change: Any, names: str) -> None:
    """What the cell's reader would take (an unknown key, a number as a string) the harness's model refuses, by name."""
    source = ROOT / "reports" / "runs" / _committed_runs()[0]
    document = json.loads(source.read_text(encoding="utf-8"))
    change(document)
    path = tmp_path / "runs" / source.name
    write_json_atomic(path, document)
    with pytest.raises(BugmatrixError) as info:
        load_run_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and names in message and "re-run its cell" in message
    runs, unreadable = read_run_dir(path.parent)
    assert runs == [] and unreadable[0].why == message


def _committed_runs() -> list[str]:
    return [n.removeprefix("runs/") for n in _committed() if n.startswith("runs/")]


def test_the_committed_run_files_load_through_the_model() -> None:
    runs, unreadable = read_run_dir(ROOT / "reports" / "runs")
    assert unreadable == [] and len(runs) == len(_committed_runs())
