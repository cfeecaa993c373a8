"""Issue 18.6: output the log cannot keep (a full disk) is counted and said, the job goes on
with its pipe drained (no SIGPIPE of Conch's making), and the server recovers with space."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest
from small_disk import mounted as small_disk_mounted

import conch

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs for the data dir (needs root and mount)."""
    yield from small_disk_mounted(tmp_path / "small", "size=1m,nr_inodes=64")


async def test_a_full_disk_loses_output_visibly_and_the_job_runs_on(small_disk, tmp_path):
    # (the workspace apart from the small disk: the change tracker would keep the filler too)
    (tmp_path / "ws").mkdir()
    cfg = conch.Config(
        result_detail="full", data_dir=str(small_disk / "data"), default_cwd=str(tmp_path / "ws")
    )
    async with conch.Runtime(cfg) as rt:
        await rt.exec(command="true")  # the data dir and its spare logs exist
        filler = small_disk / "filler"
        with open(filler, "wb", buffering=0) as f:  # fill the disk, then leave ~64 KiB
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass
        os.truncate(filler, os.path.getsize(filler) - 65536)
        r = await rt.exec(
            command="head -c 2000000 /dev/zero | tr '\\0' a; echo; echo done; exit 3",
            yield_ms=30000,
        )
        assert r["state"] == "exited" and r["exit_code"] == 3 and r["signal"] is None, r
        assert r["lost_bytes"] > 1_000_000, r["lost_bytes"]
        assert f"[... {r['lost_bytes']} bytes of output lost" in r["output"]
        assert "No space left on device (ENOSPC)" in r["output"]
        lean = await rt.call_tool("read", {"job_id": r["job_id"]})
        assert lean.get("lost_bytes") == r["lost_bytes"]
        os.unlink(filler)  # space again: the next job's output is whole
        r = await rt.exec(command="seq 1 20000 | tail -1")
        assert r["output"] == "20000\n" and r["lost_bytes"] == 0, r


async def test_a_data_dir_removed_under_the_server_is_said_and_made_again(tmp_path):
    """Issue 18.6: a tmp cleaner removes the data dir: old logs say they are gone, new jobs
    get whole output again (spare logs and warm processes of the old dir are not used), and
    nothing raises in a loop callback."""
    data = tmp_path / "data"
    cfg = conch.Config(result_detail="full", data_dir=str(data), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        first = await rt.exec(command="echo one")
        await rt.exec(command="true")  # the warm bash and the spare logs exist
        shutil.rmtree(data)
        r = await rt.read(job_id=first["job_id"], cursor=0)
        assert "cannot be read (No such file or directory): its 4 bytes are gone" in r["output"]
        for _ in range(3):
            r = await rt.exec(command="echo two; exit 3")
            assert (r["output"], r["exit_code"]) == ("two\n", 3), r
            assert os.path.exists(r["log_path"])
        s = await rt.call_tool("shell_open", {})
        assert s["state"] == "ready", s


async def test_a_data_dir_that_cannot_take_files_is_capacity_naming_it(small_disk, tmp_path):
    """No inode left for a new log: `capacity` naming the data dir, never `internal`; the
    server goes on once there is room."""
    cfg = conch.Config(data_dir=str(small_disk / "data"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        await rt.exec(command="true")
        fillers = []
        with contextlib.suppress(OSError):  # every inode taken (the tmpfs has 64)
            for i in range(100):
                p = small_disk / f"filler-{i}"
                p.touch()
                fillers.append(p)
        for _ in range(12):  # past the spare logs made ahead
            r = await rt.call_tool("exec", {"command": "echo x"})
            if "error" in r:
                break
        assert r["error"]["code"] == "capacity", r
        assert str(small_disk / "data") in r["error"]["message"]
        assert "No space left on device" in r["error"]["message"]
        for p in fillers:
            p.unlink()
        r = await rt.call_tool("exec", {"command": "echo back"})
        assert r["output"] == "back\n", r


def fill_up(disk) -> list:
    """Take every block of the small filesystem (down to single bytes): the fillers."""
    fillers = []
    for size in (65536, 4096, 1):
        p = disk / f"filler-{size}"
        fillers.append(p)
        with open(p, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"x" * size)
    return fillers


async def test_a_script_or_shell_command_on_a_full_disk_is_capacity_naming_it(small_disk, tmp_path):
    """A script (and a shell's command) is written to a file in the data dir before it runs:
    with no block left that is `capacity` naming the data dir, never `internal`, and both work
    again once there is room."""
    data = small_disk / "data"
    cfg = conch.Config(data_dir=str(data), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        await rt.exec(command="true")  # the data dir and its spare logs exist
        shell = await rt.call_tool("shell_open", {})
        assert shell["state"] == "ready", shell
        fillers = fill_up(small_disk)
        script = await rt.call_tool("exec", {"script": "echo scripted"})
        in_shell = await rt.call_tool(
            "exec", {"command": "echo in-shell", "shell_id": shell["shell_id"]}
        )
        for r in (script, in_shell):
            assert r.get("error", {}).get("code") == "capacity", r
            assert str(data) in r["error"]["message"], r
            assert "No space left on device" in r["error"]["message"], r
        for p in fillers:
            p.unlink()
        r = await rt.call_tool("exec", {"script": "echo scripted"})
        assert r["output"] == "scripted\n", r
        r = await rt.call_tool("exec", {"command": "echo in-shell", "shell_id": shell["shell_id"]})
        assert r["output"] == "in-shell\n", r


async def test_the_logs_total_cap_evicts_finished_jobs_oldest_first(tmp_path):
    """max_total_log_bytes bounds the logs of all jobs together: finished jobs make way, oldest
    first (as beyond max_jobs), and a job's output is then whole."""
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"),
        default_cwd=str(tmp_path),
        result_detail="full",
        max_total_log_bytes=100_000,
    )
    async with conch.Runtime(cfg) as rt:
        first = await rt.exec(command="head -c 45000 /dev/zero")
        second = await rt.exec(command="head -c 45000 /dev/zero")
        third = await rt.exec(command="head -c 45000 /dev/zero")
        assert (third["total_bytes"], third["lost_bytes"]) == (45000, 0), third
        assert not os.path.exists(first["log_path"])
        gone = await rt.call_tool("read", {"job_id": first["job_id"]})
        assert gone["error"]["code"] == "not_found", gone
        kept = await rt.read(job_id=second["job_id"], cursor=0)
        assert kept["total_bytes"] == 45000 and os.path.exists(second["log_path"])
        assert rt.engine.data.log_bytes == 90000


async def test_running_jobs_at_the_logs_total_cap_lose_output_visibly_and_new_jobs_wait(tmp_path):
    """When running jobs' logs alone fill max_total_log_bytes, a running job's further output
    is cut with the loss said (the job runs on, its pipe drained), and a new job is `capacity`
    naming the setting; once the job has ended it makes way."""
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"),
        default_cwd=str(tmp_path),
        result_detail="full",
        max_total_log_bytes=100_000,
    )
    async with conch.Runtime(cfg) as rt:
        flood = await rt.exec(
            command="head -c 150000 /dev/zero; echo; echo still-going; read -r x; exit 4",
            stdin_open=True,
            yield_ms=0,
        )
        # (waiting on its stdin: all it printed before is in, or counted lost)
        r = await rt.read(job_id=flood["job_id"], until="input", wait_ms=20000)
        assert r["state"] == "running" and r["total_bytes"] == 100_000, r
        assert r["lost_bytes"] == 150000 + len("\nstill-going\n") - 100_000, r
        assert "bytes of output lost" in r["output"] and "max_total_log_bytes" in r["output"]
        refused = await rt.call_tool("exec", {"command": "echo hi"})
        assert refused["error"]["code"] == "capacity" and refused["error"]["retryable"], refused
        assert "max_total_log_bytes" in refused["error"]["message"], refused
        r = await rt.write(job_id=flood["job_id"], text="go\n", yield_ms=5000)
        r = await rt.read(job_id=flood["job_id"], until="exit", wait_ms=10000)
        assert (r["state"], r["exit_code"]) == ("exited", 4), r
        again = await rt.call_tool("exec", {"command": "echo hi"})
        assert again["output"] == "hi\n", again
        gone = await rt.call_tool("read", {"job_id": flood["job_id"]})
        assert gone["error"]["code"] == "not_found", gone
