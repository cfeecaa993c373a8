"""Attacks on undo, which writes into the user's files: a directory swapped for a symlink to
/etc (or to one outside) between the record and the undo, a record naming a path with ``..``,
names with newlines and bytes that are not UTF-8, a FIFO where a file was, and files replaced
by symlinks and FIFOs while the undo runs. Undo never writes (nor removes) outside what it
recorded, never opens a FIFO, and every result stays valid JSON."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from conftest import run
from sandbox_backends import BACKENDS, backend_settings

import conch
from conch.core.engine import Engine
from conch.core.requests import ExecRequest, ReadRequest, SignalRequest
from conch.errors import ConchError

pytestmark = pytest.mark.anyio

PROBE = "f-conch-undo-probe"  # a name nothing else uses (looked for in /etc)


@pytest.fixture
def base():
    # beside the sandboxed jobs' own /tmp: a path they cannot reach except through the fence
    d = tempfile.mkdtemp(prefix="conch-undo-attack-", dir="/var/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def sandboxed(base: Path, ws: Path, backend: str) -> conch.Config:
    return conch.Config(
        data_dir=str(base / "data"),
        default_cwd=str(ws),
        sandbox="workspace-write",
        **backend_settings(backend),  # type: ignore[arg-type]
    )


def listing(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("target", ["/etc", "outside"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_directory_swapped_for_a_symlink_before_the_undo_is_never_written_through(
    base, backend, target
):
    ws, outside = base / "ws", base / "outside"
    (ws / "sub" / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "d" / PROBE).write_text("mine\n")
    (outside / f"{PROBE}.added").write_text("outside, to be kept\n")
    os.chmod(outside, 0o777)
    to = "/etc" if target == "/etc" else str(outside)
    etc_before = sorted(os.listdir("/etc"))
    async with Engine(sandboxed(base, ws, backend)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        job = await run(e, f"cd sub && rm d/{PROBE} && echo new > d/{PROBE}.added")
        assert job["changes"] == {"added": 1, "deleted": 1}, job
        swap = await run(e, f"cd sub && mv d d.real && ln -s {to} d")
        assert swap["exit_code"] == 0, swap
        paths = [f"sub/d/{PROBE}", f"sub/d/{PROBE}.added"]
        with pytest.raises(ConchError) as ei:
            await e.changes(job["job_id"], undo=True)
        assert ei.value.code == "conflict" and f"sub/d/{PROBE}.added" in ei.value.message
        with pytest.raises(ConchError) as ei:  # forced: the walk still refuses the symlink
            await e.changes(job["job_id"], undo=True, force=paths)
        assert ei.value.code == "conflict" and "symlink" in ei.value.message
    assert listing(outside) == {f"{PROBE}.added": b"outside, to be kept\n"}
    assert sorted(os.listdir("/etc")) == etc_before and not os.path.lexists(f"/etc/{PROBE}")
    assert os.readlink(ws / "sub" / "d") == to
    assert listing(ws / "sub" / "d.real") == {f"{PROBE}.added": b"new\n"}


@pytest.mark.parametrize("bad", ["../victim", "/victim", "sub/../../victim", "a//b", "."])
async def test_a_record_naming_a_path_outside_the_workspace_is_refused(engine, ws, bad):
    """A record is written by this server; one that names a path with ``..`` (or an
    absolute one) was tampered with: undo refuses it whole."""
    victim = ws.parent / "victim"
    victim.write_text("outside\n")
    r = await run(engine, "echo x > made")
    tracker = engine.tracker
    record = tracker.record(r["job_id"])
    record["files"] = [[bad, None, record["files"][0][2]], *record["files"]]
    tracker.store.save(r["job_id"], record)
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"], undo=True, force=[bad])
    assert ei.value.code == "conflict" and "not in the workspace" in ei.value.message
    assert victim.read_text() == "outside\n" and (ws / "made").exists()  # nothing written


async def test_names_with_newlines_and_bytes_that_are_not_utf8_are_shown_and_undone(engine, ws):
    bad, nl, esc = "bad\udcffname", "new\nline", "\x1b[31mred"
    r = await run(
        engine,
        "printf 1 > \"$(printf 'bad\\377name')\" && printf 2 > \"$(printf 'new\\nline')\" && "
        "printf 3 > \"$(printf '\\033[31mred')\" && ln -s \"$(printf 'to\\377')\" link",
    )
    assert r["changes"] == {"added": 4}
    c = await engine.changes(r["job_id"])
    shown = {f["path"] for f in c["files"]}
    assert shown == {"bad\\xffname", "new\\nline", "\\x1b[31mred", "link"}
    assert "-> to\\xff" in c["diff"]  # a symlink's target too
    json.dumps(c, ensure_ascii=False).encode()  # valid UTF-8 JSON, one line a path
    assert "+++ b/bad\\xffname" in c["diff"]
    (ws / os.fsdecode(b"bad\xffname")).write_text("person\n")
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"], undo=True)
    assert ei.value.code == "conflict" and "bad\\xffname" in ei.value.message
    ei.value.message.encode()
    u = await engine.changes(r["job_id"], undo=True, force=["bad\\xffname"])  # as shown
    assert not any(os.path.lexists(ws / n) for n in (bad, nl, esc, "link"))
    await engine.changes(u["job_id"], undo=True)  # the redo brings back the person's edit
    assert (ws / bad).read_text() == "person\n" and (ws / nl).read_text() == "2"
    assert os.readlink(ws / "link") == os.fsdecode(b"to\xff")


async def test_a_fifo_where_a_file_was_is_replaced_never_opened(engine, ws):
    (ws / "f").write_text("file\n")
    (ws / "g").write_text("one\n")
    r = await run(engine, "rm f && mkfifo f && echo two > g")
    # a person (or a job) puts a FIFO where the job left a file: a conflict; forced, the
    # undo puts the file back over it without opening it (a reader would wait forever)
    (ws / "g").unlink()
    os.mkfifo(ws / "g")
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"], undo=True)
    assert ei.value.code == "conflict" and ": g" in ei.value.message
    await asyncio.wait_for(engine.changes(r["job_id"], undo=True, force=["g"]), 30)
    assert all(stat.S_ISREG(os.lstat(ws / n).st_mode) for n in "fg")  # (read without waiting)
    assert (ws / "f").read_text() == "file\n" and (ws / "g").read_text() == "one\n"


RACE = r"""
import os, sys, time
n, out, end = int(sys.argv[1]), sys.argv[2], time.monotonic() + float(sys.argv[3])
rounds = 0
while time.monotonic() < end:
    for i in range(0, n, 7):
        p = f"t/f{i}"
        try:
            if rounds % 2:
                os.rename(p, p + ".x")
                os.symlink(f"{out}/victim{i}", p)
            else:
                os.unlink(p)
                os.mkfifo(p)
        except OSError:
            pass
    rounds += 1
print("rounds", rounds, flush=True)
"""


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("backend", BACKENDS)
async def test_files_replaced_by_symlinks_and_fifos_while_the_undo_runs(base, backend):
    n = 200
    ws, out = base / "ws", base / "out"
    (ws / "t").mkdir(parents=True)
    out.mkdir()
    os.chmod(out, 0o777)
    for i in range(n):
        (ws / "t" / f"f{i}").write_text(f"{i}\n")
        (out / f"victim{i}").write_text("outside\n")
    (ws / "race.py").write_text(RACE)
    async with Engine(sandboxed(base, ws, backend)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        job = await run(e, f"for i in $(seq 0 {n - 1}); do echo changed > t/f$i; done")
        assert job["changes"] == {"modified": n}, job
        paths = [f"t/f{i}" for i in range(n)]
        racer = await e.exec(
            ExecRequest(command=f"python3 race.py {n} {out} 3", yield_ms=0, changes=False)
        )
        await asyncio.sleep(0.5)
        outcomes = []
        undo_id = job["job_id"]
        for _ in range(50):
            try:
                u = await asyncio.wait_for(e.changes(undo_id, undo=True, force=paths), 60)
                undo_id = u["job_id"]
                outcomes.append("done")
            except ConchError as err:
                assert err.code == "conflict", err.message
                outcomes.append("refused")
            if e.jobs.get(racer["job_id"]).terminal:
                break
        r = await e.read(
            ReadRequest(job_id=racer["job_id"], cursor=0, wait_ms=30_000, until="exit")
        )
        if r["state"] == "running":
            await e.signal(SignalRequest(job_id=racer["job_id"], signal="kill"))
        assert "rounds" in r["output"], r
        assert outcomes
    # nothing written through a symlink, nothing made outside
    assert listing(out) == {f"victim{i}": b"outside\n" for i in range(n)}
    for p in (ws / "t").iterdir():  # what the undo wrote is a plain file (or the racer's)
        st = os.lstat(p)
        assert stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) or stat.S_ISFIFO(st.st_mode)
