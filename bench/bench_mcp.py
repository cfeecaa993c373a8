"""Benchmark: Conch's MCP server over stdio against a bare SDK `MCPServer`
(bench/bare_mcp_server.py), both driven by the official SDK client (`mode="legacy"`, what
hosts speak today), measured in the same run, interleaved:

1. spawn -> first `tools/list` answer                   (target: conch <= 1.1x bare)
2. `exec` of `true` round trip vs bare `noop` round trip + a raw `bash -c true` spawn
                                                        (target: <= 1.2x)
3. `exec` of a command printing 10 MB, 16 KiB preview   (target: median <= 60 ms)
4. 8 concurrent callers of `exec echo hi` (argv, and through bash): calls/s vs the bare server
   spawning the same process per call
5. idle RSS of the server process vs the bare server    (target: <= 1.1x)

    uv run python bench/bench_mcp.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psutil
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
BARE = [str(HERE / "bare_mcp_server.py")]


def conch_args(data_dir: str) -> list[str]:
    return ["-m", "conch", "serve", "--data-dir", data_dir]


def client(args: list[str]) -> Client:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    return Client(StdioServerParameters(command=sys.executable, args=args, env=env), mode="legacy")


def server_pid(args: list[str]) -> int:
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cmdline()[1:] == args:
                return p.pid
        except (psutil.NoSuchProcess, IndexError):
            continue
    raise RuntimeError("server process not found")


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def startup(args: list[str]) -> float:
    t0 = time.perf_counter()
    async with client(args) as c:
        await c.list_tools()
        return time.perf_counter() - t0


async def bash_true() -> None:
    proc = await asyncio.create_subprocess_exec("bash", "-c", "true")
    await proc.wait()


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ms(x: float) -> str:
    return f"{x * 1000:8.2f} ms"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    n_start, n_calls, n_big, n_conc = (3, 30, 5, 80) if opts.quick else (9, 200, 15, 400)
    data = tempfile.mkdtemp(prefix="conch-bench-")
    conch = conch_args(data)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; legacy stdio; medians")

    # 1. startup, interleaved
    s_conch, s_bare = [], []
    await startup(conch)
    await startup(BARE)  # warm the page cache and .pyc files
    for _ in range(n_start):
        s_conch.append(await startup(conch))
        s_bare.append(await startup(BARE))
    r1 = med(s_conch) / med(s_bare)
    print(
        f"1. spawn -> tools/list   conch {ms(med(s_conch))}  bare {ms(med(s_bare))}  "
        f"ratio {r1:.2f}x (target <= 1.1)"
    )

    async with AsyncExitStack() as stack:
        c = await stack.enter_async_context(client(conch))
        b = await stack.enter_async_context(client(BARE))
        await c.list_tools()
        await b.list_tools()
        await asyncio.sleep(1.0)
        # 5. idle RSS (after start and one listing)
        rss_c = psutil.Process(server_pid(conch)).memory_info().rss
        rss_b = psutil.Process(server_pid(BARE)).memory_info().rss

        # 2. exec true vs noop + bash -c true
        t_exec, t_noop, t_bash = [], [], []
        for _ in range(10):
            await c.call_tool("exec", {"argv": ["true"]})
            await b.call_tool("noop", {})
            await bash_true()
        for _ in range(n_calls):
            t_exec.append(await timed(lambda: c.call_tool("exec", {"command": "true"})))
            t_noop.append(await timed(lambda: b.call_tool("noop", {})))
            t_bash.append(await timed(bash_true))
        base = med(t_noop) + med(t_bash)
        r2 = med(t_exec) / base
        print(
            f"2. exec true             conch {ms(med(t_exec))}  noop {ms(med(t_noop))} + "
            f"bash -c true {ms(med(t_bash))}  ratio {r2:.2f}x (target <= 1.2)"
        )

        # 3. 10 MB of output, 16 KiB preview
        line = "a" * 99  # `yes` adds the newline: 100-byte lines
        big = {"command": f"yes {line} | head -c 10000000", "max_output_bytes": 16384}
        t_big = []
        for _ in range(n_big):
            r = await c.call_tool("exec", big)
            s = r.structured_content
            assert s["total_bytes"] == 10_000_000 and s["truncated"], (s["state"], s["total_bytes"])
            t_big.append(await timed(lambda: c.call_tool("exec", big)))
        print(f"3. exec 10 MB output     conch {ms(med(t_big))}  (target <= 60 ms)")

        # 4. 8 concurrent callers
        async def throughput(call: Callable[[], Awaitable[Any]], total: int) -> float:
            left = total

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    await call()

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(8)))
            return total / (time.perf_counter() - t0)

        # the same process on both sides: `echo hi` directly, and through bash
        bash_echo = ["bash", "--noprofile", "--norc", "-c", "echo hi"]
        for label, exec_args, bare_argv in (
            ("argv echo hi ", {"argv": ["echo", "hi"]}, ["echo", "hi"]),
            ("command echo", {"command": "echo hi"}, bash_echo),
        ):
            # alternate rounds: the box is shared and noisy, so compare medians of rounds
            rounds_c, rounds_b = [], []
            for _ in range(5):
                rounds_c.append(
                    await throughput(lambda a=exec_args: c.call_tool("exec", a), n_conc // 5)
                )
                rounds_b.append(
                    await throughput(
                        lambda v=bare_argv: b.call_tool("spawn", {"argv": v}), n_conc // 5
                    )
                )
            cps_c, cps_b = med(rounds_c), med(rounds_b)
            print(
                f"4. 8 callers {label}  conch {cps_c:8.1f}/s  bare spawn {cps_b:8.1f}/s  "
                f"ratio {cps_c / cps_b:.2f}x (target >= 1)"
            )
        print(
            f"5. idle RSS              conch {rss_c / 2**20:8.1f} MiB  bare "
            f"{rss_b / 2**20:8.1f} MiB  ratio {rss_c / rss_b:.2f}x (target <= 1.1)"
        )


if __name__ == "__main__":
    asyncio.run(main())
