"""Issue 18.6: output the log cannot keep (a full disk) is counted and said, the job goes on
with its pipe drained (no SIGPIPE of Conch's making), and the server recovers with space."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import system_tools

import conch

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs for the data dir (needs root and mount)."""
    d = tmp_path / "small"
    d.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        system_tools.unavailable("a small filesystem of its own", "needs root and mount")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], capture_output=True, text=True
    )
    if r.returncode != 0:
        system_tools.unavailable("a small filesystem of its own", f"mount: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


async def test_a_full_disk_loses_output_visibly_and_the_job_runs_on(small_disk, tmp_path):
    cfg = conch.Config(
        result_detail="full", data_dir=str(small_disk / "data"), default_cwd=str(tmp_path)
    )
    async with conch.Runtime(cfg) as rt:
        await rt.exec(command="true")  # the data dir and its spare logs exist
        filler = small_disk / "filler"
        with open(filler, "wb") as f:  # fill the disk, then leave ~64 KiB
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
