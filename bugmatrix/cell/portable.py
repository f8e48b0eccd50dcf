"""Paths in a run file as any checkout reads them: relative to the checkout, installed code from its package onward.

A committed run file must name no path of the machine that ran it: a path under an *import root* (a ``sys.path``
directory holding ``*.dist-info``) reads from the package on (``torch/autograd/graph.py``), one under the checkout
relative to it, anything else as it is. The longest prefix wins. Standard library only.
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
