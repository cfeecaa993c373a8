"""A big job's digest is built while it prints (core/output/digest_log.py ``follow``), so
that its result has little left to do; and it is the digest of the whole log all the same."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

import conch
from conch.core import ExecRequest, ReadRequest
from conch.core.output.digest import digest_bytes
from conch.core.output.digest_log import FOLLOW_FROM

pytestmark = pytest.mark.anyio

#: prints SIZE bytes of compiler noise with one error in the middle, then waits for FLAG
PRINT_THEN_WAIT = """
import os, sys, time
size, flag = int(sys.argv[1]), sys.argv[2]
line = b"  CC      build/obj/module/file.o  gcc -O2 -Wall -c src/file.c\\n"
n = size // len(line)
out = sys.stdout.buffer
for i in range(n):
    out.write(b"src/bad.c:12:5: error: 'y' undeclared\\n" if i == n // 2 else line)
out.flush()
deadline = time.monotonic() + 30
while not os.path.exists(flag) and time.monotonic() < deadline:
    time.sleep(0.01)
"""


async def scanned_while_running(rt: conch.Runtime, job_id: str, want: int) -> int:
    """How far the running job's digest got, waiting up to 10 s for ``want`` bytes."""
    job = rt.engine.jobs.get(job_id)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert not job.terminal
        if job.digest is not None and job.digest.scanned >= want:
            break
        await asyncio.sleep(0.02)
    return 0 if job.digest is None else job.digest.scanned


async def test_a_log_past_the_mark_is_digested_while_the_job_runs(rt, tmp_path: Path):
    size = 2 << 20  # past the mark (1 MiB: the largest inline budget), and no more
    flag = tmp_path / "go"
    argv = [sys.executable, "-c", PRINT_THEN_WAIT, str(size), str(flag)]
    job = await rt.engine.exec(ExecRequest(argv=argv, yield_ms=0))
    printed = size - size % 64
    got = await scanned_while_running(rt, job["job_id"], printed // 2)
    assert got >= printed // 2, f"the running job's digest covered {got} of {printed} bytes"
    flag.touch()
    r = await rt.engine.read(ReadRequest(job["job_id"], until="exit", wait_ms=30000))
    assert r["state"] == "exited" and r["exit_code"] == 0
    log = Path(r["log_path"]).read_bytes()
    assert r["digest"] == digest_bytes(log)  # the same as one pass over the whole log
    assert [e["text"] for e in r["digest"]["lines"]] == ["src/bad.c:12:5: error: 'y' undeclared"]


async def test_digest_false_builds_nothing_while_the_job_runs(rt, tmp_path: Path):
    flag = tmp_path / "go"
    argv = [sys.executable, "-c", PRINT_THEN_WAIT, str(2 * FOLLOW_FROM), str(flag)]
    job = await rt.engine.exec(ExecRequest(argv=argv, yield_ms=0, digest=False))
    running = rt.engine.jobs.get(job["job_id"])
    await running.wait_until(lambda: running.log.size() >= 2 * FOLLOW_FROM - 64, 10)
    await asyncio.sleep(0.3)
    assert running.digest is None
    flag.touch()
    r = await rt.engine.read(ReadRequest(job["job_id"], until="exit", wait_ms=30000))
    assert r["state"] == "exited"  # (a read may still ask for one: built then, not before)
