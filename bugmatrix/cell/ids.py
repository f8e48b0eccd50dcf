"""A variant's id, built and parsed in one place: ``case::name[tag]``, the key of every result.

The tag is the device, or ``device-dtype`` where one variant declares two dtypes on one device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["VariantId"]

_ID = re.compile(r"^(?P<case>[^:/\[\]]+)::(?P<name>[^\[\]]+)\[(?P<tag>[^\[\]]+)\]$")
_NODE = re.compile(r"(?:^|/)(?P<case>[^/]+)\.py::(?P<name>[^\[/]+)\[(?P<tag>[^\]]+)\]$")


@dataclass(frozen=True, order=True)
class VariantId:
    """The three parts of a variant id; ``str()`` gives the id itself."""

    case: str
    name: str
    tag: str

    def __str__(self) -> str:
        return f"{self.case}::{self.name}[{self.tag}]"

    @property
    def device(self) -> str:
        """``cpu`` for ``cpu`` and for ``cpu-float16``."""
        return self.tag.partition("-")[0]

    @property
    def short(self) -> str:
        """``name[tag]``: the id without its case, where a heading already names the case."""
        return f"{self.name}[{self.tag}]"

    def node(self, cases_dir: str = "cases") -> str:
        """The pytest node id of this variant under ``cases_dir``."""
        return f"{cases_dir}/{self.case}.py::{self.short}"

    @classmethod
    def parse(cls, text: str) -> VariantId:
        """``autocast_cache::core[cpu]`` -> VariantId; ValueError naming the expected form otherwise."""
        match = _ID.match(text)
        if match is None:
            msg = f"{text!r} is not a variant id; write CASE::VARIANT[DEVICE], e.g. autocast_cache::core[cpu]"
            raise ValueError(msg)
        return cls(match["case"], match["name"], match["tag"])

    @classmethod
    def from_node(cls, nodeid: str) -> VariantId | None:
        """The variant a pytest node id runs (``cases/x.py::core[cpu]``), or None for any other node."""
        match = _NODE.search(nodeid)
        return cls(match["case"], match["name"], match["tag"]) if match else None
