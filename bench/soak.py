"""Soak: 10,000 MCP calls over stdio with the official SDK client (`mode="legacy"`), mixed like
an agent's session — one-shot exec, exec in a persistent shell, PTY exec + write, search — and
what sustained use does to the server process (docs/spec.md §2 "descriptors stay flat", §5 "memory
stays flat"):

* descriptor drift of the server (psutil num_fds) from the end of the first block to the end
  of the last, not counting the log pool's pre-created files (a background thread keeps 4-8
  ready; their count is shown apart and must stay <= 8)  (target: 0)
* RSS drift over the same span                           (target: <= 10 MB)
* p50/p99 call latency per block of 1000 calls; p99 of the last block vs the first
                                                         (target: <= 1.2x)

More jobs are run than `max_jobs` (1000) retains, so eviction is part of the soak.

    uv run python bench/soak.py [--quick] [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from mcp import Client, StdioServerParameters

MiB = 1024 * 1024


def server_pid(args: list[str]) -> int:
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cmdline()[1:] == args:
                return p.pid
        except (psutil.NoSuchProcess, IndexError):
            continue
    raise RuntimeError("server process not found")


def corpus(root: Path) -> None:
    """A small tree for `search` to walk."""
    for d in range(10):
        sub = root / f"pkg{d}"
        sub.mkdir(parents=True, exist_ok=True)
        for f in range(10):
            lines = [f"def func_{d}_{f}_{i}(x):\n    return x + {i}\n" for i in range(40)]
            (sub / f"mod{f}.py").write_text("".join(lines) + "# soak marker\n")


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def soak(calls: int, block: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="conch-soak-"))
    corpus(tmp / "src")
    args = ["-m", "conch", "serve", "--data-dir", str(tmp / "data"), "--default-cwd", str(tmp)]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ})
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {calls} calls over legacy stdio, "
        f"blocks of {block}"
    )
    async with Client(params, mode="legacy") as c:
        await c.list_tools()
        server = psutil.Process(server_pid(args))
        shell = (await c.call_tool("shell_open", {})).structured_content["shell_id"]
        latencies: list[float] = []
        rows: list[tuple[int, float, float, int, int, int]] = []
        logs = str(tmp / "data" / "logs")

        def descriptors() -> tuple[int, int]:
            """(descriptors besides open log files, open log files)"""
            total = server.num_fds()
            open_logs = sum(1 for f in server.open_files() if f.path.startswith(logs))
            return total - open_logs, open_logs

        done = 0
        i = 0

        async def timed(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            nonlocal done
            t0 = time.perf_counter()
            r = await c.call_tool(tool, arguments)
            latencies.append(time.perf_counter() - t0)
            done += 1
            if r.is_error:
                raise RuntimeError(f"{tool} {arguments}: {r.content}")
            if done % block == 0:
                lat = latencies[-block:]
                fds, open_logs = descriptors()
                rss = server.memory_info().rss
                rows.append((done, pct(lat, 0.5), pct(lat, 0.99), rss, fds, open_logs))
            return r.structured_content or {}

        while done < calls:
            kind = i % 10
            i += 1
            if kind < 4:
                await timed("exec", {"command": f"echo one-shot {i}"})
            elif kind < 6:
                await timed("exec", {"shell_id": shell, "command": f"echo shell {i}"})
            elif kind < 8:
                r = await timed("exec", {"command": "head -n 1", "pty": True, "yield_ms": 0})
                if done < calls:
                    await timed("write", {"job_id": r["job_id"], "text": f"typed {i}\n"})
            else:
                await timed("search", {"pattern": f"func_{i % 10}_", "path": "src"})
        await c.call_tool("shell_close", {"shell_id": shell})

    print(f"{'calls':>7} {'p50':>9} {'p99':>9} {'rss MB':>8} {'fds':>5} {'logs':>5}")
    for n, p50, p99, rss, fds, open_logs in rows:
        print(
            f"{n:7d} {p50 * 1000:7.2f}ms {p99 * 1000:7.2f}ms {rss / MiB:8.1f} {fds:5d} "
            f"{open_logs:5d}"
        )
    first, last = rows[0], rows[-1]
    fd_drift = last[4] - first[4]
    rss_drift = (last[3] - first[3]) / MiB
    ratio = last[2] / first[2]
    most_logs = max(r[5] for r in rows)
    print(f"descriptor drift {fd_drift:+d} (target 0); most open log files {most_logs} (<= 8)")
    print(f"RSS drift        {rss_drift:+.1f} MB (target <= 10 MB)")
    print(
        f"p99 last block {last[2] * 1000:.2f} ms vs first {first[2] * 1000:.2f} ms: "
        f"ratio {ratio:.2f}x (target <= 1.2)"
    )
    print(f"overall p50 {statistics.median(latencies) * 1000:.2f} ms over {len(latencies)} calls")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--calls", type=int, default=None)
    opts = ap.parse_args()
    calls = opts.calls or (400 if opts.quick else 10_000)
    block = 100 if opts.quick else 1000
    asyncio.run(soak(calls, block))


if __name__ == "__main__":
    main()
