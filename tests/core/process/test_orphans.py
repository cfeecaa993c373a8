"""docs/spec.md §2: the orphans of a SIGKILLed server are killed at the next start, and nothing else
is (core/process/hygiene.py: instance tags, the sweep, the reaper)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
import system_tools

import conch
from conch.core.process import procfs

SERVER = r"""
import asyncio, sys, conch
async def main():
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=sys.argv[1]))
    await rt.start()
    r = await rt.exec(command="trap '' TERM; setsid sleep 60 & echo $!; sleep 60", yield_ms=500)
    print(r["output"].split()[0], r["pid"], flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.anyio
async def test_orphans_of_a_sigkilled_server_are_killed_at_next_start(tmp_path):
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(tmp_path / "a")], stdout=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline()
        daemon, leader = map(int, line.split())
        assert alive(daemon) and alive(leader)
        server.send_signal(signal.SIGKILL)
        server.wait()
        # the server died without cleaning up (under xdist another worker's server may start
        # and sweep them at any moment: the sweep is machine-wide)
        assert alive(daemon) or os.environ.get("PYTEST_XDIST_WORKER")
        async with conch.Runtime(
            conch.Config(result_detail="full", data_dir=str(tmp_path / "b"))
        ) as rt:
            if not {daemon, leader} <= set(rt.engine.orphans_killed):
                # the sweep is machine-wide: under xdist another worker's server may have
                # started first and killed them (they must be gone all the same, below)
                assert os.environ.get("PYTEST_XDIST_WORKER"), rt.engine.orphans_killed
            deadline = time.monotonic() + 3
            while (alive(daemon) or alive(leader)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not alive(daemon) and not alive(leader)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


NS_SERVER = r"""
import asyncio, sys, conch
async def main():
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=sys.argv[1]))
    await rt.start()
    r = await rt.exec(argv=["sleep", "86.125"], yield_ms=0)
    print(rt.engine.spawn.containment.level, r["state"], flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""


def _host_pids_of(argv: list[str]) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == argv]


@pytest.mark.anyio
async def test_jobs_of_a_server_in_another_pid_namespace_are_left_alone(tmp_path):
    """Issue 18.4: a server in another PID namespace (a container, a Conch sandbox) tags its
    jobs with pids of its own namespace; starting Conch here must neither kill those jobs
    nor remove that server's cgroups (it once looked the owner up in its own /proc)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        system_tools.unavailable("a PID namespace of its own", "needs root and unshare")
    inner = subprocess.Popen(
        [
            unshare,
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            sys.executable,
            "-c",
            NS_SERVER,
            str(tmp_path / "inner"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        level, state = inner.stdout.readline().split()
        assert state == "running"
        for _ in range(100):  # (at the cgroup level a sh enters the cgroup, then execs it)
            jobs = _host_pids_of(["sleep", "86.125"])
            if jobs:
                break
            time.sleep(0.05)
        (job,) = jobs
        async with conch.Runtime(
            conch.Config(result_detail="full", data_dir=str(tmp_path / "host"))
        ) as rt:
            assert job not in rt.engine.orphans_killed
            await asyncio.sleep(0.3)
            assert alive(job), f"the inner server's job (level {level}) was killed"
    finally:
        os.killpg(inner.pid, signal.SIGKILL)
        inner.wait()
        for pid in _host_pids_of(["sleep", "86.125"]):
            with contextlib.suppress(ProcessLookupError):  # (it may die with the namespace)
                os.kill(pid, signal.SIGKILL)
        # the namespace's first process was unshare's child: ours to reap (a subreaper)
        deadline = time.monotonic() + 3
        while psutil.Process().children() and time.monotonic() < deadline:
            for child in psutil.Process().children():
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child.pid, os.WNOHANG)
            time.sleep(0.02)


def test_an_instance_id_names_its_pid_namespace_and_foreign_ones_are_never_judged():
    from conch.core.process.hygiene import instance_id

    inst = instance_id()
    pid, start, ns, _ = inst.split(".")
    assert int(pid) == os.getpid() and ns == os.readlink("/proc/self/ns/pid")[5:-1]
    assert procfs.owner_in_this_namespace(inst) == (os.getpid(), start)
    for foreign in (f"{pid}.{start}.1.ab", f"{pid}.{start}.ab", "x.1.2.3", f"1.2.{ns}"):
        assert procfs.owner_in_this_namespace(foreign) is None, foreign


@pytest.mark.anyio
async def test_jobs_of_a_live_server_are_not_touched(tmp_path):
    async with conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "a"))) as a:
        r = await a.exec(command="sleep 30", yield_ms=0)
        async with conch.Runtime(
            conch.Config(result_detail="full", data_dir=str(tmp_path / "b"))
        ) as b:
            assert r["pid"] not in b.engine.orphans_killed
        assert (await a.read(r["job_id"]))["state"] == "running"
        await a.signal(r["job_id"], "kill")


def test_reap_all_leaves_a_fresh_zombie_to_its_own_waiter():
    # asyncio waits for rg and `bash -n` itself; a sweep that took their exit status first would
    # make asyncio report 255 (a search that succeeded would read as failed).
    from conch.core.process.hygiene import Reaper

    reaper = Reaper(reap_all=True, grace_s=0.5)
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    deadline = time.monotonic() + 5
    while procfs.stat_fields(pid)[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert reaper.sweep() == 0
    assert os.waitpid(pid, os.WNOHANG)[0] == pid  # still ours to reap


def test_reap_all_reaps_a_zombie_nobody_waits_for_after_the_grace():
    from conch.core.process.hygiene import Reaper

    reaper = Reaper(reap_all=True, grace_s=0.2)
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    deadline = time.monotonic() + 5
    while procfs.stat_fields(pid)[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    reaper.sweep()
    time.sleep(0.3)
    assert reaper.sweep() == 1
