"""Issue 22b: what a sandboxed job can reach that is not its own, attacked on both Linux
backends (``bwrap``, ``landlock`` at the cgroup level: the fork server starts it on this glibc,
``landlock-nocgroup``: the server's restricted thread; tests/support/sandbox_backends.py).

Level exercised: ``cgroup`` and ``subreaper`` (this host; see conftest), the sandbox on top.

Terminals: another terminal's slave (a Conch terminal job's, or a person's terminal that is not
Conch's at all) can be neither opened nor listed from inside, at every level (bwrap: a devpts of
the sandbox's own, also at ``sandbox: off`` with ``network: off``, where the host's ``/dev`` was
bound before; Landlock: only the job's own slave is granted). A Landlock job cannot make new
terminals (their slaves appear in ``/dev/pts``, which no rule can grant ahead); a bwrap job
makes them in its own devpts.
"""

from __future__ import annotations

import os
import sys

import pytest
from job_ends import until_exit
from job_programs import ATTEMPT
from sandbox_backends import BACKENDS, backend_settings, kind

import conch

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
INSIDE_PY = os.path.realpath(sys.executable)
LEVELS = [("read-only", "on"), ("workspace-write", "off"), ("off", "off")]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def config(tmp_path, workspace, backend):
    def make(**settings: object) -> conch.Config:
        return conch.Config(
            result_detail="full",
            data_dir=str(tmp_path / "data"),
            default_cwd=workspace,
            **{**backend_settings(backend), **settings},  # type: ignore[arg-type]
        )

    return make


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


# -- terminals -------------------------------------------------------------------------------

#: open each terminal given (read and write), write a fake line into it, list /dev/pts
_TERMINALS = (
    ATTEMPT
    + r"""
import os, sys
def fake(path):
    def go():
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        try:
            os.write(fd, b"FAKE-LINE\n")
        finally:
            os.close(fd)
    return go
for n, path in enumerate(sys.argv[1:]):
    attempt(f"write{n}", fake(path))
    attempt(f"read{n}", lambda path=path: os.close(os.open(path, os.O_RDONLY | os.O_NOCTTY)))
attempt("ptmx", lambda: os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)))
try:
    print("names", ",".join(sorted(os.listdir("/dev/pts"))) or "-")
except OSError as e:
    print("names", "blocked", e.errno)
"""
)


def _drain(master: int) -> bytes:
    os.set_blocking(master, False)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except (BlockingIOError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


async def _whole(rt: conch.Runtime, job_id: str) -> str:
    """Everything a job's terminal showed, from its start."""
    r = await rt.call_tool("read", {"job_id": job_id, "cursor": 0, "max_bytes": 65536})
    return str(r["output"])


async def _terminal_job(rt: conch.Runtime) -> tuple[str, str]:
    """An unsandboxed terminal job waiting for a line: (its job id, its terminal's path)."""
    r = await rt.exec(command="tty; read -r line; echo got:$line", pty=True, yield_ms=400)
    assert r["state"] == "running", r
    tty = r["output"].splitlines()[0].strip()
    assert tty.startswith("/dev/pts/"), r
    return r["job_id"], tty


@pytest.mark.parametrize(("sandbox", "network"), LEVELS)
async def test_a_sandboxed_job_can_open_no_other_terminal(config, backend, sandbox, network):
    """A job's terminal and a person's (a terminal made outside Conch) cannot be opened from
    inside, for reading or writing, nor found by listing /dev/pts: nothing typed into them
    can be read there, and no fake line reaches them. The same program unsandboxed writes
    into terminals of the same two kinds (the control)."""
    person_m, person_s = os.openpty()
    other_m, other_s = os.openpty()
    try:
        person, other = os.ttyname(person_s), os.ttyname(other_s)
        async with conch.Runtime(config()) as rt:
            victim, victim_tty = await _terminal_job(rt)
            r = await rt.exec(
                argv=[INSIDE_PY, "-c", _TERMINALS, victim_tty, person],
                sandbox=sandbox,
                network=network,
            )
            got = _results(r["output"])
            await until_exit(rt, await rt.write(victim, text="real\n"))
            shown = await _whole(rt, victim)
            # the control: unsandboxed, into a terminal job and a person's terminal of its own
            control_job, control_tty = await _terminal_job(rt)
            c = await rt.exec(argv=[INSIDE_PY, "-c", _TERMINALS, control_tty, other])
            free = _results(c["output"])
            await until_exit(rt, await rt.write(control_job, text="real\n"))
            control_shown = await _whole(rt, control_job)
        reached, reached_other = _drain(person_m), _drain(other_m)
    finally:
        for fd in (person_m, person_s, other_m, other_s):
            os.close(fd)
    assert r["exit_code"] == 0, r
    want = "blocked EACCES" if kind(backend) == "landlock" else "blocked ENOENT"
    for key in ("write0", "read0", "write1", "read1"):
        assert got[key] == want, (key, got)
    if kind(backend) == "landlock":
        assert got["names"] == "blocked 13", got  # (EACCES: /dev/pts cannot be listed)
        # no master either: each would hold one of the host's kernel.pty.max terminals
        assert got["ptmx"] == "blocked EACCES", got
    else:  # its own devpts: no terminal of the host in it
        assert got["names"] == "ptmx" and got["ptmx"] == "ok", got
    assert "FAKE-LINE" not in shown and shown.endswith("got:real\n"), shown
    assert b"FAKE-LINE" not in reached
    # the attack works where nothing fences it
    assert all(free[k] == "ok" for k in ("write0", "read0", "write1", "read1", "ptmx")), free
    assert "FAKE-LINE" in control_shown and b"FAKE-LINE" in reached_other, control_shown


#: its own terminal: by its path, by /dev/tty; then a new terminal (glibc's openpty, which
#: opens the new slave with TIOCGPTPEER, and script(1))
_OWN_TERMINAL = r"""
t=$(tty); echo "tty=$t"
{ exec 3<>"$t" && echo reopened; } 2>/dev/null || echo reopen-refused
{ echo x >/dev/tty && echo devtty; } 2>/dev/null || echo devtty-refused
script -qc 'echo inner=$(tty)' /dev/null 2>&1; echo "script=$?"
"$0" -c 'import os; m, s = os.openpty(); print("openpty", os.ttyname(s))' 2>&1 | tail -1
"""


@pytest.mark.needs("script")
async def test_a_job_keeps_its_own_terminal_and_only_bwrap_makes_new_ones(config, backend):
    """The job's own terminal stays usable (by its path and as /dev/tty). A new terminal can
    be made under bwrap (in the sandbox's own devpts) but not under Landlock, where both the
    master (/dev/ptmx is not granted) and so every program that makes one fail with EACCES."""
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        r = await rt.exec(
            argv=["sh", "-c", _OWN_TERMINAL, INSIDE_PY], pty=True, env={"PATH": "/usr/bin:/bin"}
        )
    out = r["output"]
    assert "reopened" in out and "devtty\n" in out, out
    if kind(backend) == "landlock":
        assert "tty=/dev/pts/" in out, out
        assert "script: failed to create pseudo-terminal: Permission denied" in out, out
        assert "script=1" in out and "PermissionError: [Errno 13]" in out, out
    else:  # (bwrap shows the job's terminal as /dev/console)
        assert "inner=/dev/pts/" in out and "script=0" in out, out
        assert "openpty /dev/pts/" in out, out
