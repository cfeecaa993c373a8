"""Undo puts back what a path held exactly: its modification time as well (build tools decide
by it), and names that were one file come back as one file, linked only to what the undo
itself wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run

from conch.core.changes import safefs
from conch.core.changes.entry import Entry, from_stat

pytestmark = pytest.mark.anyio

OLD = 1_000_000_000_123_456_789  # 2001-09-09, to the nanosecond
OLDER = 900_000_000_987_654_321


def mtime(p: Path) -> int:
    return os.lstat(p).st_mtime_ns


async def test_undo_puts_back_modification_times(engine, ws):
    (ws / "src.c").write_text("int main;\n")
    (ws / "gone.h").write_text("#define X\n")
    (ws / "d").mkdir()
    (ws / "d" / "in").write_text("in\n")
    (ws / "ln").symlink_to("src.c")
    os.utime(ws / "src.c", ns=(OLD, OLD))
    os.utime(ws / "gone.h", ns=(OLD, OLDER))
    os.utime(ws / "d" / "in", ns=(OLD, OLD))
    os.utime(ws / "d", ns=(OLD, OLDER))
    os.utime(ws / "ln", ns=(OLD, OLDER), follow_symlinks=False)
    r = await run(engine, "echo more >> src.c && rm gone.h && rm -r d && ln -sfn gone.h ln")
    after = {n: mtime(ws / n) for n in ("src.c",)}
    assert after["src.c"] != OLD
    await engine.changes(r["job_id"], undo=True)
    assert mtime(ws / "src.c") == OLD  # written back: its time too
    assert mtime(ws / "gone.h") == OLDER  # deleted, made again
    assert mtime(ws / "d" / "in") == OLD
    assert mtime(ws / "d") == OLDER  # a directory made again: after its entries
    assert mtime(ws / "ln") == OLDER  # a symlink's own time, not its target's
    assert mtime(ws / "src.c") == OLD  # (setting the link's time did not follow it)


async def test_the_undo_of_an_undo_puts_back_the_jobs_times(engine, ws):
    (ws / "f").write_text("one\n")
    os.utime(ws / "f", ns=(OLD, OLD))
    r = await run(engine, "echo two > f && touch -d @1100000000 f")
    job_time = mtime(ws / "f")
    u = await engine.changes(r["job_id"], undo=True)
    assert mtime(ws / "f") == OLD
    await engine.changes(u["job_id"], undo=True)
    assert (ws / "f").read_text() == "two\n" and mtime(ws / "f") == job_time


async def test_names_of_one_file_deleted_together_come_back_as_one_file(engine, ws):
    (ws / "sub").mkdir()
    (ws / "a").write_text("shared\n")
    os.link(ws / "a", ws / "sub" / "b")
    os.link(ws / "a", ws / "c")
    os.chmod(ws / "a", 0o640)
    os.utime(ws / "a", ns=(OLD, OLD))
    r = await run(engine, "rm a sub/b c")
    assert r["changes"] == {"deleted": 3}
    await engine.changes(r["job_id"], undo=True)
    st = [os.lstat(ws / n) for n in ("a", "sub/b", "c")]
    assert len({s.st_ino for s in st}) == 1 and st[0].st_nlink == 3
    assert (ws / "sub" / "b").read_text() == "shared\n"
    assert st[0].st_mode & 0o777 == 0o640 and st[0].st_mtime_ns == OLD


async def test_names_of_one_file_written_through_come_back_as_one_file(engine, ws):
    (ws / "a").write_text("one\n")
    os.link(ws / "a", ws / "b")
    r = await run(engine, "echo two >> b")
    await engine.changes(r["job_id"], undo=True)
    a, b = os.lstat(ws / "a"), os.lstat(ws / "b")
    assert a.st_ino == b.st_ino and a.st_nlink == 2 and (ws / "a").read_text() == "one\n"


async def test_a_name_is_never_linked_to_one_the_undo_did_not_write(engine, ws, tmp_path):
    """Its other name survived the job (or lies outside the workspace): the name comes back
    as a file of its own, and the file kept by the other name is left as it is."""
    (ws / "a").write_text("shared\n")
    os.link(ws / "a", ws / "b")
    outside = tmp_path / "outside"
    outside.write_text("out\n")
    os.link(outside, ws / "o")
    r = await run(engine, "rm b o")
    await engine.changes(r["job_id"], undo=True)
    a, b, o = os.lstat(ws / "a"), os.lstat(ws / "b"), os.lstat(ws / "o")
    assert a.st_ino != b.st_ino and a.st_nlink == 1 and (ws / "b").read_text() == "shared\n"
    assert o.st_ino != os.lstat(outside).st_ino and os.lstat(outside).st_nlink == 1
    assert (ws / "o").read_text() == "out\n" and outside.read_text() == "out\n"


def test_a_link_to_a_name_swapped_since_it_was_written_is_refused(tmp_path):
    """Between the undo's write of the first name and its link of the second, the first is
    replaced (by another file, or by a symlink to one outside): nothing is linked."""
    ws = tmp_path / "ws"
    ws.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("outside\n")
    root = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    (ws / "first").write_text("mine\n")
    written = os.open(ws / "first", os.O_RDONLY)  # as the undo holds what it wrote
    try:
        (ws / "first").unlink()
        (ws / "first").symlink_to(victim)
        assert not safefs.link(root, "second", "first", written)
        (ws / "first").unlink()
        (ws / "first").write_text("another\n")
        assert not safefs.link(root, "second", "first", written)
        assert sorted(os.listdir(ws)) == ["first"] and victim.read_text() == "outside\n"
        assert os.lstat(victim).st_nlink == 1
        # the file written is linked
        os.close(written)
        written = os.open(ws / "first", os.O_RDONLY)
        assert safefs.link(root, "second", "first", written)
        assert os.lstat(ws / "second").st_ino == os.fstat(written).st_ino
    finally:
        os.close(written)
        os.close(root)


def test_a_record_keeps_times_and_link_identity_across_a_restart(tmp_path):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    os.utime(tmp_path / "a", ns=(OLD, OLD))
    st = os.lstat(tmp_path / "a")
    back = Entry.from_json(from_stat(st, oid="0" * 64, stored=True).to_json())
    assert back is not None and back.mtime == OLD and back.nlink > 1 and back.ino == st.st_ino
    os.unlink(tmp_path / "b")
    single = Entry.from_json(from_stat(os.lstat(tmp_path / "a")).to_json())
    assert single is not None and single.nlink == 1  # a lone name links to nothing
