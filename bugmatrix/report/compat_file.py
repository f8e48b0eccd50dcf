"""Reading a compat document from disk (the baseline): any defect is one line naming the file, the key and the fix.

What a valid document is, is written down once: ``compat.schema.json``
beside this module (:data:`SCHEMA_FILE`, validated against the committed
reports in the tests). Reading checks the shape the analyses rely on and
lets :meth:`~bugmatrix.report.model.Compat.from_json` do the rest; a
hand-edited file fails here, by name, never as a traceback further on.
"""

from __future__ import annotations

from pathlib import Path

from bugmatrix.errors import BugmatrixError
from bugmatrix.files import read_json
from bugmatrix.report.model import COMPAT_SCHEMA, OLD_COMPAT_SCHEMAS, Compat
from bugmatrix.values import profile_name

__all__ = ["SCHEMA_FILE", "load_compat"]

#: The JSON Schema of every compat version this code reads (compat.json, baseline.json).
SCHEMA_FILE = Path(__file__).with_name("compat.schema.json")
FIX = "regenerate it with: nox -s report -- --update-baseline"


def _check_shape(path: Path, data: object) -> dict:
    if not isinstance(data, dict) or data.get("schema") not in (COMPAT_SCHEMA, *OLD_COMPAT_SCHEMAS):
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        msg = f"{path}: schema {found!r} is not {COMPAT_SCHEMA!r}; {FIX}"
        raise BugmatrixError(msg)
    for key, kind in {"cells": list, "variants": list, "results": dict}.items():
        if not isinstance(data.get(key), kind):
            msg = f"{path}: key {key!r} must be a JSON {'array' if kind is list else 'object'}; {FIX}"
            raise BugmatrixError(msg)
        if kind is list and not all(isinstance(item, dict) and "id" in item for item in data[key]):
            msg = f"{path}: every item of {key!r} must be an object with an 'id'; {FIX}"
            raise BugmatrixError(msg)
    for variant_id, per_cell in data["results"].items():
        if not isinstance(per_cell, dict) or not all(isinstance(e, dict) and "outcome" in e for e in per_cell.values()):
            msg = f"{path}: results[{variant_id!r}] must map cell ids to entries with an 'outcome'; {FIX}"
            raise BugmatrixError(msg)
    if "profile" in data:  # the profile reaches file names, the site's paths and the issue bodies' links: one rule everywhere
        try:
            profile_name(data["profile"], "key 'profile'")
        except BugmatrixError as exc:
            msg = f"{path}: {exc}; {FIX}"
            raise BugmatrixError(msg) from None
    return data


def load_compat(path: Path) -> Compat:
    """Read a compat document (the baseline) of any known version."""
    data = read_json(path, "compat document", fix=FIX)
    try:
        return Compat.from_json(_check_shape(path, data))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        msg = f"{path}: malformed compat document ({type(exc).__name__}: {exc}); {FIX}"
        raise BugmatrixError(msg) from exc
