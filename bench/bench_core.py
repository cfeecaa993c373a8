"""Core benchmarks (issue 2): each prints a median and a ratio against a baseline measured in
the same run.

    uv run python bench/bench_core.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

import conch
import conch.config

QUICK = "--quick" in sys.argv


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def bench_exec_true(rt: conch.Runtime, n: int, rounds: int = 5) -> None:
    bash_true = ["bash", "--noprofile", "--norc", "-c", "true"]
    for label, kwargs, baseline, target in (
        ("argv ['true']", {"argv": ["true"]}, ["true"], 1.2),
        ("command 'true'", {"command": "true", "warm": False}, bash_true, 1.5),
        ("command (warm)", {"command": "true", "warm": True}, bash_true, 1.0),
    ):
        for _ in range(10):  # warm-up
            await rt.exec(**kwargs)
            subprocess.run(baseline)
        mine, theirs = [], []
        for _ in range(rounds):  # interleaved call by call, in rounds: the box is shared
            ours, base = [], []
            for _ in range(n // rounds):
                t = time.perf_counter()
                r = await rt.exec(**kwargs)
                ours.append(time.perf_counter() - t)
                assert r["state"] == "exited"
                t = time.perf_counter()
                subprocess.run(baseline)
                base.append(time.perf_counter() - t)
            mine.append(median_ms(ours))
            theirs.append(median_ms(base))
        m, b = statistics.median(mine), statistics.median(theirs)
        ratios = [x / y for x, y in zip(mine, theirs, strict=True)]
        print(
            f"exec {label:<16} Runtime.exec {m:7.3f} ms   subprocess.run {b:7.3f} ms   "
            f"ratio {statistics.median(ratios):5.2f}x  (target <= {target}x; rounds "
            f"{min(ratios):.2f}-{max(ratios):.2f})"
        )


async def bench_gigabyte(rt: conch.Runtime, size: int) -> None:
    me = psutil.Process()
    with tempfile.TemporaryDirectory(dir=rt.config.data_dir) as d:
        target = os.path.join(d, "raw")
        t = time.perf_counter()
        subprocess.run(f"head -c {size} /dev/zero > {target}", shell=True, check=True)
        raw_s = time.perf_counter() - t
        os.unlink(target)
    rss0 = me.memory_info().rss
    t = time.perf_counter()
    r = await rt.exec(command=f"head -c {size} /dev/zero", yield_ms=120000, timeout_ms=0)
    ours_s = time.perf_counter() - t
    rss1 = me.memory_info().rss
    assert r["state"] == "exited" and rt.job(r["job_id"]).log.size() == size, r
    mib = size / 2**20
    print(
        f"{mib:.0f} MiB into a job log: {mib / ours_s:7.0f} MiB/s   head -c > file: "
        f"{mib / raw_s:7.0f} MiB/s   rate ratio {raw_s / ours_s:4.2f}x (target >= 0.5x)   "
        f"RSS growth {(rss1 - rss0) / 2**20:.1f} MiB (target <= 20)"
    )


async def bench_concurrent_sleeps(rt: conch.Runtime, n: int) -> None:
    t = time.perf_counter()
    results = await asyncio.gather(
        *(rt.exec(argv=["sleep", "1"], yield_ms=60000) for _ in range(n))
    )
    wall = time.perf_counter() - t
    assert all(r["state"] == "exited" and r["exit_code"] == 0 for r in results)
    print(f"{n} concurrent `sleep 1` jobs: all done in {wall:.2f} s wall (target < 2 s)")


async def main() -> None:
    # under the default data dir's parent, as a real server would be (not a crowded /tmp)
    base = os.path.dirname(conch.config.default_data_dir())
    os.makedirs(base, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as d:
        cfg = conch.Config(
            data_dir=os.path.join(d, "data"),
            max_running=256,
            max_log_bytes=2 * 2**30,
            retention_s=5,
        )
        async with conch.Runtime(cfg) as rt:
            await bench_exec_true(rt, 50 if QUICK else 300)
            await bench_gigabyte(rt, (256 if QUICK else 1024) * 2**20)
            await bench_concurrent_sleeps(rt, 200)


if __name__ == "__main__":
    asyncio.run(main())
