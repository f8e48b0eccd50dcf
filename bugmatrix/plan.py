"""From the matrix and the cases' axes to the list of cells.

Cells are not the cross product of every axis: each variant spans only the
axes it depends on (core torch cases: torch; the T5 case: lightning x
transformers), and the plan is the union of those projections, with axes a
projection does not span held at the matrix's ``base`` pins. A cell whose pins
are all contained in a larger cell is dropped: the larger one runs it too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from packaging.version import Version

from bugmatrix.errors import BugmatrixError
from bugmatrix.matrix import AXES, PROFILES, Matrix

__all__ = ["Cell", "cell_id", "find_cell", "import_modules", "plan_all", "plan_cells", "requirements_for"]

#: The module a cell must import for each (axis, distribution): no fallback, so a
#: cell pinned to lightning 2.1.0 can never quietly run another pytorch_lightning.
MODULES = {"torch": "torch", "lightning": "lightning.pytorch", "pytorch-lightning": "pytorch_lightning", "transformers": "transformers"}

ID_PREFIX = {"python": "py", "torch": "torch", "lightning": "pl", "transformers": "tf"}


@dataclass(frozen=True)
class Cell:
    """One pinned environment: its id, its pins and the profiles that include it."""

    id: str
    pins: Mapping[str, str]
    profiles: tuple[str, ...] = field(default=(), compare=False)
    device: str = "cpu"

    @property
    def python(self) -> str:
        return self.pins["python"]

    @property
    def axes(self) -> tuple[str, ...]:
        """The package axes installed in this cell (what its variants may use)."""
        return tuple(a for a in AXES if a in self.pins and a != "python")

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "pins": dict(self.pins), "profiles": list(self.profiles), "device": self.device}


def cell_id(pins: Mapping[str, str], device: str = "cpu") -> str:
    """Readable, stable id: ``py311-torch2.5.1-pl2.0.3-tf4.30.2`` (+ ``-cuda``)."""
    parts = []
    for axis in AXES:
        if axis in pins:
            version = pins[axis].replace(".", "") if axis == "python" else pins[axis]
            parts.append(f"{ID_PREFIX[axis]}{version}")
    return "-".join(parts) + ("-cuda" if device == "cuda" else "")


def _sort_key(cell: Cell) -> tuple:
    return (cell.device, *(Version(cell.pins.get(a, "0")) for a in AXES))


def plan_cells(matrix: Matrix, profile: str, projections: Iterable[tuple[str, ...]]) -> list[Cell]:
    """The cells of one profile."""
    if profile not in PROFILES:
        msg = f"unknown profile {profile!r}; use one of {', '.join(PROFILES)}"
        raise BugmatrixError(msg)
    chosen = matrix.profiles[profile]
    pin_sets: list[dict[str, str]] = []
    for axes in projections:
        values = [chosen.get(axis, (matrix.base[axis],)) for axis in axes]
        for combo in itertools.product(*values):
            pins = {"python": matrix.base["python"], "torch": matrix.base["torch"], **dict(zip(axes, combo, strict=True))}
            pin_sets.append(pins)
    # A python sweep: the base stack on every other listed interpreter.
    for python in chosen.get("python", ()):
        if python != matrix.base["python"]:
            pin_sets.append({axis: matrix.base[axis] for axis in AXES} | {"python": python})
    pin_sets += [{"python": matrix.base["python"], **pins} for pins, profiles in matrix.include if profile in profiles]
    kept = [p for p in pin_sets if not any(r.matches(p) for r in matrix.exclude if profile in r.profiles)]
    unique = {cell_id(p): p for p in kept}
    covered = {
        cid for cid, pins in unique.items()
        if any(other != pins and pins.items() <= other.items() for other in unique.values())
    }  # fmt: skip
    cells = [Cell(cid, pins, (profile,)) for cid, pins in unique.items() if cid not in covered]
    for pins in _gpu_pins(matrix, cells):
        cells.append(Cell(cell_id(pins, "cuda"), pins, (profile,), "cuda"))
    return sorted(cells, key=_sort_key)


def _gpu_pins(matrix: Matrix, cells: list[Cell]) -> list[Mapping[str, str]]:
    """CPU cells selected by ``[gpu]`` (every listed axis matches) also run on a GPU runner."""
    if not matrix.gpu_select:
        return []
    return [
        c.pins for c in cells
        if all(c.pins.get(axis, values[0]) in values for axis, values in matrix.gpu_select.items())
    ]  # fmt: skip


def plan_all(matrix: Matrix, projections: Iterable[tuple[str, ...]]) -> list[Cell]:
    """Every cell of every profile, each tagged with the profiles that include it."""
    projections = list(projections)
    tags: dict[str, list[str]] = {}
    cells: dict[str, Cell] = {}
    for profile in PROFILES:
        for cell in plan_cells(matrix, profile, projections):
            cells.setdefault(cell.id, cell)
            tags.setdefault(cell.id, []).append(profile)
    return sorted((Cell(c.id, c.pins, tuple(tags[c.id]), c.device) for c in cells.values()), key=_sort_key)


def find_cell(cells: Iterable[Cell], name: str) -> Cell:
    """A cell by id, with a helpful error naming close matches."""
    cells = list(cells)
    for cell in cells:
        if cell.id == name:
            return cell
    close = [c.id for c in cells if name in c.id or c.id in name][:3]
    hint = f"did you mean {', '.join(close)}?" if close else "list them with: nox -s plan -- --profile full"
    msg = f"unknown cell {name!r}; {hint}"
    raise BugmatrixError(msg)


def _distributions(matrix: Matrix, pins: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    distribution: dict[str, str] = {"torch": "torch", "lightning": "lightning", "transformers": "transformers"}
    extra: list[str] = []
    for constraint in matrix.constraints:
        if constraint.matches(pins):
            distribution.update(constraint.distribution)
            extra.extend(constraint.requires)
    return distribution, extra


def import_modules(matrix: Matrix, pins: Mapping[str, str]) -> list[str]:
    """The modules that must import in this cell (the pinned distributions' own)."""
    distribution, _ = _distributions(matrix, pins)
    return [MODULES[distribution[a]] for a in AXES if a in pins and a != "python"]


def requirements_for(matrix: Matrix, pins: Mapping[str, str]) -> list[str]:
    """pip requirement strings that build this cell: pins, range constraints, harness."""
    distribution, extra = _distributions(matrix, pins)
    pinned = [f"{distribution[a]}=={pins[a]}" for a in AXES if a in pins and a != "python"]
    return pinned + list(dict.fromkeys(extra)) + list(matrix.harness)
