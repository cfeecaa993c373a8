"""A shell's marker channel (core/shell/channel.py): the shell gets its end as descriptor 8 and
no other descriptor, whichever way it is spawned (posix_spawn, or Popen where glibc cannot),
and Conch learns from the kernel which process wrote each message."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

import conch
from conch.core.process import libc_spawn, popen
from conch.core.process.spec import SpawnSpec
from conch.core.shell import channel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc")

#: what the child holds, then a message through descriptor 8, then one from a child of its own
REPORT = (
    "import os, sys\n"
    "print(sorted(int(f) for f in os.listdir('/proc/self/fd')), flush=True)\n"
    "os.write(8, b'from-the-child')\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.write(8, b'from-its-child'); os._exit(0)\n"
    "os.waitpid(pid, 0); print(pid, flush=True)\n"
)


def _messages(chan: channel.Channel, n: int) -> list[tuple[int | None, bytes]]:
    got: list[tuple[int | None, bytes]] = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        got += chan.receive()
        time.sleep(0.01)
    return got


@pytest.mark.parametrize("way", ["posix_spawn", "popen"])
def test_the_child_gets_the_channel_as_8_and_its_messages_name_their_writer(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if way == "popen":  # (as on a glibc before 2.34, musl or macOS)
        monkeypatch.setattr(libc_spawn, "available", lambda: False)
    elif not libc_spawn.available():
        pytest.skip("glibc's posix_spawn with addclosefrom_np (2.34+) is not here")
    mine, theirs = channel.pair()
    leak = os.open(os.devnull, os.O_RDONLY)  # (inheritable: close_fds must close it)
    os.set_inheritable(leak, True)
    r, w = os.pipe()
    try:
        pid = popen.spawn(
            SpawnSpec(
                None,
                [sys.executable, "-c", REPORT],
                {"PATH": "/usr/bin:/bin"},
                "/",
                stdin=0,
                stdout=w,
                stderr=w,
                fds=(theirs.fileno(),),
                first_fd=channel.FD,
            )
        )
    finally:
        theirs.close()
        os.close(w)
        os.close(leak)
    with os.fdopen(r) as f:
        out = f.read().splitlines()
    assert os.waitpid(pid, 0)[1] == 0, out
    got = _messages(mine, 2)
    mine.close()
    assert out[0] == "[0, 1, 2, 3, 8]", out  # (3: the listing's own directory)
    assert got == [(pid, b"from-the-child"), (int(out[1]), b"from-its-child")]


def test_a_spawner_passes_no_other_descriptor() -> None:
    with pytest.raises(ValueError):
        popen.spawn(
            SpawnSpec(None, ["true"], {}, "/", 0, 1, 2, fds=(0,), first_fd=8),
            spawner=lambda spec: 0,
        )


@pytest.mark.anyio
async def test_a_shell_spawned_by_popen_ends_its_commands(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole way where glibc cannot spawn (before 2.34, musl): the shell gets its channel
    from Popen and its commands end with their own status."""
    monkeypatch.setattr(libc_spawn, "available", lambda: False)
    async with conch.Runtime(conch.Config(data_dir=str(tmp_path / "data"))) as rt:
        sid = (await rt.call_tool("shell_open", {"shell": "bash"}))["shell_id"]
        # (while a command runs, 8 is closed: the shell keeps one copy, close-on-exec)
        probe = "ls -l /proc/$$/fd | grep -c socket; [ -e /proc/$$/fd/8 ] || echo closed; (exit 6)"
        r = await rt.call_tool("exec", {"shell_id": sid, "command": probe})
    assert r["exit_code"] == 6 and r["output"] == "1\nclosed\n", r
