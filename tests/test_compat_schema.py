"""The compat document's schema (generated from bugmatrix/documents/compat.py into documents/json/compat.schema.json) holds for what is on disk and what is written."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bugmatrix.cell.outcomes import Kind, Outcome, Verdict
from bugmatrix.documents.compat import ExpectationSource, InstallStatus, NoteKind
from bugmatrix.documents.schemas import DIRECTORY
from bugmatrix.report.model import COMPAT_SCHEMA, OLD_COMPAT_SCHEMAS, load_compat
from bugmatrix.report.night import analyse
from tests.test_explain import compat_of, new_release_runs
from tests.test_report import fixture_compat

jsonschema = pytest.importorskip("jsonschema", reason="the tests session installs jsonschema (noxfile.py base_stack)")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads((DIRECTORY / "compat.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.protocols.Validator, document: object) -> list[str]:
    return [f"{e.json_path}: {e.message[:200]}" for e in validator.iter_errors(document)]


@pytest.mark.parametrize("name", ["compat.json", "baseline.json"])
def test_the_committed_reports_are_valid(validator: jsonschema.protocols.Validator, name: str) -> None:
    document = json.loads((ROOT / "reports" / name).read_text(encoding="utf-8"))
    assert errors(validator, document) == []
    load_compat(ROOT / "reports" / name)  # and the model reads them


def test_what_the_report_writes_is_valid(validator: jsonschema.protocols.Validator) -> None:
    """A document with every part the current version adds: releases (one that does not install), moved, missing, expectation."""
    runs = new_release_runs("reproduced")
    broken = copy.deepcopy(runs[-1])
    broken.cell, broken.pins = "py311-torch2.99.0-pl2.0.3", {**broken.pins, "torch": "2.99.0"}
    broken.results, broken.environment = [], {}
    broken.install = {"status": "failed", "reason": "error: No solution found\n  cause: Because there is no version of torch==2.99.0 ..."}
    broken.tracked = {"torch": {"requested": "latest", "resolved": "2.99.0"}}
    report = analyse(compat_of([*runs, broken]), fixture_compat())
    document = report.to_json()
    assert document["schema"] == COMPAT_SCHEMA and document["releases"] and document["moved"] == []
    assert any(n["kind"] == "does-not-install" for n in document["releases"])
    assert errors(validator, document) == []


def test_a_document_the_schema_refuses(validator: jsonschema.protocols.Validator) -> None:
    """The schema is not a formality: an unknown outcome, a missing cell id or an unknown key are each refused."""
    document = analyse(fixture_compat()).to_json()
    variant, per_cell = next(iter(document["results"].items()))
    cell = next(iter(per_cell))
    bad = copy.deepcopy(document)
    bad["results"][variant][cell]["outcome"] = "exploded"
    assert any("exploded" in e for e in errors(validator, bad))
    bad = copy.deepcopy(document)
    del bad["cells"][0]["id"]
    assert errors(validator, bad)
    bad = copy.deepcopy(document)
    bad["surprise"] = 1
    assert errors(validator, bad)


def test_the_schema_file_names_what_the_code_knows(validator: jsonschema.protocols.Validator) -> None:
    """Version, outcomes, verdicts, kinds, note kinds, install states and expectation sources: in step with the enums."""
    schema, defs = validator.schema, validator.schema["$defs"]
    assert set(defs["Compat"]["properties"]["schema"]["enum"]) == {COMPAT_SCHEMA, *OLD_COMPAT_SCHEMAS}
    assert set(defs["Outcome"]["enum"]) == {o.value for o in Outcome}  # msgspec sorts the values
    assert set(defs["Verdict"]["enum"]) == {v.value for v in Verdict}
    assert set(defs["Kind"]["enum"]) == {k.value for k in Kind}
    assert defs["ReleaseNote"]["properties"]["kind"] == {"$ref": "#/$defs/NoteKind"}
    assert set(defs["NoteKind"]["enum"]) == {k.value for k in NoteKind}
    assert defs["CellInstall"]["properties"]["status"] == {"$ref": "#/$defs/InstallStatus"}
    assert set(defs["InstallStatus"]["enum"]) == {s.value for s in InstallStatus}
    assert defs["ExpectationSummary"]["properties"]["source"] == {"$ref": "#/$defs/ExpectationSource"}
    assert set(defs["ExpectationSource"]["enum"]) == {s.value for s in ExpectationSource}
    assert schema["$ref"] == "#/$defs/Compat"
