"""Who can read a terminal that waits for a secret, as the secret page names it: the job's
process that waits reading it, and every other process that can read it, found from /proc
(conch/core/process/terminal.py): one that left the job's tree but kept the terminal open on a
descriptor (``setsid``), one still in the terminal's session with no descriptor of it (it opens
``/dev/tty`` at will). A page whose terminal such a process can read warns, whatever program
asks.

Real processes on a real PTY, through the runtime (no sandbox: the processes a job leaves
behind outside its tree are the case)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, backend_settings

import conch
from conch.core.process import terminal
from conch.mcp.secrets import ask_of

pytestmark = [pytest.mark.anyio, pytest.mark.needs("openssl")]
# a known password program that asks on the terminal
OPENSSL = "openssl enc -aes-128-cbc -pbkdf2 -in /dev/null -out /dev/null"


def _config(tmp_path: Path) -> conch.Config:
    return conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path))


async def _asking(rt: conch.Runtime, command: str, sandbox: str | None = None) -> str:
    extra = {"sandbox": sandbox} if sandbox else {}
    r = await rt.exec(command=command, pty=True, yield_ms=0, **extra)  # type: ignore[arg-type]
    job_id = str(r["job_id"])
    r = await rt.read(job_id, until="input", wait_ms=20000)
    for _ in range(200):  # (the prompt may come a moment after the first wait for input)
        if r.get("awaiting_secret"):
            return job_id
        await asyncio.sleep(0.05)
        r = await rt.read(job_id)
    raise AssertionError(r)


def _pids(output: str, name: str) -> int:
    found = re.search(rf"{name}=(\d+)", output)
    assert found, output
    return int(found.group(1))


@pytest.mark.parametrize("backend", ["none", *BACKENDS])
async def test_the_prompt_alone_reads_a_terminal_no_one_else_holds(tmp_path: Path, backend):
    """No false reader: neither the server nor a sandbox's own processes (bwrap, which waits
    in ``poll`` with the terminal as its stdin, on descriptors of its own; Landlock's fork
    server) are named, so a known password program's page does not warn."""
    settings = backend_settings(backend) if backend != "none" else {}
    config = conch.Config(
        data_dir=str(tmp_path / "data"),
        default_cwd=str(tmp_path),
        **settings,  # type: ignore[arg-type]
    )
    sandbox = "read-only" if backend != "none" else None
    async with conch.Runtime(config) as rt:
        job_id = await _asking(rt, OPENSSL, sandbox)
        job = rt.engine.job(job_id)
        openssl = os.path.realpath(shutil.which("openssl") or "openssl")
        for _ in range(100):  # (the prompt's read may come a moment after it printed; a
            # search cut short by this busy machine's load names UNCHECKED: look again)
            readers = job.terminal_readers()
            paths = {path for _, path in readers}
            if openssl in paths and terminal.UNCHECKED not in dict(readers):
                break
            time.sleep(0.05)
        assert [path for _, path in readers] == [openssl], readers
        assert not ask_of(job).warn
        await rt.signal(job_id, "kill", wait_ms=5000)


async def test_processes_outside_the_job_that_can_read_its_terminal_are_named(tmp_path: Path):
    """A job leaves two processes outside its tree (a double fork): one in a session of its
    own that keeps the terminal as its stdin, one still in the terminal's session with no
    descriptor of it; then a known password program asks. Both are named as readers, and
    the page warns."""
    command = (
        "(setsid sh -c 'echo HOLDER=$$; exec sleep 60' &); "
        "(sh -c 'echo MEMBER=$$; exec sleep 60 </dev/null >/dev/null 2>&1' &); "
        "sleep 0.5; " + OPENSSL
    )
    left: list[int] = []
    try:
        async with conch.Runtime(_config(tmp_path)) as rt:
            job_id = await _asking(rt, command)
            out = str((await rt.read(job_id, cursor=0))["output"])
            left = [_pids(out, "HOLDER"), _pids(out, "MEMBER")]
            job = rt.engine.job(job_id)
            for _ in range(20):  # (a search cut short by this busy machine's load: again)
                readers = dict(job.terminal_readers())
                if terminal.UNCHECKED not in readers:
                    break
            assert set(left) <= set(readers), (left, readers, out)
            ask = ask_of(job)
            assert ask.warn and len(ask.unknown) >= 2, ask
            await rt.signal(job_id, "kill", wait_ms=5000)
    finally:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_search_outside_is_bounded_and_fails_closed(tmp_path: Path):
    """With no time to look, the search names the processes it did not check (``UNCHECKED``)
    instead of none."""
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        fg = str(os.getpgrp() + 10**7)  # (a group no process is in)
        started = time.monotonic()
        assert terminal.outside(tty, fg, set(), budget_s=0.0) == [terminal.UNCHECKED]
        assert time.monotonic() - started < 1.0
        # with time, this process's own terminal is held only by this process (not listed)
        assert terminal.outside(tty, fg, set(), budget_s=5.0) == []
    finally:
        os.close(slave)
        os.close(master)
