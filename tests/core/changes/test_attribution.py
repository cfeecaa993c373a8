"""Attribution is by time, not by process (inotify does not say who wrote): a path changed
while two jobs ran is in both records, the overlap is named, and the undo of either refuses
it as a conflict, whatever became of the other job (run with ``changes: false``, or its record
gone with retention)."""

from __future__ import annotations

import pytest
from conftest import run

from conch.core.engine import Engine
from conch.core.requests import ExecRequest, ReadRequest, WriteRequest
from conch.errors import ConchError

pytestmark = pytest.mark.anyio


async def hold(e: Engine, command: str) -> str:
    """A job that runs ``command``, then waits for its stdin to close (``release``)."""
    assert e.tracker is not None
    e.tracker.settle_now()
    r = await e.exec(
        ExecRequest(command=f"{command}; echo ready; cat > /dev/null", stdin_open=True, yield_ms=0)
    )
    await e.read(ReadRequest(job_id=r["job_id"], wait_ms=30_000, until={"pattern": "ready"}))
    return r["job_id"]


async def release(e: Engine, job_id: str) -> None:
    await e.write(WriteRequest(job_id=job_id, eof=True, yield_ms=0))
    r = await e.read(ReadRequest(job_id=job_id, wait_ms=30_000, until="exit"))
    assert r["state"] == "exited", r


async def test_a_write_by_an_overlapping_untracked_job_is_never_undone_silently(engine, ws):
    (ws / "f").write_text("person\n")
    long = await hold(engine, "echo mine > g")
    other = await run(engine, "echo other > f", changes=False)
    await release(engine, long)
    c = await engine.changes(long)
    assert other["job_id"] in c["overlapping_jobs"]
    assert {f["path"] for f in c["files"]} == {"f", "g"}  # by time: f is in its record
    note = [n["reason"] for n in c["not_covered"] if "by time" in n["reason"]]
    assert len(note) == 1 and other["job_id"] in note[0] and note[0].endswith(": f")
    with pytest.raises(ConchError) as ei:
        await engine.changes(long, undo=True)
    assert ei.value.code == "conflict" and other["job_id"] in ei.value.message
    assert "may have written them): f" in ei.value.message
    assert (ws / "f").read_text() == "other\n" and (ws / "g").exists()  # nothing written
    with pytest.raises(ConchError) as ei:
        await engine.changes(other["job_id"])
    assert ei.value.code == "not_found"  # changes: false keeps no record of its own
    # named in force, it is taken back (and the undo can be undone)
    await engine.changes(long, undo=True, force=["f"])
    assert (ws / "f").read_text() == "person\n" and not (ws / "g").exists()


async def test_an_overlap_is_a_conflict_after_the_other_jobs_record_is_gone(engine, ws):
    long = await hold(engine, "echo mine > g")
    other = await run(engine, "echo other > f")
    await release(engine, long)
    assert engine.tracker is not None
    for job_id in (long, other["job_id"]):  # either way round
        with pytest.raises(ConchError) as ei:
            await engine.changes(job_id, undo=True)
        assert ei.value.code == "conflict" and ": f" in ei.value.message
    engine.tracker.forget(other["job_id"])  # its job left retention
    with pytest.raises(ConchError) as ei:
        await engine.changes(long, undo=True)
    assert ei.value.code == "conflict" and other["job_id"] in ei.value.message
    assert (ws / "f").read_text() == "other\n" and (ws / "g").exists()


async def test_a_path_changed_while_a_job_ran_alone_is_not_shared(engine, ws):
    long = await hold(engine, "echo mine > g")
    await run(engine, "echo other > f")
    await release(engine, long)
    assert engine.tracker is not None
    await engine.changes(long)  # (its record is made)
    record = engine.tracker.record(long)
    assert record is not None and set(record["shared"]) == {"f"}
    u = await engine.changes(long, undo=True, force=["f"])
    assert not (ws / "g").exists() and not (ws / "f").exists()
    assert u["undo_of"] == long
