"""Paths in a run file as any checkout reads them: relative to the checkout, installed code from its package onward.

A run file is committed and read on other machines (the GPU runs come from a
baked image in ``/opt/torch/.venv``; the CPU reference from a checkout in
``/work/final``). A traceback naming ``/work/final/.nox/cell-py311-torch2-5-1/lib/python3.11/site-packages/torch/autograd/graph.py``
says only ``torch/autograd/graph.py`` to anyone else, and says where the machine
kept its files, which is nobody's business. So every text a cell records goes
through :class:`Portable` once, where the record is added to the run file:

* a path under an *import root* (a ``sys.path`` directory that holds installed
  distributions: ``site-packages``, ``dist-packages``, a ``pip install --target``
  directory on ``PYTHONPATH``) reads from the distribution's package onward
  (``torch/autograd/graph.py``);
* a path under the checkout reads relative to it (``cases/autocast_cache.py``,
  ``.nox/cell-py311-torch2-5-1/bin/python``);
* anything else (the interpreter's standard library, ``/tmp``) is left as it is.

The longest prefix wins, so a venv inside the checkout is an import root first.
Standard library only: this runs inside every cell's interpreter.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Portable", "import_roots"]

#: The head of a log :func:`~bugmatrix.cell.outcomes.tail` cut: what follows may start in the middle of a path.
_CUT = re.compile(r"\[[\d,]+ characters cut\] … ")


def import_roots(path: Iterable[str] | None = None) -> tuple[str, ...]:
    """The directories of ``sys.path`` (or ``path``) that hold installed distributions (a ``*.dist-info`` inside)."""
    roots = []
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a missing directory
            continue
        if entry and any(name.endswith(".dist-info") for name in names):
            roots.append(entry)
    return tuple(roots)


@dataclass(frozen=True)
class Portable:
    """Removes one machine's path prefixes from recorded text: the checkout's, and each import root's."""

    #: Every prefix to remove, with its trailing separator, the longest first.
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, checkout: str, roots: Iterable[str] = ()) -> Portable:
        """``checkout`` -> relative, each of ``roots`` -> from the package on (each as written and resolved)."""
        found = {
            form.rstrip(os.sep) + os.sep
            for directory in (checkout, *roots)
            for form in (directory, os.path.realpath(directory))
            if form.rstrip(os.sep)
        }
        return cls(tuple(sorted(found, key=len, reverse=True)))

    @classmethod
    def here(cls, checkout: str) -> Portable:
        """This interpreter's: ``checkout`` and the import roots of its ``sys.path``."""
        return cls.of(str(checkout), import_roots())

    def text(self, text: str) -> str:
        """``text`` with each prefix removed wherever it starts a path, and the piece of one a cut log begins with."""
        for prefix in self.prefixes:
            if prefix in text:
                text = text.replace(prefix, "")
        cut = _CUT.match(text)
        if cut:
            rest = text[cut.end() :]
            piece = next((p[k:] for p in self.prefixes for k in range(1, len(p) - 1) if rest.startswith(p[k:])), "")
            text = text[: cut.end()] + rest[len(piece) :]
        return text
