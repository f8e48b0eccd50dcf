"""An environment a case needs beyond its cell's axes: distributions present, pinned or absent, variables, interpreter flags.

Many failures live in the environment rather than a call (``pkg_resources`` gone with setuptools 81, ``-W error``). A
case declares it as data and each variant names the one it runs in; the planner builds it as a sibling of the cell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["Env"]

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = {"<=": "le", ">=": "ge", "==": "eq", "!=": "ne", "~=": "compat", "===": "is", "<": "lt", ">": "gt"}


def _words(text: str) -> str:
    """A piece of a cell id: lower case, anything but letters, digits and dots as ``-``."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


@dataclass(frozen=True, init=False)
class Env:
    """Beyond the cell's pins: ``requires`` installed with them, ``absent`` removed after, ``variables``, interpreter ``flags``."""

    requires: tuple[str, ...]
    absent: tuple[str, ...]
    variables: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]

    def __init__(
        self,
        *,
        requires: Iterable[str] = (),
        absent: Iterable[str] = (),
        variables: Mapping[str, str] | None = None,
        flags: Iterable[str] = (),
    ) -> None:
        object.__setattr__(self, "requires", tuple(requires))
        object.__setattr__(self, "absent", tuple(absent))
        object.__setattr__(self, "variables", tuple(sorted(dict(variables or {}).items())))
        object.__setattr__(self, "flags", tuple(flags))

    def __bool__(self) -> bool:
        return bool(self.requires or self.absent or self.variables or self.flags)

    def problem(self) -> str | None:
        """The first thing wrong with the declaration, as ``what; the fix`` (None: it can be built)."""
        for text in self.requires:
            try:
                Requirement(str(text))
            except InvalidRequirement:
                return f'requires {text!r} is not a requirement; write it as pip would take it, e.g. "setuptools<81"'
        for name in self.absent:
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                return f'absent {name!r} is not a distribution name; write e.g. absent=["setuptools"] (no version: it is not installed)'
        both = {canonicalize_name(n) for n in self.absent} & {canonicalize_name(Requirement(r).name) for r in self.requires}
        if both:
            return f"{sorted(both)[0]} is both required and absent; keep one of them"
        for name, value in self.variables:
            if not (isinstance(name, str) and _VARIABLE.fullmatch(name) and isinstance(value, str)):
                return f"variables {name!r}={value!r} is not a variable; write e.g. variables={{'PYTHONWARNINGS': 'error'}}"
        if self.flags and not (all(isinstance(f, str) and f for f in self.flags) and self.flags[0].startswith("-")):
            return f'flags {self.flags!r} are not interpreter options; write e.g. flags=("-W", "error")'
        if {"-m", "-c"} & set(self.flags):
            return f"flags {self.flags!r} name -m or -c; the harness starts pytest itself, give only options"
        return None

    @property
    def distributions(self) -> frozenset[str]:
        """The distributions it decides (required, pinned or absent), by canonical name."""
        return frozenset({canonicalize_name(Requirement(r).name) for r in self.requires} | {canonicalize_name(n) for n in self.absent})

    def but(self, requires: Iterable[str]) -> Env:
        """The same environment with other ``requires`` (the planner moves an axis's own requirement into where it runs)."""
        return Env(requires=requires, absent=self.absent, variables=dict(self.variables), flags=self.flags)

    def describe(self) -> str:
        """``setuptools<81; setuptools absent; PYTHONWARNINGS=error; python -W error``: how the plan and the docs say it."""
        parts = [*self.requires, *(f"{n} absent" for n in self.absent), *(f"{k}={v}" for k, v in self.variables)]
        parts += [f"python {' '.join(self.flags)}"] if self.flags else []
        return "; ".join(parts) or "the cell's own environment"

    def id_part(self) -> str:
        """``with-setuptools-lt-81-without-numpy``: what a sibling cell's id adds to its cell's, from what the environment holds."""
        parts = []
        if self.requires:
            pieces = []
            for text in self.requires:
                requirement = Requirement(text)
                specs = sorted(requirement.specifier, key=str)
                pieces.append("-".join([canonicalize_name(requirement.name), *(f"{_OPERATORS[s.operator]}-{s.version}" for s in specs)]))
            parts.append(f"with-{'-and-'.join(pieces)}")
        if self.absent:
            parts.append(f"without-{'-and-'.join(canonicalize_name(n) for n in self.absent)}")
        parts += [f"env-{_words(k)}-{_words(v)}" for k, v in self.variables]
        parts += [f"flags-{_words(' '.join(self.flags))}"] if self.flags else []
        return "-".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Only what is set: ``{}`` for the cell's own environment."""
        data = {"requires": list(self.requires), "absent": list(self.absent), "variables": dict(self.variables), "flags": list(self.flags)}
        return {k: v for k, v in data.items() if v}
