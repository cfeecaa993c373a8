"""The bash started ahead of need (core/jobs/warm.py): a plain `command` job runs in it and
behaves like a fresh `bash -c` spawn; anything it could get wrong spawns as before."""

from __future__ import annotations

import asyncio
import os

import pytest
from warmth import ready_pid

import conch
from conch.core.process import libc_spawn, procfs

pytestmark = pytest.mark.anyio


async def warm_pid(rt: conch.Runtime) -> int:
    return await ready_pid(rt, "bash")


async def test_a_plain_command_runs_in_the_warm_bash_like_a_fresh_spawn(rt, tmp_path):
    pid = await warm_pid(rt)
    r = await rt.call_tool(
        "exec", {"command": "echo $0 $$; pwd; cat; ls /proc/$$/fd; echo err >&2; exit 3"}
    )
    assert r["exit_code"] == 3
    lines = r["output"].splitlines()
    assert lines[0] == f"{rt.engine.bash} {pid}"  # the warm process became the job
    assert lines[1] == str(tmp_path)
    assert lines[2:5] == ["0", "1", "2"]  # stdin was /dev/null (cat read EOF), no other fd
    assert lines[5] == "err"
    listed = await rt.call_tool("list", {})
    assert r["job_id"] in {j["job_id"] for j in listed["jobs"]}
    assert len(listed["jobs"]) == 2  # the next warm bash is not a job


async def test_the_warm_bash_never_hides_a_changed_environment_or_cwd(rt, monkeypatch):
    await warm_pid(rt)
    monkeypatch.setenv("CONCH_WARM_PROBE", "changed")
    r = await rt.call_tool("exec", {"command": "echo ${CONCH_WARM_PROBE-unset}"})
    assert r["output"] == "changed\n"
    await warm_pid(rt)
    r = await rt.call_tool("exec", {"command": "pwd", "cwd": "/"})
    assert r["output"] == "/\n" and r["cwd"] == "/"
    r = await rt.call_tool("exec", {"command": "echo $X", "env": {"X": "given"}})
    assert r["output"] == "given\n"


async def test_a_warm_job_keeps_deadlines_names_and_the_job_clock(rt):
    await warm_pid(rt)
    await asyncio.sleep(0.3)  # the warm bash waited: its job's clock starts at the call
    r = await rt.call_tool("exec", {"command": "sleep 5", "timeout_ms": 300, "name": "napper"})
    assert r["state"] == "timed_out" and r["name"] == "napper"
    full = await rt.exec(command="true")
    assert full["duration_ms"] < 250


async def test_closing_the_runtime_ends_the_warm_bash(tmp_path):
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"))
    ) as rt:
        pid = await warm_pid(rt)
        assert rt.engine.starter.warm is not None
        ready = rt.engine.starter.warm.ready_job
        assert ready is not None
        log_path = ready.log.path
        assert os.path.exists(log_path)
    assert not procfs.is_alive(pid)
    assert not os.path.exists(log_path)  # it never became a job: its log goes with it


async def test_warm_bash_off_spawns_every_job(tmp_path):
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), warm_bash=False)
    async with conch.Runtime(cfg) as rt:
        await rt.call_tool("exec", {"command": "true"})
        await asyncio.sleep(0.05)
        assert rt.engine.starter.warm is None
        r = await rt.call_tool("exec", {"command": "echo hi"})
        assert r["output"] == "hi\n"


async def test_the_warm_bash_enters_its_cgroup_itself(tmp_path, monkeypatch):
    """At the cgroup level with the entering sh's path (glibc < 2.39, pinned here whatever the
    glibc), the warm bash's own bootstrap enters the cgroup: no sh is exec'd before it, and
    the job's $0 is still bash."""
    libc_spawn.available()
    monkeypatch.setattr(libc_spawn, "_into_cgroup", False)
    cfg = conch.Config(
        result_detail="full", data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path)
    )
    async with conch.Runtime(cfg) as rt:
        assert (
            rt.engine.spawn.containment is not None
            and rt.engine.spawn.containment.level == "cgroup"
        )
        pid = await warm_pid(rt)
        argv = await _cmdline(pid)
        assert argv, await _why_it_ended(rt, pid)
        assert (
            argv[0].decode() == rt.engine.bash and argv[-1] == b"--"
        )  # bash itself, and its cgroups
        assert any(a.endswith(b"cgroup.procs") for a in argv)
        r = await rt.call_tool("exec", {"command": "echo $0 $#; grep '^0::' /proc/self/cgroup"})
    first, cgroup = r["output"].splitlines()
    assert first == f"{rt.engine.bash} 0"
    assert cgroup.endswith("/" + r["job_id"])


async def _cmdline(pid: int) -> list[bytes]:
    """The process's argv. posix_spawn returns once the child's exec has replaced its memory,
    but before the kernel has set the new argv up: in that window (long on a loaded box)
    /proc/PID/cmdline reads empty, so an empty read is tried again for a while."""
    for _ in range(100):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")[:-1]
        if argv or not procfs.is_alive(pid):
            return argv
        await asyncio.sleep(0.05)
    return []


async def _why_it_ended(rt: conch.Runtime, pid: int) -> str:
    """What a warm bash that ended as soon as it was ready left: its state, status and log
    (the loop that enters the cgroup exits 125 when a write to cgroup.procs fails)."""
    warm = rt.engine.starter.warm
    job = warm.ready_job if warm is not None else None
    await asyncio.sleep(0.5)
    if job is None:
        return f"warm bash {pid} ended and was taken or replaced"
    with open(job.log.path, "rb") as f:
        log = f.read()[-2000:]
    return f"warm bash {pid} ended: state {job.state}, exit {job.exit_code}, log {log!r}"
