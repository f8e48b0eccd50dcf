"""The JSON Schema files of the documents, generated from their models and never edited by hand.

``--write`` writes them (``json/<name>.schema.json``); without it, exit 1 naming any committed file that is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from bugmatrix.documents.compat import Compat
from bugmatrix.documents.history import NightLine
from bugmatrix.documents.lane import LaneFile
from bugmatrix.documents.matrix import MatrixFile
from bugmatrix.documents.nights import NightsFile
from bugmatrix.documents.resolution import ResolutionFile
from bugmatrix.documents.run import RunFile
from bugmatrix.files import write_text_atomic

__all__ = ["DIRECTORY", "MODELS", "generated", "main", "stale"]

DIRECTORY = Path(__file__).with_name("json")
#: Each schema file's name and the model it is generated from, with what the document is.
MODELS: dict[str, tuple[type[msgspec.Struct], str]] = {
    "run": (RunFile, "bugmatrix run file (reports/runs/<cell>.json), written by each cell"),
    "compat": (Compat, "bugmatrix compat document (compat.json, baseline.json), written by the report"),
    "history": (NightLine, "bugmatrix history line (one line of history.jsonl per report run), written by the report"),
    "lane": (LaneFile, "bugmatrix re-resolve lane record (<out>/resolve.json), written by the reresolve session"),
    "matrix": (MatrixFile, "bugmatrix matrix file (matrix.toml, as parsed TOML), written by hand"),
    "nights": (NightsFile, "bugmatrix site index (nights.json of the Pages site), written by the site session"),
    "resolution": (ResolutionFile, "bugmatrix saved resolution (<reports>/resolution.json), written by the plan"),
}


def _schema(name: str) -> dict[str, Any]:
    model, title = MODELS[name]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": f"Generated from {model.__module__}.{model.__name__} by python -m bugmatrix.documents.schemas --write; do not edit.",
        **msgspec.json.schema(model),
    }


def generated() -> dict[Path, str]:
    """Every schema file's path and the text the models give it."""
    return {DIRECTORY / f"{name}.schema.json": json.dumps(_schema(name), indent=1, ensure_ascii=False) + "\n" for name in MODELS}


def stale() -> list[Path]:
    """The schema files that differ from what the models generate (or are missing)."""
    return [path for path, text in generated().items() if not path.is_file() or path.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    """Check the schema files (exit 1 naming a stale one), or ``--write`` them."""
    parser = argparse.ArgumentParser(prog="python -m bugmatrix.documents.schemas", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the schema files from the models")
    if parser.parse_args(argv).write:
        for path, text in generated().items():
            write_text_atomic(path, text)
        return 0
    outdated = stale()
    for path in outdated:
        print(f"{path}: not what the models generate; run python -m bugmatrix.documents.schemas --write", file=sys.stderr)
    return 1 if outdated else 0


if __name__ == "__main__":
    sys.exit(main())
