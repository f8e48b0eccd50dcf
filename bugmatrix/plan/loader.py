"""Read the cases by importing them (what pytest runs), even where torch is not installed.

An absent third-party module (and, for a plan, each matrix axis's module) is *deferred* during the import: its names
resolve (``torch.float16``), calling it raises a one-line error. Deferred modules leave ``sys.modules`` afterwards.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bugmatrix.cell.case import Case, case_of_module
from bugmatrix.errors import BugmatrixError

__all__ = ["DeferredCall", "case_files", "load_case"]

PACKAGE = "bugmatrix_cases"


class DeferredCall(Exception):
    """A case module called into a module that is not installed while being read."""


class _Deferred(types.ModuleType):
    """Stands for a module that is absent here: names resolve, calls refuse."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so `import torch.nn` resolves through the finder too

    def __getattr__(self, attr: str) -> _Deferred:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        child = _Deferred(f"{self.__name__}.{attr}")
        setattr(self, attr, child)
        return child

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise DeferredCall(f"{self.__name__}()")

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        return (object,)  # `class Net(torch.nn.Module)` at module level still defines a class


def _importer() -> str:
    """``__name__`` of the module whose code is running the import (importlib's own frames skipped)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("importlib", "_frozen_importlib")) and frame.f_code.co_filename != __file__:
            return str(name)
        frame = frame.f_back
    return ""


class _DeferredFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads as :class:`_Deferred` the imports of a case, a harness module or a deferred module (not a library's
    ``try: import x``). Last on ``sys.meta_path`` it sees only absent modules; with ``only``, first, those even where installed."""

    def __init__(self, only: frozenset[str] | None = None) -> None:
        self.only = only

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        root = name.partition(".")[0]
        if root in ("bugmatrix", PACKAGE) or root in sys.stdlib_module_names:
            return None  # a typo in the harness or the stdlib must stay an ImportError
        if self.only is not None and root not in self.only:
            return None
        parent = sys.modules.get(name.rpartition(".")[0])
        if not (isinstance(parent, _Deferred) or _importer().startswith((PACKAGE, "bugmatrix."))):
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Deferred(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@contextmanager
def _deferring(always: frozenset[str] = frozenset()) -> Iterator[None]:
    finder, first = _DeferredFinder(), _DeferredFinder(always)
    before = set(sys.modules)
    sys.meta_path.append(finder)
    sys.meta_path.insert(0, first)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        sys.meta_path.remove(first)
        for name in set(sys.modules) - before:
            module = sys.modules[name]
            ours = name.startswith(("bugmatrix.", PACKAGE + "."))
            tainted = isinstance(module, _Deferred) or (ours and any(isinstance(v, _Deferred) for v in vars(module).values()))
            if tainted or name.startswith(PACKAGE + "."):
                del sys.modules[name]  # a later real import must not find a module built on stand-ins


def case_files(cases_dir: Path) -> list[Path]:
    """The case modules of a directory (files starting with ``_`` are helpers)."""
    if not cases_dir.is_dir():
        msg = f"{cases_dir}: no case directory; run from the repository root or pass --cases"
        raise BugmatrixError(msg)
    return sorted(p for p in cases_dir.glob("*.py") if not p.name.startswith("_"))


def load_case(path: Path, defer: frozenset[str] = frozenset()) -> Case:
    """Import one case module (absent third-party modules, and the top-level modules in ``defer``, deferred) and return its Case."""
    spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{path.stem}", path)
    if spec is None or spec.loader is None:
        msg = f"{path}: cannot be imported as a module"
        raise BugmatrixError(msg)
    module = importlib.util.module_from_spec(spec)
    with _deferring(defer):
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            msg = f"{path}:{exc.lineno}: syntax error in case module ({exc.msg}); fix it before planning"
            raise BugmatrixError(msg) from None
        except DeferredCall as exc:
            msg = f"{path}: calls {exc} while being imported, but that module is not installed where plans are made; move the call into a variant function"
            raise BugmatrixError(msg) from None
        except BugmatrixError:
            raise
        except Exception as exc:  # noqa: BLE001 - any error in a case module is the author's to fix, in one line
            msg = f"{path}: importing the case failed ({type(exc).__name__}: {exc}); run `python -m pytest {path}` in a cell to see the traceback"
            raise BugmatrixError(msg) from None
    return case_of_module(vars(module), path.stem, path)
