"""Export one variant as a standalone, issue-ready reproduction.

The output directory holds ``repro.py`` (no dependency on bugmatrix: the few
harness names a case uses are defined inline, the case's own code is copied
verbatim), a pinned ``requirements.txt`` and ``ISSUE.md`` with the observed
traceback, the versions and expected vs actual behaviour. ``repro.py`` prints
``OUTCOME: <outcome>`` as its last line, classified exactly as the suite does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from bugmatrix.bisect import parse_variant_id
from bugmatrix.errors import BugmatrixError
from bugmatrix.matrix import Matrix
from bugmatrix.plan import cell_id, requirements_for

__all__ = ["build_script", "export_repro"]

HARNESS_IMPORT = re.compile(r"^from bugmatrix(?:\.\w+)? import (?:\([^)]*\)|[^\n]*)\n", re.MULTILINE)

# Stand-ins for the harness names a case module uses: declaration only, no behaviour.
SHIM = '''
# --- minimal stand-ins for the bugmatrix declarations used below -----------
CPU_BF16, CUDA_BF16, CUDA_FP16 = ("cpu", "bfloat16"), ("cuda", "bfloat16"), ("cuda", "float16")
Checks = dict


class SkipVariant(Exception):
    """The variant cannot run in this environment."""


class Signature:
    def __init__(self, *patterns):
        self.patterns = patterns

    def matches(self, text):
        return any(re.search(p, text) for p in self.patterns)


def Expect(*args, **kwargs):  # noqa: N802 - expectations are the suite's business
    return None


def Requires(**kwargs):  # noqa: N802
    return None


def installed_version(distribution):
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


class Case:
    def __init__(self, **kwargs):
        self.signature = kwargs["signature"]
        self.functions = {}

    def variant(self, **kwargs):
        def register(fn):
            self.functions[fn.__name__] = fn
            return fn
        return register
'''

MAIN = """

# --- run one variant, classify as the suite does -----------------------------
if __name__ == "__main__":
    import random
    import traceback

    random.seed(0)
    torch.manual_seed(0)
    print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| device {device}")
    try:
        checks = case.functions[{name!r}]({device!r}, torch.{dtype})
    except SkipVariant as exc:
        print("OUTCOME: skipped", exc)
    except Exception as exc:  # the failure under study
        traceback.print_exc()
        text = f"{{type(exc).__name__}}: {{exc}}"
        print("OUTCOME:", "reproduced" if case.signature.matches(text) else "different")
    else:
        print("checks:", checks)
        print("OUTCOME:", "fixed" if checks and all(checks.values()) else "different")
"""


def _checks_source(root: Path) -> str:
    """bugmatrix/checks.py without its docstring, future import and ``__all__``."""
    text = (root / "bugmatrix" / "checks.py").read_text()
    body = HARNESS_IMPORT.sub("", text.split('"""', 2)[2])
    return re.sub(r"^(from __future__ import annotations|__all__ = .*)$", "", body, flags=re.MULTILINE)


def build_script(root: Path, variant_id: str) -> str:
    """The text of a standalone repro.py for one variant."""
    case, name, device = parse_variant_id(variant_id)
    source_path = root / "cases" / f"{case}.py"
    if not source_path.exists():
        msg = f"unknown case {case!r}: no {source_path}"
        raise BugmatrixError(msg)
    source = source_path.read_text()
    dtype = _dtype_for(source, name, device)
    doc, _, body = source.partition('"""\n\nfrom __future__ import annotations\n')
    body = HARNESS_IMPORT.sub("", body)
    header = f'"""Standalone reproduction of {variant_id} (exported by bugmatrix).\n\n{doc.lstrip(chr(34))}\n"""\n\nfrom __future__ import annotations\n\nimport re\n'
    return header + SHIM + _checks_source(root) + body + MAIN.format(name=name, device=device, dtype=dtype)


def _dtype_for(source: str, name: str, device: str) -> str:
    """The dtype the variant declares for ``device`` (read from its decorator)."""
    match = re.search(r"@case\.variant\((?P<args>(?:(?!\ndef ).)*?)\)\ndef " + re.escape(name) + r"\(", source, re.DOTALL)
    if match is None:
        msg = f"no variant {name!r} in the case module"
        raise BugmatrixError(msg)
    constants = dict(re.findall(r'^(\w+) = \("(?:cpu|cuda)", "(\w+)"\)', source, re.MULTILINE))
    constants |= {"CUDA_FP16": "float16", "CUDA_BF16": "bfloat16", "CPU_BF16": "bfloat16"}
    devices = re.search(r"devices=\((?P<list>[^)]*(?:\)[^)]*)?)\)", match["args"])
    for token in re.findall(r"\w+", devices["list"] if devices else ""):
        if token in constants and token.lower().startswith(device):
            return constants[token]
    msg = f"variant {name!r} declares no {device} device"
    raise BugmatrixError(msg)


def export_repro(root: Path, matrix: Matrix, variant_id: str, pins: Mapping[str, str], out: Path, run_dir: Path) -> Path:
    """Write repro.py, requirements.txt and ISSUE.md for one variant and cell."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro.py").write_text(build_script(root, variant_id))
    requirements = [r for r in requirements_for(matrix, pins) if r not in matrix.harness]
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    cell = cell_id(pins)
    observed = _observed(run_dir / f"{cell}.json", variant_id)
    (out / "ISSUE.md").write_text(_issue_text(root, variant_id, pins, requirements, observed, cell))
    return out


def _observed(run_file: Path, variant_id: str) -> dict | None:
    if not run_file.exists():
        return None
    data = json.loads(run_file.read_text())
    record = next((r for r in data.get("results", []) if r["id"] == variant_id), None)
    return {"record": record, "environment": data.get("environment", {})} if record else None


def _issue_text(root: Path, variant_id: str, pins: Mapping[str, str], requirements: list[str], observed: dict | None, cell: str) -> str:
    case, _, _ = parse_variant_id(variant_id)
    story = (root / "cases" / f"{case}.py").read_text().split('"""')[1].strip()
    lines = [f"# {story.splitlines()[0]}", "", story, "", "## Environment", ""]
    if observed:
        lines += [f"- {k}: {v}" for k, v in sorted(observed["environment"].items()) if k != "executable"]
    else:
        lines += [f"- pinned: {', '.join(requirements)} (python {pins['python']}); not yet run in cell {cell}"]
    lines += [
        "",
        "## Reproduce",
        "",
        "```",
        "python -m venv venv && venv/bin/pip install -r requirements.txt",
        "venv/bin/python repro.py",
        "```",
        "",
    ]
    lines += ["## Expected vs actual", "", "Expected: the program runs to the end and every positive check holds (`OUTCOME: fixed`)."]
    if observed:
        record = observed["record"]
        lines += [f"Actual (cell `{cell}`): `{record['outcome']}`", "", "```", (record.get("log") or record["message"]).strip(), "```"]
    return "\n".join(lines) + "\n"
