"""Benchmark: Conch's MCP server over stdio against a bare SDK `MCPServer`
(bench/bare_mcp_server.py), both driven by the official SDK client (`mode="legacy"`, what
hosts speak today), side by side in one run, interleaved call by call, in rounds:

1. spawn -> first `tools/list` answer                     (target: conch <= 1.1x bare)
1b. the first `tools/call` of a new server, right after its `tools/list`: `exec echo hi` vs the
   bare server spawning `bash -c 'echo hi'`, over raw JSON-RPC lines (the server's latency: the
   SDK client's own first-call cost, importing jsonschema and compiling each tool's output
   schema, is the client's, not the server's)          (target: conch <= 1.2x bare)
2. `exec echo hi` vs the bare server spawning `bash -c 'echo hi'` per call
                                                          (target: conch <= 0.8x bare)
3. `exec true` in a warm persistent shell vs the bare server's no-op tool
                                                          (target: conch <= 1.1x bare)
4. `exec` of a command printing 10 MB, default preview    (target: median <= 60 ms)
5. 8 concurrent callers of `exec echo hi` (argv, and through bash): calls/s vs the bare server
   spawning the same process per call                     (target: >= 1.1x)
6. idle RSS of the server process vs the bare server      (target: <= 1.1x)

The machine may be shared: every comparison prints the median of per-round medians (each round
alternates the two sides call by call) and the spread of the per-round ratios.

    uv run python bench/bench_mcp.py [--quick] [--result-detail lean|full] [--conch-python CMD]

``--smoke``: every step once at the smallest size, no figure worth reading (the suite's check
that the benchmark runs: a server's start is most of this benchmark's time on a loaded box).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shlex
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
Call = Callable[[], Awaitable[Any]]
DETAIL = ""


#: the command that runs the Python of Conch's server (--conch-python: e.g. this Python under
#: another glibc's loader); the bare server always runs on this Python
CONCH_PY = [sys.executable]


def conch_args(data_dir: str) -> list[str]:
    return [*CONCH_PY[1:], "-m", "conch", "serve", "--data-dir", data_dir]


def client(args: list[str]) -> Client:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    if DETAIL:
        env["CONCH_RESULT_DETAIL"] = DETAIL
    command = CONCH_PY[0] if "conch" in args else sys.executable
    return Client(StdioServerParameters(command=command, args=args, env=env), mode="legacy")


def server_pid(args: list[str]) -> int:
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cmdline()[1:] == args:
                return p.pid
        except (psutil.NoSuchProcess, IndexError):
            continue
    raise RuntimeError("server process not found")


async def timed(fn: Call) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def startup(args: list[str]) -> float:
    t0 = time.perf_counter()
    async with client(args) as c:
        await c.list_tools()
        return time.perf_counter() - t0


async def first_call(args: list[str], tool: str, arguments: dict[str, Any]) -> float:
    """Spawn a server, initialize, list its tools, then time its first tools/call answer."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    if DETAIL:
        env["CONCH_RESULT_DETAIL"] = DETAIL
    command = CONCH_PY[0] if "conch" in args else sys.executable
    proc = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        limit=1 << 24,  # one message per line: a 1 MB exec result is one line
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def ask(n: int, method: str, params: dict[str, Any]) -> None:
        stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode()
            + b"\n"
        )
        await stdin.drain()
        while True:
            msg = json.loads(await stdout.readline())
            if msg.get("id") == n:
                assert "result" in msg, msg
                return

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        }
        await ask(1, "initialize", hello)
        stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        await ask(2, "tools/list", {})
        t0 = time.perf_counter()
        await ask(3, "tools/call", {"name": tool, "arguments": arguments})
        return time.perf_counter() - t0
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


med = statistics.median


def ms(x: float) -> str:
    return f"{x * 1000:7.2f} ms"


def spread(ratios: list[float]) -> str:
    return f"rounds {min(ratios):.2f}-{max(ratios):.2f}"


async def side_by_side(ours: Call, theirs: Call, rounds: int, per_round: int) -> tuple:
    """(median of our round medians, of theirs, per-round ratios), calls interleaved."""
    mine, base, ratios = [], [], []
    for _ in range(rounds):
        a, b = [], []
        for _ in range(per_round):
            a.append(await timed(ours))
            b.append(await timed(theirs))
        mine.append(med(a))
        base.append(med(b))
        ratios.append(med(a) / med(b))
    return med(mine), med(base), ratios


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="every step once, smallest sizes")
    ap.add_argument("--result-detail", default="lean", choices=("lean", "full"))
    ap.add_argument("--conch-python", default="", help="command line of the server's Python")
    opts = ap.parse_args()
    if opts.conch_python:
        CONCH_PY[:] = shlex.split(opts.conch_python)
    global DETAIL
    DETAIL = opts.result_detail
    n_start, rounds, per_round, n_big, n_conc = (
        (1, 1, 3, 1, 16) if opts.smoke else (3, 3, 15, 5, 80) if opts.quick else (7, 5, 60, 15, 400)
    )
    data = tempfile.mkdtemp(prefix="conch-bench-")
    conch = conch_args(data)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}; legacy stdio; result_detail {opts.result_detail}; "
        f"{rounds} interleaved rounds"
    )

    # 1. startup, interleaved
    s_conch, s_bare = [], []
    if not opts.smoke:
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

    # 1b. the first call of a new server, interleaved
    f_conch, f_bare = [], []
    for _ in range(n_start):
        f_conch.append(await first_call(conch, "exec", {"command": "echo hi"}))
        f_bare.append(await first_call(BARE, "spawn", {"argv": ["bash", "-c", "echo hi"]}))
    r1b = med(f_conch) / med(f_bare)
    print(
        f"1b. first tools/call     conch {ms(med(f_conch))}  bare {ms(med(f_bare))}  "
        f"ratio {r1b:.2f}x (target <= 1.2)"
    )

    async with AsyncExitStack() as stack:
        c = await stack.enter_async_context(client(conch))
        b = await stack.enter_async_context(client(BARE))
        await c.list_tools()
        await b.list_tools()
        await asyncio.sleep(1.0)
        # 6. idle RSS (after start and one listing)
        rss_c = psutil.Process(server_pid(conch)).memory_info().rss
        rss_b = psutil.Process(server_pid(BARE)).memory_info().rss

        # 2. exec echo hi vs bare bash -c per call
        bash_echo = ["bash", "-c", "echo hi"]
        for _ in range(10):
            await c.call_tool("exec", {"command": "echo hi"})
            await b.call_tool("spawn", {"argv": bash_echo})
            await b.call_tool("noop", {})
        m, bm, ratios = await side_by_side(
            lambda: c.call_tool("exec", {"command": "echo hi"}),
            lambda: b.call_tool("spawn", {"argv": bash_echo}),
            rounds,
            per_round,
        )
        print(
            f"2. exec echo hi          conch {ms(m)}  bare bash -c {ms(bm)}  "
            f"ratio {med(ratios):.2f}x (target <= 0.8; {spread(ratios)})"
        )

        # 3. warm shell vs no-op
        sid = (await c.call_tool("shell_open", {})).structured_content["shell_id"]
        warm = {"shell_id": sid, "command": "true"}
        for _ in range(10):
            await c.call_tool("exec", warm)
        m, bm, ratios = await side_by_side(
            lambda: c.call_tool("exec", warm),
            lambda: b.call_tool("noop", {}),
            rounds,
            per_round,
        )
        print(
            f"3. warm shell exec true  conch {ms(m)}  bare noop    {ms(bm)}  "
            f"ratio {med(ratios):.2f}x (target <= 1.1; {spread(ratios)})"
        )
        await c.call_tool("shell_close", {"shell_id": sid})

        # 4. 10 MB of output, default preview
        line = "a" * 99  # `yes` adds the newline: 100-byte lines
        big = {"command": f"yes {line} | head -c 10000000"}
        t_big = []
        for _ in range(n_big):
            r = await c.call_tool("exec", big)
            s = r.structured_content
            assert s["truncated"] and s["omitted_bytes"] > 9_900_000, s.get("omitted_bytes")
            t_big.append(await timed(lambda: c.call_tool("exec", big)))
        print(f"4. exec 10 MB output     conch {ms(med(t_big))}  (target <= 60 ms)")

        # 5. 8 concurrent callers
        async def throughput(call: Call, total: int) -> float:
            left = total

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    await call()

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(8)))
            return total / (time.perf_counter() - t0)

        # the same process on both sides: `echo hi` directly, and through bash; at the
        # containment level this host gives, and (with a cgroup per job) without one
        bash_echo = ["bash", "--noprofile", "--norc", "-c", "echo hi"]
        info = (await c.call_tool("info", {})).structured_content or {}
        level = str(info.get("containment"))
        cgroup = info.get("cgroup") or {}
        if level == "cgroup":
            level += f", placement {cgroup.get('placement')}"
        print(f"   (containment: {level})")
        sides = [(c, "")]
        if info.get("containment") == "cgroup":
            off = await stack.enter_async_context(
                client([*conch_args(data + "-off"), "--cgroup", "off"])
            )
            await off.list_tools()
            sides.append((off, " (cgroup=off)"))
        for (side, note), (label, exec_args, bare_argv) in itertools.product(
            sides,
            (
                ("argv echo hi ", {"argv": ["echo", "hi"]}, ["echo", "hi"]),
                ("command echo", {"command": "echo hi"}, bash_echo),
            ),
        ):
            # alternate rounds: the box is shared and noisy, so compare medians of rounds
            rounds_c, rounds_b = [], []
            for _ in range(5):
                rounds_c.append(
                    await throughput(
                        lambda a=exec_args, s=side: s.call_tool("exec", a), n_conc // 5
                    )
                )
                rounds_b.append(
                    await throughput(
                        lambda v=bare_argv: b.call_tool("spawn", {"argv": v}), n_conc // 5
                    )
                )
            cps_c, cps_b = med(rounds_c), med(rounds_b)
            ratios = [x / y for x, y in zip(rounds_c, rounds_b, strict=True)]
            print(
                f"5. 8 callers {label}  conch {cps_c:7.1f}/s  bare spawn {cps_b:7.1f}/s  "
                f"ratio {cps_c / cps_b:.2f}x (target >= 1.1; {spread(ratios)}){note}"
            )
        print(
            f"6. idle RSS              conch {rss_c / 2**20:7.1f} MiB  bare "
            f"{rss_b / 2**20:7.1f} MiB  ratio {rss_c / rss_b:.2f}x (target <= 1.1)"
        )


if __name__ == "__main__":
    asyncio.run(main())
