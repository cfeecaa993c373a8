"""Run as a script by test_spawn_into_cgroup.py (on this host's glibc, or a newer one): a
runtime at the cgroup level runs a few jobs; prints, as JSON, what each spawn was given and
what each job saw of itself.

    python placed_jobs.py DATA_DIR DEFAULT_CWD [--as-before-glibc-2.39]

``--as-before-glibc-2.39``: as if glibc could not spawn into a cgroup (a sh enters it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import conch
from conch.core.process import libc_spawn
from conch.core.process.spec import SpawnSpec

spawns: list[dict[str, Any]] = []
_spawn = libc_spawn.spawn


_spawning: list[bool] = []  # (inside recording_spawn: its own Prepared is not another spawn)


def recording_spawn(spec: SpawnSpec) -> int:
    spawns.append({"argv": list(spec.argv), "cgroup": spec.cgroup})
    _spawning.append(True)
    try:
        return _spawn(spec)
    finally:
        _spawning.pop()


libc_spawn.spawn = recording_spawn  # what popen.spawn calls: each spawn's argv and cgroup


class RecordingPrepared(libc_spawn.Prepared):
    """What the landlock spawner's restricted thread runs (it prepares the call itself)."""

    def __init__(self, spec: SpawnSpec) -> None:
        if not _spawning:
            spawns.append({"argv": list(spec.argv), "cgroup": spec.cgroup, "landlock": True})
        super().__init__(spec)


libc_spawn.Prepared = RecordingPrepared  # type: ignore[misc]

#: the job, its background child (still running when read) and their signal state
SELF = (
    "sleep 30 & echo child $!; grep '^0::' /proc/self/cgroup; grep '^0::' /proc/$!/cgroup; "
    "grep -E '^(SigIgn|SigBlk)' /proc/self/status; kill $!"
)


async def job(rt: conch.Runtime, **call: Any) -> dict[str, Any]:
    spawns.clear()
    r = await rt.exec(**call)
    return {
        "job_id": r["job_id"],
        "state": r["state"],
        "exit_code": r["exit_code"],
        "output": r["output"],
        "lingering_pids": r.get("lingering_pids", []),
        "spawns": list(spawns),
    }


async def main(data_dir: str, cwd: str) -> dict[str, Any]:
    out: dict[str, Any] = {"glibc": os.confstr("CS_GNU_LIBC_VERSION")}
    config = conch.Config(result_detail="full", data_dir=data_dir, default_cwd=cwd)
    async with conch.Runtime(config) as rt:
        info = await rt.call_tool("info", {})
        out["containment"] = info["containment"]
        out["placement"] = rt.engine.spawn.containment.info()["cgroup"].get("placement")
        # the first calls start the warm processes there are
        await rt.exec(argv=["true"])
        await rt.exec(command="true")
        await asyncio.sleep(0.3)
        out["warm_sh"] = rt.engine.starter.warm_sh is not None
        out["argv"] = await job(rt, argv=["sh", "-c", SELF])
        out["command"] = await job(rt, command=SELF)
        out["cold_command"] = await job(rt, command=SELF, env={"CONCH_TEST_COLD": "1"})
        out["memory_max"] = await job(
            rt,
            argv=["sh", "-c", "grep -E '^(0|[0-9]+:memory):' /proc/self/cgroup"],
            memory_max=256 << 20,
        )
        # on a terminal: a PTY job, and a persistent shell (its cgroup is the shell's)
        out["pty"] = await job(rt, argv=["sh", "-c", SELF], pty=True)
        spawns.clear()
        shell = await rt.shell_open()
        out["shell_open"] = {"shell_id": shell["shell_id"], "spawns": list(spawns)}
        out["shell"] = await job(rt, shell_id=shell["shell_id"], command=SELF)
        await rt.shell_close(shell["shell_id"])
        # in the read-only sandbox (bwrap): its monitor, the PID namespace and the program
        out["sandboxed"] = await job(
            rt, argv=["sh", "-c", "grep '^0::' /proc/self/cgroup"], sandbox="read-only"
        )
        # a job that leaves a process behind: found through its cgroup, killed with it
        out["lingering"] = await job(rt, argv=["sh", "-c", "sleep 30 & echo $!"])
        await rt.signal(out["lingering"]["job_id"], "kill")
    # the landlock backend: a thread of the server restricts itself and spawns a gate sh
    # (into the job's cgroup where glibc can), or the fork server clones the job there
    config = conch.Config(
        result_detail="full",
        data_dir=data_dir + "-landlock",
        default_cwd=cwd,
        sandbox_backend="landlock",
    )
    async with conch.Runtime(config) as rt:
        await rt.call_tool("info", {})  # (the backend's probe job runs now, not in the first)
        box: dict[str, Any] = {"sandbox": "read-only"}
        out["ll_argv"] = await job(rt, argv=["sh", "-c", SELF], **box)
        out["ll_pty"] = await job(rt, argv=["sh", "-c", SELF], pty=True, **box)
        out["ll_memory"] = await job(
            rt,
            argv=["sh", "-c", "grep -E '^(0|[0-9]+:memory):' /proc/self/cgroup"],
            memory_max=256 << 20,
            **box,
        )
        spawns.clear()
        shell = await rt.shell_open(**box)
        out["ll_shell_open"] = {"shell_id": shell["shell_id"], "spawns": list(spawns)}
        out["ll_shell"] = await job(rt, shell_id=shell["shell_id"], command=SELF)
        await rt.shell_close(shell["shell_id"])
    return out


if __name__ == "__main__":
    if "--as-before-glibc-2.39" in sys.argv:
        libc_spawn.forgo_cgroup_spawn()
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
