"""Bugs of jobs found using Conch as a new user would (issue 8, part 1): each stays fixed.

Descriptors stay flat however many jobs are retained, ctrl-d on a terminal is end-of-file,
/dev/tty password prompts are seen, and a stopped job's state agrees with its process whenever
a call looks. (The same issue's output bugs: tests/core/output/test_output_regressions.py; its
inherited signal state: tests/core/process/test_spawn_signals.py.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psutil
import pytest
from fresh_python import run_child

import conch

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


GETPASS = "python3 -c \"import getpass; print('got:' + getpass.getpass('Password: '))\""


async def call(rt: conch.Runtime, tool: str, **args: Any) -> dict[str, Any]:
    r = await rt.call_tool(tool, args)
    assert "error" not in r, r
    return r


# -- descriptors ----------------------------------------------------------------------------


def test_descriptors_stay_flat_over_a_thousand_retained_jobs(tmp_path: Path) -> None:
    out = run_child(
        tmp_path,
        """
        import asyncio, json, os, resource, sys
        import conch

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        tmp = sys.argv[1]

        def targets():
            out = []
            for f in os.listdir("/proc/self/fd"):
                try:
                    out.append(os.readlink(f"/proc/self/fd/{f}"))
                except OSError:
                    pass  # the directory listing's own descriptor
            return out

        def held(rt):
            # descriptors besides the log pool's few pre-created files (no job owns them yet)
            jobs = {j.log.path for j in rt.engine.jobs}
            return [t for t in targets() if "/data/logs/" not in t or t in jobs]

        async def main():
            cfg = conch.Config(result_detail="full", data_dir=tmp + "/data", default_cwd=tmp)
            async with conch.Runtime(cfg) as rt:
                first = []
                for i in range(1100):
                    r = await rt.call_tool("exec", {"command": f"echo job{i}"})
                    assert r.get("state") == "exited" and r["output"] == f"job{i}\\n", r
                    if i % 10 == 0:
                        r = await rt.call_tool("exec", {"command": f"echo pty{i}", "pty": True})
                        assert r.get("state") == "exited", r
                    if i == 20:
                        await asyncio.sleep(0.6)  # the log pool is topped up
                        first.append(len(held(rt)))
                    if i > 100 and i % 50 == 0:
                        # old jobs stay readable (reads open and close the file)
                        jobs = (await rt.call_tool("list", {}))["jobs"]
                        old = jobs[0]["job_id"]
                        r = await rt.call_tool("read", {"job_id": old, "cursor": 0})
                        assert r["output"].startswith(("job", "pty")), r
                await asyncio.sleep(0.6)  # housekeeping has run; the log pool is topped up
                retained = len(rt.engine.jobs)
                now = held(rt)
                spares = [t for t in targets() if "/data/logs/" in t and t not in now]
                print(json.dumps({"first": first[0], "last": len(now), "retained": retained,
                                  "held": now, "spares": len(spares)}))

        asyncio.run(main())
        """,
    )
    assert out["retained"] == 1000
    assert not [t for t in out["held"] if "/data/logs/" in t], json.dumps(out)
    assert out["spares"] <= 8, json.dumps(out)
    assert out["last"] <= out["first"], json.dumps(out)


# -- ctrl-d on a terminal -------------------------------------------------------------------


async def test_ctrl_d_key_is_end_of_file_on_a_terminal(rt: conch.Runtime) -> None:
    for _ in range(10):  # the hang-up raced the program's own exit: repeat to catch it
        r = await call(rt, "exec", command="cat", pty=True, yield_ms=200)
        w = await call(rt, "write", job_id=r["job_id"], text="hello\n")
        assert "hello\n" in w["output"]
        w = await call(rt, "write", job_id=r["job_id"], keys=["ctrl-d"])
        assert (w["state"], w["exit_code"], w.get("signal")) == ("exited", 0, None), w


# -- password prompts on /dev/tty -------------------------------------------------------------


async def _sees_password_prompt(rt: conch.Runtime, **where: Any) -> None:
    r = await call(rt, "exec", command=GETPASS, yield_ms=0, **where)
    job = r["job_id"]
    for _ in range(100):
        r = await call(rt, "read", job_id=job, cursor=0)
        # (a shell reading its own command line waits, echo on); the prompt's bytes may reach
        # the log a moment after the terminal says it waits, on a loaded machine
        if r.get("awaiting_secret") and r["output"].endswith("Password: "):
            break
        await asyncio.sleep(0.05)
    assert r["state"] == "running"
    assert r.get("awaiting_input") and r.get("awaiting_secret"), r
    assert r["output"].endswith("Password: "), r
    w = await call(rt, "write", job_id=job, text="s3cret\n", yield_ms=3000)
    assert w["state"] == "exited" and "got:s3cret\n" in w["output"], w


async def test_getpass_on_dev_tty_is_awaiting_a_secret_in_a_pty_job(rt: conch.Runtime) -> None:
    await _sees_password_prompt(rt, pty=True)


async def test_getpass_on_dev_tty_is_awaiting_a_secret_in_a_shell(rt: conch.Runtime) -> None:
    s = await call(rt, "shell_open")
    try:
        await _sees_password_prompt(rt, shell_id=s["shell_id"])
    finally:
        await call(rt, "shell_close", shell_id=s["shell_id"])


# -- state and processes agree -----------------------------------------------------------------


async def test_a_cancelled_exec_is_never_listed_running_once_its_process_is_gone(
    rt: conch.Runtime,
) -> None:
    for _ in range(15):
        task = asyncio.ensure_future(rt.exec(command="exec sleep 60", yield_ms=60_000))
        while not (jobs := (await rt.list())["jobs"]) or jobs[-1]["state"] != "running":
            await asyncio.sleep(0.01)
        job_id = jobs[-1]["job_id"]
        pid = rt.engine.jobs.get(job_id).pid
        task.cancel()
        violations = []
        while not task.done():
            try:
                dead = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                dead = True
            if dead:  # looked at the process first: the state must already say so
                state = next(j["state"] for j in (await rt.list())["jobs"] if j["job_id"] == job_id)
                if state == "running":
                    violations.append(state)
            await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not violations, f"listed running {len(violations)} times after its process died"
        assert rt.engine.job(job_id).state == "cancelled"


async def test_a_result_that_says_exited_carries_the_whole_output(tmp_path):
    # the state and the window describe the same moment: an exec that returns `exited` at
    # yield 0 never shows an empty window over a log that already holds the output
    async with conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path))) as rt:
        for _ in range(40):
            r = await rt.exec(command="echo quick", yield_ms=0)
            if r["state"] == "exited":
                assert r["output"] == "quick\n"
                assert r.get("next_cursor", 6) == r.get("total_bytes", 6) == 6
                assert r.get("eof", True) is True
            else:
                r = await rt.read(r["job_id"], wait_ms=5000, until="exit")
                assert r["output"] == "quick\n"
