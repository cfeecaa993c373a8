"""Bugs found using Conch as a new user would (issue 8, part 1): each stays fixed.

Descriptors stay flat however many jobs are retained, children start with default signal
state, ctrl-d on a terminal is end-of-file, /dev/tty password prompts are seen, progress bars
do not flood previews, tiny budgets are valid, and a stopped job's state agrees with its
process whenever a call looks.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

import conch
from conch.core.output import window as win
from conch.core.output.log import JobLog
from conch.core.output.utf8 import utf8_len

pytestmark = pytest.mark.anyio


#: the `rt` of tests/conftest.py gives results at Config's default detail (lean) here
RESULT_DETAIL = None


GETPASS = "python3 -c \"import getpass; print('got:' + getpass.getpass('Password: '))\""
SIG_LINES = "awk '/^Sig(Ign|Blk):/ {print $1, $2}' /proc/self/status"


async def call(rt: conch.Runtime, tool: str, **args: Any) -> dict[str, Any]:
    r = await rt.call_tool(tool, args)
    assert "error" not in r, r
    return r


def run_child(tmp_path: Path, body: str, timeout: float = 240) -> dict[str, Any]:
    """Run an embedded Runtime in a fresh interpreter (its own limits and signal state)."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- 1. descriptors -------------------------------------------------------------------------


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


# -- 3. inherited signal state ----------------------------------------------------------------


def test_children_start_with_default_signals_whatever_the_server_inherited(
    tmp_path: Path,
) -> None:
    out = run_child(
        tmp_path,
        f"""
        import asyncio, json, signal, sys
        import conch

        # what nohup, a supervisor or a background shell hand down
        for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        tmp = sys.argv[1]
        SIG = {SIG_LINES!r}

        async def main():
            cfg = conch.Config(result_detail="full", data_dir=tmp + "/data", default_cwd=tmp)
            out = {{}}
            async with conch.Runtime(cfg) as rt:
                for pty in (False, True):
                    kind = "pty" if pty else "pipe"
                    cmd = SIG + "; kill -HUP $$; echo alive"
                    r = await rt.call_tool("exec", {{"command": cmd, "pty": pty}})
                    out[kind] = [r["output"], r["state"], r.get("signal")]
                    text = SIG + "\\nkill -INT $$\\necho alive"
                    r = await rt.call_tool("exec", {{"script": text, "pty": pty}})
                    out[kind + "_script"] = [r["output"], r["state"], r.get("signal")]
                s = await rt.call_tool("shell_open", {{}})
                r = await rt.call_tool("exec", {{"shell_id": s["shell_id"], "command": SIG}})
                out["shell"] = [r["output"], r["state"], r.get("signal")]
                await rt.call_tool("shell_close", {{"shell_id": s["shell_id"]}})
            print(json.dumps(out))

        asyncio.run(main())
        """,
        timeout=120,
    )
    clean = "SigBlk: 0000000000000000\nSigIgn: 0000000000000000\n"
    assert out["pipe"] == [clean, "exited", "SIGHUP"], out
    assert out["pty"] == [clean, "exited", "SIGHUP"], out
    assert out["pipe_script"] == [clean, "exited", "SIGINT"], out
    assert out["pty_script"] == [clean, "exited", "SIGINT"], out
    assert out["shell"][0] == clean, out


# -- 4. ctrl-d on a terminal ----------------------------------------------------------------


async def test_ctrl_d_key_is_end_of_file_on_a_terminal(rt: conch.Runtime) -> None:
    for _ in range(10):  # the hang-up raced the program's own exit: repeat to catch it
        r = await call(rt, "exec", command="cat", pty=True, yield_ms=200)
        w = await call(rt, "write", job_id=r["job_id"], text="hello\n")
        assert "hello\n" in w["output"]
        w = await call(rt, "write", job_id=r["job_id"], keys=["ctrl-d"])
        assert (w["state"], w["exit_code"], w.get("signal")) == ("exited", 0, None), w


# -- 5. password prompts on /dev/tty ----------------------------------------------------------


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


# -- 6. progress bars -------------------------------------------------------------------------


async def test_a_rewritten_progress_line_previews_as_its_final_content(rt: conch.Runtime) -> None:
    r = await call(rt, "exec", command="for i in $(seq 1 20000); do printf '\\r%d' $i; done; echo")
    assert r["state"] == "exited"
    assert r["output"] == "20000\n", r["output"][:300]
    # lean result: nothing cut, so neither truncated nor omitted_bytes is there
    assert "truncated" not in r and "omitted_bytes" not in r
    assert (await rt.list())["jobs"][-1]["total_bytes"] > 100_000


def _log(tmp_path: Path, data: bytes) -> JobLog:
    path = str(tmp_path / "x.log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    log = JobLog(path, fd, 1 << 30)
    log.append(data)
    log.close_writer()
    return log


def test_preview_of_a_huge_rewritten_log_is_bounded_and_its_marker_cursors_are_raw(
    tmp_path: Path,
) -> None:
    frames = b"".join(b"\r%07d" % i for i in range(500_000))  # 4 MB of one rewritten line
    data = b"start\n" + frames + b"\nend\n"
    log = _log(tmp_path, data)
    w = win.preview(log, 400)
    assert utf8_len(w.text) <= 400 and w.truncated
    assert w.text.startswith("start\n") and w.text.endswith("end\n")
    a, b = (int(x) for x in w.text.split("read cursor ")[1].split(" ")[0].split("-"))
    assert b - a == w.omitted_bytes and 0 < a < b < len(data)
    # the marker's range is exactly what the head and tail left out, in raw bytes
    head_raw = win.forward(log, 0, a, 1 << 20, stream=None, raw=True, final=True)
    assert head_raw.next_cursor == a
    log.unlink()


# -- 7. tiny budgets ----------------------------------------------------------------------------


async def test_tiny_read_and_exec_budgets_keep_the_newest_tail(rt: conch.Runtime) -> None:
    r = await call(rt, "exec", command="printf 'one two three héllo wörld'", max_output_bytes=5)
    assert r["truncated"] and utf8_len(r["output"]) <= 5
    assert "wörld".endswith(r["output"]) and r["output"]
    for n in (1, 2, 3, 5, 15):
        got = await call(rt, "read", job_id=r["job_id"], cursor=0, max_bytes=n)
        assert 0 < utf8_len(got["output"]) <= n, got
        assert got["output"] == "one two three héllo wörld"[: len(got["output"])]
    one = await call(rt, "exec", command="echo 12345", max_output_bytes=1)
    assert one["output"] == "\n"


# -- 8. state and processes agree --------------------------------------------------------------


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
