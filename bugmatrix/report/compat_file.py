"""Reading a compat document from disk (the baseline): any defect is one line naming the file, the key and the fix.

The bytes are decoded by the model :class:`bugmatrix.documents.compat.Compat` (its JSON Schema, :data:`SCHEMA_FILE`,
is generated from it), then :meth:`~bugmatrix.report.model.Compat.from_document` builds the report's values: a
hand-edited file fails here, by name, never as a traceback further on.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from bugmatrix.documents import compat as document
from bugmatrix.documents.schemas import DIRECTORY
from bugmatrix.errors import BugmatrixError
from bugmatrix.files import decode_json, read_bytes
from bugmatrix.report.model import Compat

__all__ = ["SCHEMA_FILE", "load_compat"]

#: The JSON Schema of every compat version this code reads (compat.json, baseline.json), generated from the model.
SCHEMA_FILE = DIRECTORY / "compat.schema.json"
FIX = "regenerate it with: nox -s report -- --update-baseline"
_DECODER = msgspec.json.Decoder(document.Compat)


def load_compat(path: Path) -> Compat:
    """Read a compat document (the baseline) of any known version."""
    raw = read_bytes(path, "compat document", fix=FIX)
    decode_json(raw, path, "compat document", fix=FIX)  # not JSON at all: the same line as every other reader's
    try:
        return Compat.from_document(_DECODER.decode(raw))
    except msgspec.ValidationError as exc:
        msg = f"{path}: malformed compat document ({type(exc).__name__}: {exc}); {FIX}"
        raise BugmatrixError(msg) from exc
