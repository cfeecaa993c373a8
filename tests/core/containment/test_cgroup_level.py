"""docs/spec.md §9a, the cgroup level, attacked on this host.

Level exercised: ``cgroup`` (hybrid host: v2 tree at /sys/fs/cgroup/unified tracks and kills
with cgroup.kill; v1 memory/pids controllers apply memory_max/pids_max). The last tests run
with ``cgroup="off"`` (level ``subreaper``) to prove the limits are refused there.
"""

from __future__ import annotations

import os
import shlex

import pytest
from procs import MiB, eventually, gone, read_pid, wait_for

import conch
from conch import ConchError

pytestmark = pytest.mark.anyio

# touches every page of 400 MiB
HOG = "python3 -c " + shlex.quote(
    'x = bytearray(400 * 1024 * 1024)\nx[::4096] = b"1" * len(x[::4096])\nprint("survived")'
)


def own_cgroup_lines(output: str) -> dict[str, str]:
    out = {}
    for line in output.splitlines():
        _, ctrl, path = line.split(":", 2)
        out[ctrl or "v2"] = path
    return out


async def test_info_reports_the_cgroup_level_and_its_layout(rt):
    info = await rt.info()
    assert info["containment"] == "cgroup"
    assert info["cgroup"]["available"] is True
    assert info["cgroup"]["version"] in ("v2", "hybrid", "v1")
    assert info["cgroup"]["limits"]["memory_max"]["available"] is True
    assert info["cgroup"]["limits"]["pids_max"]["available"] is True


async def test_each_job_and_each_shell_gets_its_own_cgroup(rt):
    a = await rt.exec(command="cat /proc/self/cgroup")
    b = await rt.exec(command="cat /proc/self/cgroup")
    ca, cb = own_cgroup_lines(a["output"]), own_cgroup_lines(b["output"])
    tracked = "v2" if "conch-" in ca.get("v2", "") else "freezer"
    assert ca[tracked].endswith("/" + a["job_id"]) and cb[tracked].endswith("/" + b["job_id"])
    assert f"conch-{rt.engine.instance}" in ca[tracked]
    sh = await rt.shell_open()
    s = await rt.exec(shell_id=sh["shell_id"], command="cat /proc/self/cgroup")
    assert own_cgroup_lines(s["output"])[tracked].endswith("/" + sh["shell_id"])
    await rt.shell_close(sh["shell_id"])


async def test_a_daemon_that_double_forks_leaves_the_session_and_clears_its_env_dies_with_the_job(
    rt, tmp_path
):
    pidfile = tmp_path / "daemon.pid"
    # the daemon: forked twice, own session, empty environment (no CONCH_TAG), ignores TERM
    cmd = (
        f"(setsid env -i /bin/sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 300' &) ; "
        "sleep 300"
    )
    r = await rt.exec(command=cmd, yield_ms=200)
    daemon = read_pid(str(pidfile))
    with open(f"/proc/{daemon}/environ", "rb") as f:
        assert b"CONCH_TAG" not in f.read()
    assert os.getsid(daemon) != r["pid"]
    s = await rt.signal(r["job_id"], "terminate", wait_ms=5000)  # TERM, 2 s grace, KILL
    assert s["state"] == "cancelled"
    assert gone(daemon)


async def test_the_escaped_daemon_of_a_finished_job_is_killed_by_signal(rt, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    cmd = f"(setsid env -i /bin/sh -c 'echo $$ > {pidfile}; exec sleep 300' &)"
    r = await rt.exec(command=cmd)
    daemon = read_pid(str(pidfile))
    assert r["state"] == "exited"
    assert daemon in r["lingering_pids"]  # found through the cgroup, not the tag or session
    await rt.signal(r["job_id"], "kill")
    assert wait_for(lambda: gone(daemon), 3.0)


async def test_shutdown_kills_escapees_and_removes_the_parent_cgroups(config, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    async with conch.Runtime(config()) as rt:
        cmd = f"(setsid env -i /bin/sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 300' &)"
        await rt.exec(command=cmd)
        daemon = read_pid(str(pidfile))
        parents = list(rt.engine.spawn.containment.cgroups.parents)
        assert parents and all(os.path.isdir(p) for p in parents)
    assert wait_for(lambda: gone(daemon), 3.0)
    assert not any(os.path.exists(p) for p in parents)


async def test_a_fork_bomb_under_pids_max_stays_bounded_and_leaves_nothing(rt):
    r = await rt.exec(
        command="bomb() { bomb | bomb & }; bomb; sleep 2; echo server-side-ok",
        pids_max=32,
        yield_ms=1500,
        timeout_ms=20000,
    )
    cg = rt.engine.starter.drivers[r["job_id"]].cgroup
    assert cg is not None and cg.pids_dir is not None
    with open(os.path.join(cg.pids_dir, "pids.max")) as f:
        assert f.read().strip() == "32"
    assert len(cg.pids()) <= 32
    with open(os.path.join(cg.pids_dir, "pids.events")) as f:
        assert int(f.read().split()[1]) > 0  # forks were refused
    dirs = list(cg.dirs)
    s = await rt.signal(r["job_id"], "kill", wait_ms=5000)
    assert s["state"] in ("cancelled", "exited")
    assert await eventually(lambda: not any(os.path.exists(d) for d in dirs), 3.0)
    again = await rt.exec(command="echo alive")  # the server survived
    assert again["output"] == "alive\n"


async def test_at_pids_max_further_forks_fail_inside_the_job(rt):
    code = (
        "import os\n"
        "kids = []\n"
        "try:\n"
        "    for _ in range(20):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            os.read(os.open('/dev/zero', 0), 1); import time; time.sleep(2); os._exit(0)\n"
        "        kids.append(pid)\n"
        "except BlockingIOError as e:\n"
        "    print('fork failed:', e.strerror)\n"
        "print('forked', len(kids))\n"
        "for k in kids: os.kill(k, 9); os.waitpid(k, 0)\n"
    )
    r = await rt.exec(argv=["python3", "-c", code], pids_max=5)
    assert r["state"] == "exited" and r["exit_code"] == 0
    assert "fork failed: Resource temporarily unavailable" in r["output"]
    assert "forked 4" in r["output"]  # python + 4 children = 5


async def test_a_memory_hog_under_memory_max_ends_in_state_limit(rt):
    r = await rt.exec(command=HOG, memory_max=64 * MiB, yield_ms=20000)
    assert r["state"] == "limit"
    assert r["limit"] == "memory_max"
    assert r["ok"] is False
    assert "survived" not in r["output"]


async def test_a_child_killed_by_the_memory_limit_ends_the_whole_job_as_limit(rt):
    # the leader survives the OOM kill of its child; Conch still ends the job as `limit`
    r = await rt.exec(
        command=f"{HOG}; echo leader-alive; sleep 30", memory_max=64 * MiB, yield_ms=20000
    )
    assert r["state"] == "limit" and r["limit"] == "memory_max"
    assert r["duration_ms"] < 15000


async def test_memory_max_and_pids_max_as_settings_are_defaults_and_ceilings(config):
    async with conch.Runtime(config(memory_max=64 * MiB, pids_max=64)) as rt:
        r = await rt.exec(command=HOG, yield_ms=20000)
        assert r["state"] == "limit" and r["limit"] == "memory_max"
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true", memory_max=128 * MiB)
        assert e.value.code == "invalid_argument" and "memory_max" in e.value.message
        ok = await rt.exec(command="echo fine", memory_max=32 * MiB, pids_max=8)
        assert ok["state"] == "exited" and ok["output"] == "fine\n"


async def test_memory_max_on_a_shell_limits_its_commands_and_the_shell_survives(rt):
    sh = await rt.shell_open(memory_max=64 * MiB)
    r = await rt.exec(shell_id=sh["shell_id"], command=HOG, yield_ms=20000)
    assert r["state"] == "limit" and r["limit"] == "memory_max"
    again = await rt.exec(shell_id=sh["shell_id"], command="echo still-here")
    assert again["state"] == "exited" and again["output"] == "still-here\n"
    await rt.shell_close(sh["shell_id"])


async def test_shell_close_kills_a_daemon_that_escaped_the_shell(rt, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    sh = await rt.shell_open()
    await rt.exec(
        shell_id=sh["shell_id"],
        command=(
            "(setsid env -i /bin/sh -c "
            f"'trap \"\" TERM HUP; echo $$ > {pidfile}; exec sleep 300' &)"
        ),
    )
    daemon = read_pid(str(pidfile))
    closed = await rt.shell_close(sh["shell_id"])
    assert closed["cleanup_complete"] is True
    assert wait_for(lambda: gone(daemon), 3.0)


async def test_limits_on_a_shell_command_belong_to_shell_open(rt):
    sh = await rt.shell_open()
    with pytest.raises(ConchError) as e:
        await rt.exec(shell_id=sh["shell_id"], command="true", memory_max=64 * MiB)
    assert e.value.code == "invalid_argument" and "shell_open" in e.value.message
    await rt.shell_close(sh["shell_id"])


async def test_the_state_limit_is_in_the_published_schema(rt):
    exec_tool = next(t for t in rt.tools() if t["name"] == "exec")
    props = exec_tool["inputSchema"]["properties"]
    assert {"memory_max", "pids_max", "sandbox", "network"} <= set(props)
    out = exec_tool["outputSchema"]["anyOf"][0]["properties"]
    assert "limit" in out["state"]["enum"] and "memory_max" in out["limit"]["enum"]


# -- where no cgroup can be had (level: subreaper) ---------------------------------------------


async def test_without_a_cgroup_the_limits_are_invalid_argument_naming_why(config):
    async with conch.Runtime(config(cgroup="off")) as rt:
        assert (await rt.info())["containment"] != "cgroup"
        for args in ({"memory_max": 64 * MiB}, {"pids_max": 10}):
            with pytest.raises(ConchError) as e:
                await rt.exec(command="touch ran", **args)
            assert e.value.code == "invalid_argument"
            assert "cgroup" in e.value.message
            with pytest.raises(ConchError) as e:
                await rt.shell_open(**args)
            assert e.value.code == "invalid_argument"
        assert not os.path.exists(os.path.join(rt.config.resolved_default_cwd, "ran"))
        res = await rt.call_tool("exec", {"command": "true", "pids_max": 3})
        assert res["error"]["code"] == "invalid_argument"


async def test_a_limit_setting_without_a_cgroup_is_refused_at_each_call(config):
    async with conch.Runtime(config(cgroup="off", memory_max=64 * MiB)) as rt:
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true")
        assert e.value.code == "invalid_argument" and "memory_max" in e.value.message


async def test_a_finished_jobs_cgroup_goes_once_its_leftovers_end(rt):
    parent = next(
        p for p in rt.engine.spawn.containment.cgroups.parents if "unified" in p or "freezer" in p
    )
    done = await rt.exec(command="true")
    left = await rt.exec(command="sleep 0.3 &")
    assert left["lingering_pids"]
    pty = await rt.exec(command="true", pty=True)
    assert os.path.isdir(os.path.join(parent, left["job_id"]))  # its sleep still runs there
    # an empty cgroup is removed by housekeeping (a worker thread, every 0.5 s), not on the call
    for job in (done, pty):
        assert await eventually(
            lambda j=job: not os.path.exists(os.path.join(parent, j["job_id"])), 2.0
        )
    assert await eventually(lambda: not os.path.exists(os.path.join(parent, left["job_id"])), 3.0)
