"""The bash started ahead of need (core/process/warm.py): a plain `command` job runs in it and
behaves like a fresh `bash -c` spawn; anything it could get wrong spawns as before."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
from warmth import ready_pid

import conch
from conch.core.process import libc_spawn, procfs

pytestmark = pytest.mark.anyio


async def warm_pid(rt: conch.Runtime) -> int:
    return await ready_pid(rt, "bash")


@pytest.fixture
async def rt(tmp_path) -> AsyncIterator[conch.Runtime]:
    cfg = conch.Config(
        result_detail="full", data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path)
    )
    async with conch.Runtime(cfg) as runtime:
        yield runtime


async def test_a_plain_command_runs_in_the_warm_bash_like_a_fresh_spawn(rt, tmp_path):
    pid = await warm_pid(rt)
    r = await rt.call_tool(
        "exec", {"command": "echo $0 $$; pwd; cat; ls /proc/$$/fd; echo err >&2; exit 3"}
    )
    assert r["exit_code"] == 3
    lines = r["output"].splitlines()
    assert lines[0] == f"{rt.bash} {pid}"  # the warm process became the job
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
    full = await rt.exec(command="true", warm=True)
    assert full["duration_ms"] < 250


async def test_closing_the_runtime_ends_the_warm_bash(tmp_path):
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"))
    ) as rt:
        pid = await warm_pid(rt)
        assert rt._warm is not None and rt._warm._ready is not None
        log_path = rt._warm._ready.job.log.path
        assert os.path.exists(log_path)
    assert not procfs.is_alive(pid)
    assert not os.path.exists(log_path)  # it never became a job: its log goes with it


async def test_warm_bash_off_spawns_every_job(tmp_path):
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), warm_bash=False)
    async with conch.Runtime(cfg) as rt:
        await rt.call_tool("exec", {"command": "true"})
        await asyncio.sleep(0.05)
        assert rt._warm is None
        r = await rt.call_tool("exec", {"command": "echo hi"})
        assert r["output"] == "hi\n"


async def test_a_command_the_busy_warm_bash_cannot_take_runs_as_a_warm_one(tmp_path, monkeypatch):
    """At the cgroup level, where a sh would enter each job's cgroup and exec bash, a plain
    command the warm bash cannot take (it is running another) gets a bash started for it the
    warm bash's way: that bash enters the cgroup itself and reads the command from stdin."""
    libc_spawn.available()
    monkeypatch.setattr(libc_spawn, "_into_cgroup", False)  # the sh's path, whatever the glibc
    spawned: list[list[str]] = []
    real = libc_spawn.spawn

    def recording(path, argv, **kw):
        spawned.append(list(argv))
        return real(path, argv, **kw)

    monkeypatch.setattr(libc_spawn, "spawn", recording)
    cfg = conch.Config(
        result_detail="full", data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path)
    )
    async with conch.Runtime(cfg) as rt:
        assert rt.spawn.containment is not None and rt.spawn.containment.level == "cgroup"
        await warm_pid(rt)
        spawned.clear()
        cmd = "echo $0 $#; ls /proc/$$/fd; grep '^0::' /proc/self/cgroup; cat; exit 5"
        rs = await asyncio.gather(*(rt.call_tool("exec", {"command": cmd}) for _ in range(4)))
    for r in rs:
        assert r["state"] == "exited" and r["exit_code"] == 5, r
        lines = r["output"].splitlines()
        assert lines[0] == f"{rt.bash} 0"  # $0 and no positional parameters, as `bash -c`
        assert lines[1:4] == ["0", "1", "2"]  # stdin /dev/null (cat read EOF), no other fd
        assert lines[4].endswith("/" + r["job_id"])  # in the job's own cgroup
    # every bash was started directly, entering its cgroup itself: no sh in front
    assert spawned and all(a[0] == rt.bash and a[-1] == "--" for a in spawned), spawned
    assert not any(cmd in " ".join(a) for a in spawned)  # the command came through stdin
