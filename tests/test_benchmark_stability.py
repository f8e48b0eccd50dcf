"""Pure parts of the benchmark and stability sessions (no timing is asserted anywhere)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bugmatrix.benchmark import Measurement, disk_kib, format_table
from bugmatrix.stability import stability_table, unstable

ROOT = Path(__file__).resolve().parent.parent


def test_speedup_and_overhead_ratios() -> None:
    speedup = Measurement("build", value=5.0, baseline=80.0, unit="s", target=">= 10")
    assert speedup.ratio == 16.0 and speedup.met
    overhead = Measurement("reuse", value=12.0, baseline=10.0, unit="s", target="<= 1.5")
    assert round(overhead.ratio, 2) == 1.2 and overhead.met
    assert not Measurement("reuse", value=20.0, baseline=10.0, unit="s", target="<= 1.5").met


def test_table_lists_every_row_with_its_verdict() -> None:
    table = format_table([Measurement("a", 1, 20, "s", ">= 10"), Measurement("b", 3, 1, "s", "<= 1.5")])
    lines = table.splitlines()
    assert lines[2].startswith("a") and lines[2].endswith("yes") and lines[3].endswith("NO")


def test_hard_links_are_counted_once(tmp_path: Path) -> None:
    one, two = tmp_path / "env1", tmp_path / "env2"
    one.mkdir()
    two.mkdir()
    (one / "lib.so").write_bytes(os.urandom(512 * 1024))
    os.link(one / "lib.so", two / "lib.so")
    assert disk_kib([one, two]) < 1.2 * disk_kib([one])


def test_unstable_variants_are_found() -> None:
    seen = {"a::x[cpu]": ["fixed"] * 3, "a::y[cpu]": ["reproduced", "timeout", "reproduced"]}
    assert unstable(seen) == {"a::y[cpu]": ["reproduced", "timeout", "reproduced"]}
    table = stability_table(seen)
    assert "reproduced x2, timeout x1" in table and table.splitlines()[2].rstrip().endswith("NO")


def test_stability_unknown_cell_is_exit_2() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bugmatrix.stability", "--root", str(ROOT), "--cell", "nope"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "unknown cell 'nope'" in run.stderr
