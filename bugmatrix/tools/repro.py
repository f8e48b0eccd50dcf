"""Export one variant as a standalone, issue-ready reproduction.

repro.py is the case's syntax tree minus the harness's declarations, with the helpers it calls and the suite's own
outcome classification copied in, so it classifies exactly as the suite does. The cell's lock goes with it where it
has one: months later, loose pins resolve to another registry."""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import subprocess
import textwrap
from collections.abc import Mapping
from pathlib import Path

from jinja2 import PackageLoader

from bugmatrix.cell import outcomes
from bugmatrix.cell.case import DEVICE_CONSTANTS, Case, SkipVariant, Variant
from bugmatrix.cell.caseenv import Env
from bugmatrix.documents.run import load_run_file
from bugmatrix.files import check_output_dir
from bugmatrix.paths import ROOT
from bugmatrix.plan.cells import sibling_id
from bugmatrix.plan.matrix import Matrix
from bugmatrix.plan.slices import split_environment
from bugmatrix.report.render_md import TEXT
from bugmatrix.run.lock import lock_for
from bugmatrix.run.runner import built_python

__all__ = ["FILES", "build_script", "export_repro", "variant_cell"]

MANIFEST = ".bugmatrix-repro"
LOCKED = "requirements.lock.txt"
FILES = ("repro.py", "requirements.txt", LOCKED, "ISSUE.md")
#: Names that only declare a case to the harness.
DECLARING_MODULES = ("bugmatrix", "bugmatrix.cell.case", "bugmatrix.cell.outcomes")
DECLARATIONS = {"Case", "Expect", "Requires", "Signature", "Source", "observed", *DEVICE_CONSTANTS}

#: repro.py (the case with the harness's classification copied in) and ISSUE.md (the story, how to make the environment,
#: what the suite observed): the report's text settings, this package's templates.
TEMPLATES = TEXT.overlay(loader=PackageLoader("bugmatrix.tools", "templates"))
ISSUE = TEMPLATES.get_template("issue.md.j2")
SCRIPT = TEMPLATES.get_template("repro.py.j2")


def _module_body(source: str) -> list[ast.stmt]:
    """A module's statements minus its docstring, ``__future__``/harness imports and ``__all__``."""
    tree = ast.parse(source)
    return [
        node
        for node in (tree.body[1:] if ast.get_docstring(tree) else tree.body)
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("bugmatrix", "__future__")))
        and not (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets))
    ]


def _helper_modules(source: str) -> list[str]:
    """The harness helper modules a case imports (``bugmatrix.cell.checks``), copied whole."""
    names = [
        n.module
        for n in ast.parse(source).body
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("bugmatrix.") and n.module not in DECLARING_MODULES
    ]
    paths = {name: ROOT / (name.replace(".", "/") + ".py") for name in names}
    return [
        f"# --- {name} ---\n" + "\n\n\n".join(map(ast.unparse, _module_body(p.read_text(encoding="utf-8")))) for name, p in paths.items()
    ]


def _uses_declaration(node: ast.AST, case_name: str) -> bool:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return bool(names & (DECLARATIONS | {case_name}))


def _case_body(source: str, case_name: str) -> str:
    """The case module minus harness imports, the Case object and every declaration-only statement."""
    body = []
    for node in _module_body(source):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.decorator_list = [d for d in node.decorator_list if not _uses_declaration(d, case_name)]
        elif _uses_declaration(node, case_name):
            continue  # case = Case(...), EXPECT = (Expect(...),), ...
        body.append(ast.unparse(node))
    return "\n\n\n".join(body)


def _story(variant: Variant) -> str:
    return textwrap.dedent(variant.fn.__globals__.get("__doc__") or "").strip()


def build_script(variant: Variant, providers: Mapping[str, list[tuple[str, str]]]) -> str:
    """The text of a standalone repro.py for one variant; ``providers`` is the cell's axis spec."""
    namespace = variant.fn.__globals__  # the case module's own namespace, however it was imported
    source = Path(namespace["__file__"]).read_text(encoding="utf-8")
    case_name = next(name for name, value in namespace.items() if isinstance(value, Case) and variant in value.variants)
    return SCRIPT.render(
        variant=variant,
        device=repr(variant.device),
        story=_story(variant),
        outcomes="\n\n\n".join(ast.unparse(n) for n in _module_body(inspect.getsource(outcomes))),
        skip_variant=inspect.getsource(SkipVariant),
        patterns=repr(namespace[case_name].signature.patterns),
        providers=repr(dict(providers)),
        helpers="".join(text + "\n\n\n" for text in _helper_modules(source)),
        case_body=_case_body(source, case_name),
    )


def variant_cell(matrix: Matrix, variant: Variant, pins: Mapping[str, str]) -> tuple[str, Env]:
    """The cell ``variant`` runs in at ``pins`` (a sibling where its case asks for an environment of its own), and that environment."""
    _, extra = split_environment(matrix, variant, tuple(pins))
    return (sibling_id(matrix.cell_id(pins), extra) if extra else matrix.cell_id(pins)), extra


def export_repro(
    matrix: Matrix, variant: Variant, pins: Mapping[str, str], out: Path, run_dir: Path, *, force: bool = False, fresh: bool = True
) -> Path:
    """Write :data:`FILES` for one variant and the given pins; ``fresh=False`` quotes the run file's log instead of running repro.py."""
    check_output_dir(out, "--out", manifest=MANIFEST, force=force, example="build/repro")
    out.mkdir(parents=True, exist_ok=True)
    needed = {a: v for a, v in pins.items() if a in matrix.held_axes or a in variant.axes}
    cell, extra = variant_cell(matrix, variant, pins)
    requirements = matrix.requirements_for(needed, harness=False, extra=extra)
    (out / MANIFEST).write_text("\n".join(FILES) + "\n")
    (out / "repro.py").write_text(build_script(variant, matrix.axis_providers(needed)))
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    lock, why_not = lock_for(ROOT, cell, matrix.requirements_for(pins, extra=extra), pins[matrix.interpreter])
    if lock is not None:
        shutil.copyfile(lock, out / LOCKED)
    else:
        (out / LOCKED).unlink(missing_ok=True)  # an earlier export's lock would pin another environment
    fresh_log = None
    python = built_python(ROOT, cell) if fresh else None
    if python is not None:  # repro.py run in the cell's environment (its variables and interpreter flags too), where one is built already
        env = {**os.environ, **dict(extra.variables)}
        done = subprocess.run(
            [str(python), *extra.flags, str(out / "repro.py")], capture_output=True, text=True, timeout=600, check=False, env=env
        )
        fresh_log = (done.stderr.strip() + "\n" + done.stdout.strip()).strip()
    run_file = run_dir / f"{cell}.json"
    record = next((r for r in load_run_file(run_file).results if r.id == variant.id), None) if run_file.exists() else None
    context = {"variant": variant.id, "story": _story(variant), "python": pins[matrix.interpreter], "lock_name": LOCKED}
    context |= {"requirements": requirements, "cell": cell, "extra": extra, "locked": lock is not None, "why_not": why_not}
    (out / "ISSUE.md").write_text(ISSUE.render(context, fresh=fresh_log, record=record))
    return out
