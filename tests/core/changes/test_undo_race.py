"""An attacker inside a sandboxed job races the undo: it swaps the directory the undo writes
into for a symlink to a directory outside, and renames it out of the workspace into its own
TMPDIR and back, as fast as it can. No file the undo writes may land outside the workspace,
whatever the outcome of the undo (done, or refused naming the path)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import system_tools
from sandbox_backends import BACKENDS, backend_settings

import conch
from conch.core.changes import confine
from conch.core.engine import Engine
from conch.core.requests import ExecRequest, ReadRequest, SignalRequest
from conch.errors import ConchError

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

FILES = 300
ATTACK = r"""
import os, sys, time
out, kind, tmp = sys.argv[1], sys.argv[3], os.environ.get("TMPDIR", "/tmp")
away = os.path.join(tmp, "d")
print("tmp", tmp, flush=True)
end = time.monotonic() + float(sys.argv[2])
swap = (
    lambda: os.rename("d", "d.real"),
    lambda: os.symlink(out, "d"),
    lambda: os.unlink("d"),
    lambda: os.rename("d.real", "d"),
)
move = (lambda: os.rename("d", away), lambda: os.rename(away, "d"))
n = 0
while time.monotonic() < end:
    for step in swap if kind == "swap" else move:
        try:
            step()
        except OSError:
            pass
    if kind == "move":
        time.sleep(0.0002)
    n += 1
found = []
for root, _dirs, files in os.walk(tmp):
    found += [os.path.join(root, f) for f in files if f.startswith("f")]
print("rounds", n, "found", found, flush=True)
"""


@pytest.fixture
def base():
    d = tempfile.mkdtemp(prefix="conch-undo-race-", dir="/var/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("kind", ["swap", "move"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_racing_sandboxed_attacker_never_gets_an_undo_write_outside(base, backend, kind):
    ws, out = base / "ws", base / "out"
    ws.mkdir()
    out.mkdir()
    os.chmod(out, 0o777)
    # one level down: Landlock grants no entry of the workspace's top itself
    (ws / "sub" / "d").mkdir(parents=True)
    for i in range(FILES):
        (ws / "sub" / "d" / f"f{i}").write_text(f"{i}\n")
    (ws / "attack.py").write_text(ATTACK)
    cfg = conch.Config(
        data_dir=str(base / "data"),
        default_cwd=str(ws),
        sandbox="workspace-write",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    async with Engine(cfg) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        victim = await e.exec(ExecRequest(command="rm sub/d/f*", yield_ms=60_000))
        assert victim["changes"] == {"deleted": FILES}
        attacker = await e.exec(
            ExecRequest(
                command=f"cd sub && python3 ../attack.py {out} 4 {kind}", yield_ms=0, changes=False
            )
        )
        await asyncio.sleep(1.0)  # it is racing
        outcomes = []
        undo_id = victim["job_id"]
        for _ in range(200):  # each undo (or redo) writes or removes all the files
            try:
                undo_id = (await e.changes(undo_id, undo=True))["job_id"]
                outcomes.append("done")
            except ConchError as err:
                assert err.code == "conflict", err.message
                outcomes.append("refused")
            if e.jobs.get(attacker["job_id"]).terminal:
                break
        r = await e.read(
            ReadRequest(job_id=attacker["job_id"], cursor=0, wait_ms=30_000, until="exit")
        )
        if r["state"] == "running":
            await e.signal(SignalRequest(job_id=attacker["job_id"], signal="kill"))
        output = r["output"]
        assert "rounds" in output, output
        assert "found []" in output, output  # nothing in the attacker's TMPDIR
        assert os.listdir(out) == []  # nothing through the symlink
        assert outcomes, outcomes


def test_a_held_directory_moved_out_of_the_workspace_is_not_written_by_the_undo(base):
    """The race above, won by the attacker on purpose: the undo holds a directory of the
    workspace by descriptor, the directory is renamed out of it, and the undo's write
    through the held descriptor fails (Landlock sees where the directory is now)."""
    ok, why = confine.available()
    if not ok:
        system_tools.unavailable("Landlock", why)
    ws, outside = base / "ws", base / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    root = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    held = os.open(ws / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(ws / "d", outside / "d")  # the attacker's move, after the undo's walk

        def write() -> None:
            fd = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=held)
            os.close(fd)

        with pytest.raises(PermissionError):
            confine.run(root, [], write)
        assert os.listdir(outside / "d") == []
        # the same write inside the workspace goes through
        os.rename(outside / "d", ws / "d")
        confine.run(root, [], write)
        assert os.listdir(ws / "d") == ["f"]
    finally:
        os.close(held)
        os.close(root)
