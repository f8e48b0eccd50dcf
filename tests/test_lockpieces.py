"""Locks stored as pieces: the committed tree assembles to complete hashed locks, a missing or edited piece is one line.

No registry: the texts are uv's format written by hand, and the committed ``locks/`` themselves.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bugmatrix.errors import BugmatrixError
from bugmatrix.run.lock import (
    PIECES,
    added_size,
    assemble_lock,
    assembled_lock,
    is_stored_as_pieces,
    lock_status,
    read_header,
    stored_lock_files,
    unused_pieces,
    write_stored_lock,
)

ROOT = Path(__file__).resolve().parent.parent
HEADER = "# bugmatrix lock: test\n# requirements-sha256: {digest}\n# python: 3.11\n# requirement: alpha\n"
LOCK = (
    "alpha==1.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:ab\n    # via -r -\n"
    "beta==2.0 \\\n    --hash=sha256:bb\n    # via\n    #   alpha\n    #   gamma\n"
    "gamma @ https://example.org/gamma.whl\n"
    "delta==4.0 ; python_version < '3.12' \\\n    --hash=sha256:dd\n"
)


def entry(name: str, version: str, hashes: list[str], via: list[str]) -> str:
    lines = [f"{name}=={version}" + (" \\" if hashes else "")]
    lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    lines += [f"    # via {via[0]}"] if len(via) == 1 else (["    # via", *(f"    #   {v}" for v in via)] if via else [])
    return "\n".join(lines)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["alpha", "beta", "zope.interface", "nvidia-cublas-cu12"]),
            st.sampled_from(["1.0", "2.0.post1", "12.1.3.1"]),
            st.lists(st.text("0123456789abcdef", min_size=4, max_size=8), max_size=4),
            st.lists(st.sampled_from(["torch", "alpha", "-r -"]), max_size=3),
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_split_then_assemble_gives_uvs_text_back_byte_for_byte(entries: list[tuple[str, str, list[str], list[str]]], final: bool) -> None:
    text = HEADER.format(digest="x") + "\n".join(entry(*e) for e in entries) + ("\n" if final else "")
    with tempfile.TemporaryDirectory() as tmp:
        lock = Path(tmp) / "locks" / "cell.txt"
        write_stored_lock(text, lock)
        assert assemble_lock(lock) == text
        assert stored_lock_files(text, lock)[lock] == lock.read_text()


def test_the_stored_form_keeps_pins_and_via_lines_and_writes_each_block_once(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    write_stored_lock(HEADER.format(digest="1") + LOCK, locks / "c1.txt")
    write_stored_lock(HEADER.format(digest="2") + LOCK.replace("beta==2.0", "beta==2.1"), locks / "c2.txt")
    stored = (locks / "c1.txt").read_text()
    assert "--hash=" not in stored and "alpha==1.0 #piece " in stored and "    #   gamma\n" in stored
    assert "gamma @ https://example.org/gamma.whl\n" in stored, "a line without hashes stays as it is"
    names = sorted(p.name.rsplit("-", 1)[0] for p in (locks / PIECES).iterdir())
    assert names == ["alpha-1.0", "beta-2.0", "beta-2.1", "delta-4.0"], "shared blocks once, one per distinct block"
    assert assemble_lock(locks / "c1.txt") == HEADER.format(digest="1") + LOCK
    assert read_header(locks / "c1.txt")["requirements-sha256"] == "1", "the header is read from the stored form"
    # c2 re-created without beta 2.1: its piece goes, the ones c1 still uses stay.
    write_stored_lock(HEADER.format(digest="2") + LOCK, locks / "c2.txt")
    assert sorted(p.name.rsplit("-", 1)[0] for p in (locks / PIECES).iterdir()) == ["alpha-1.0", "beta-2.0", "delta-4.0"]
    assert unused_pieces(locks) == []


def test_a_missing_or_edited_piece_is_one_line_naming_the_lock_the_piece_and_the_fix(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    requirements = ["alpha"]
    from bugmatrix.run.lock import requirements_digest

    write_stored_lock(HEADER.format(digest=requirements_digest(requirements)) + LOCK, locks / "c1.txt")
    assert lock_status(locks / "c1.txt", requirements) is None
    piece = next((locks / PIECES).glob("beta-*.txt"))
    piece.write_text(piece.read_text().replace("sha256:bb", "sha256:b0"))
    reason = lock_status(locks / "c1.txt", requirements)
    assert reason is not None and "\n" not in reason
    assert f"c1.txt: its piece locks/pieces/{piece.name} does not match its name" in reason and "nox -s lock" in reason
    piece.unlink()
    reason = lock_status(locks / "c1.txt", requirements)
    assert reason is not None and f"locks/pieces/{piece.name} is missing" in reason and "git checkout -- locks/pieces" in reason
    with pytest.raises(BugmatrixError, match="is missing"):
        assemble_lock(locks / "c1.txt")


def test_a_whole_lock_is_its_own_assembly(tmp_path: Path) -> None:
    """The lane's fresh locks and a benchmark's are uv's output as it is: handed out unchanged, nothing written."""
    lock = tmp_path / "c1.txt"
    lock.write_text(HEADER.format(digest="1") + LOCK)
    assert not is_stored_as_pieces(lock.read_text())
    assert assembled_lock(tmp_path, lock) == lock and not (tmp_path / "build").exists()


def test_every_committed_lock_assembles_into_a_complete_hashed_lock_and_every_piece_is_used() -> None:
    locks = ROOT / "locks"
    stored = sorted(locks.glob("*.txt"))
    assert stored and all(is_stored_as_pieces(p.read_text()) for p in stored), "the committed locks are kept as pieces"
    for lock in stored:
        complete = assemble_lock(lock)
        assert "#piece" not in complete
        entries = [line for line in complete.splitlines() if line and not line.startswith((" ", "#"))]
        assert all(line.endswith(" \\") for line in entries), f"{lock.name}: every distribution has hashes (--require-hashes)"
        assert stored_lock_files(complete, lock)[lock] == lock.read_text(), f"{lock.name}: stored exactly as nox -s lock stores it"
    assert unused_pieces(locks) == [], "no piece is left that no lock uses"


def test_a_new_cell_that_shares_the_stack_costs_its_short_list_only() -> None:
    """The price of new locks before they are committed: a committed lock offered again as a new cell adds no piece."""
    locks = ROOT / "locks"
    lock = next(iter(sorted(locks.glob("*.txt"))))
    complete = assemble_lock(lock)
    lines, size = added_size(locks, {"py311-new-cell": complete, "py311-another": complete})
    stored = lock.read_text()
    assert (lines, size) == (2 * stored.count("\n"), 2 * len(stored.encode())), "only the two cells' own files"
    assert lines < complete.count("\n") / 4, "a fraction of the whole lock"
    fresh = complete.replace(" \\\n    --hash=sha256:", " \\\n    --hash=sha256:0", 1)  # another file set: one new piece
    assert added_size(locks, {"py311-new-cell": fresh})[0] > stored.count("\n")


def test_nox_s_lock_stores_a_current_whole_lock_as_pieces_without_resolving_and_check_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock another branch committed as uv wrote it: --check fails naming it, nox -s lock stores the same text as pieces."""
    import tomllib

    import bugmatrix.run.lock
    from bugmatrix.plan.cells import Cell
    from bugmatrix.plan.matrix import parse_matrix
    from bugmatrix.run.lock import lock_path, requirements_digest, run_lock

    matrix = parse_matrix(tomllib.loads((ROOT / "matrix.toml").read_text(encoding="utf-8")), ROOT / "matrix.toml")
    pins = {"python": "3.11", "torch": "2.5.1"}
    cell = Cell(matrix.cell_id(pins), pins, interpreter=matrix.interpreter)
    text = HEADER.format(digest=requirements_digest(matrix.requirements_for(pins))).replace("# requirement: alpha\n", "") + LOCK
    lock = lock_path(tmp_path, cell.id)
    lock.parent.mkdir()
    lock.write_text(text)
    monkeypatch.setattr(bugmatrix.run.lock, "create_lock", lambda *a, **k: pytest.fail("a current lock is never resolved again"))
    assert run_lock(matrix, [cell], tmp_path, check=True, era=False) == 1
    assert f"locks/{cell.id}.txt: current, but stored whole; store it as pieces" in capsys.readouterr().out
    assert run_lock(matrix, [cell], tmp_path, check=False, era=False) == 0
    assert is_stored_as_pieces(lock.read_text()) and assemble_lock(lock) == text
    assert run_lock(matrix, [cell], tmp_path, check=True, era=False) == 0
