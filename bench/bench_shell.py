"""Persistent-shell latency: `exec true` in a warm shell vs a bare PTY round trip through bash.

Run: uv run python bench/bench_shell.py [rounds]
Baseline: bash on a PTY (same flags) driven by this script, writing `true; printf <sentinel>` and
reading until the sentinel comes back. Target: Conch ≤ 2× the baseline.
"""

from __future__ import annotations

import asyncio
import os
import select
import statistics
import sys
import tempfile
import time

import conch
import conch.config
from conch.core.process import terminal
from conch.core.process.spec import SpawnSpec


def bare_round_trips(rounds: int) -> list[float]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color"}
    pid, master, _, _ = terminal.spawn(
        SpawnSpec(None, ["bash", "--noprofile", "--norc", "--noediting", "-i"], env, "/")
    )
    os.set_blocking(master, True)

    def until(sentinel: bytes) -> None:
        buf = b""
        while sentinel not in buf:
            select.select([master], [], [])
            buf += os.read(master, 65536)

    os.write(master, b"PS1=''; stty -echo; echo READY\n")
    until(b"READY\n")
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        # printf builds the sentinel, so the terminal's echo of the line cannot match it
        os.write(master, f"true; printf 'S%dZ' {i}\n".encode())
        until(f"S{i}Z".encode())
        times.append(time.perf_counter() - t0)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.close(master)
    return times


async def conch_round_trips(rounds: int, data_dir: str) -> tuple[list[float], list[float]]:
    async with conch.Runtime(conch.Config(data_dir=data_dir)) as rt:
        opens = []
        for _ in range(5):
            t0 = time.perf_counter()
            s = await rt.shell_open()
            opens.append(time.perf_counter() - t0)
            await rt.shell_close(s["shell_id"])
        sid = (await rt.shell_open())["shell_id"]
        for _ in range(10):
            await rt.exec(shell_id=sid, command="true")
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = await rt.exec(shell_id=sid, command="true")
            times.append(time.perf_counter() - t0)
            assert r["state"] == "exited" and r["exit_code"] == 0
        return times, opens


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--quick"]
    rounds = int(args[0]) if args else (50 if "--quick" in sys.argv else 300)
    bare = statistics.median(bare_round_trips(rounds)) * 1000
    # under the default data dir's parent, as a real server would be (not a crowded /tmp)
    base = os.path.dirname(conch.config.default_data_dir())
    os.makedirs(base, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as d:
        runs, opens = asyncio.run(conch_round_trips(rounds, d))
    ours = statistics.median(runs) * 1000
    print(f"bare bash PTY round trip     median {bare:7.3f} ms")
    print(
        f"Runtime.exec true (warm)     median {ours:7.3f} ms   ratio {ours / bare:.2f}x "
        f"(target <= 2x)"
    )
    print(f"shell_open to ready          median {statistics.median(opens) * 1000:7.3f} ms")


if __name__ == "__main__":
    main()
