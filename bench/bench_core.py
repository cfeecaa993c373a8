"""Core benchmarks (issue 2): each prints a median and a ratio against a baseline measured in
the same run.

    uv run python bench/bench_core.py [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

import conch
import conch.config
from conch.core import CallContext, ExecRequest

QUICK = "--quick" in sys.argv
SMOKE = "--smoke" in sys.argv  # every step at the smallest size (the suite's check it runs)
CALLS = 10 if SMOKE else 50 if QUICK else 300


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def floor_once(loop: asyncio.AbstractEventLoop, null: int) -> None:
    """The least an asyncio server does to run `true` and know its output and status: one
    posix_spawn with two pipes, a pidfd, and a wait on the loop for all three (no job, no log,
    no cgroup)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    fa = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
    fa.append((os.POSIX_SPAWN_DUP2, err_w, 2))
    pid = os.posix_spawn("/bin/true", ["true"], os.environ, file_actions=fa, setsid=True)
    os.close(out_w)
    os.close(err_w)
    pidfd = os.pidfd_open(pid)
    done = loop.create_future()
    left = 3

    def ready(fd: int, is_pid: bool) -> None:
        nonlocal left
        if is_pid:
            os.waitid(os.P_PIDFD, fd, os.WEXITED)  # type: ignore[attr-defined]
        elif os.read(fd, 65536):
            return
        loop.remove_reader(fd)
        os.close(fd)
        left -= 1
        if not left:
            done.set_result(None)

    for fd in (out_r, err_r):
        os.set_blocking(fd, False)
        loop.add_reader(fd, ready, fd, False)
    loop.add_reader(pidfd, ready, pidfd, True)
    await done


async def bench_floor(n: int, rounds: int = 5) -> None:
    """What asyncio itself costs against subprocess.run: the floor under `Runtime.exec`."""
    if not hasattr(os, "pidfd_open") or not os.path.exists("/bin/true"):
        print("asyncio floor: needs Linux (pidfd)")
        return
    loop = asyncio.get_running_loop()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        ratios, floors, runs = [], [], []
        for _ in range(rounds):
            a, b = [], []
            for _ in range(n // rounds):
                t = time.perf_counter()
                await floor_once(loop, null)
                a.append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run(["true"])
                b.append(time.perf_counter() - t)
            floors.append(median_ms(a))
            runs.append(median_ms(b))
            ratios.append(floors[-1] / runs[-1])
    finally:
        os.close(null)
    print(
        f"asyncio floor (spawn, 2 pipes, pidfd) {statistics.median(floors):7.3f} ms   "
        f"subprocess.run {statistics.median(runs):7.3f} ms   ratio "
        f"{statistics.median(ratios):5.2f}x  (no target: the least any asyncio server pays; "
        f"rounds {min(ratios):.2f}-{max(ratios):.2f})"
    )


def level_line(rt: conch.Runtime) -> str:
    """Which containment level (and, with cgroups, which placement) the lines below measure."""
    c = rt.engine.spawn.containment
    if c is None or c.level != "cgroup":
        return "-- containment: process-group (no cgroup per job)"
    how = "spawned into it (clone3)" if c.places_itself else "entered by a sh"
    return f"-- containment: a cgroup per job, {how}; {os.confstr('CS_GNU_LIBC_VERSION')}"


async def bench_exec_true(
    rt: conch.Runtime, n: int, rounds: int = 5, *, only_argv: bool = False
) -> None:
    bash_true = ["bash", "--noprofile", "--norc", "-c", "true"]
    cases = [
        ("argv ['true']", {"argv": ["true"]}, ["true"], 1.2),
        ("command 'true'", {"command": "true", "warm": False}, bash_true, 1.5),
        ("command (warm)", {"command": "true", "warm": True}, bash_true, 1.0),
    ]

    async def run(args: dict) -> dict:  # the engine's own exec (warm=False: a process anew)
        req = ExecRequest(**{k: v for k, v in args.items() if k != "warm"})
        return dict(await rt.engine.exec(req, CallContext(warm=args.get("warm", True))))

    for label, kwargs, baseline, target in cases[:1] if only_argv else cases:
        for _ in range(10):  # warm-up
            await run(kwargs)
            subprocess.run(baseline)
        mine, theirs = [], []
        for _ in range(rounds):  # interleaved call by call, in rounds: the box is shared
            ours, base = [], []
            for _ in range(n // rounds):
                t = time.perf_counter()
                r = await run(kwargs)
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
    assert r["state"] == "exited" and rt.engine.job(r["job_id"]).log.size() == size, r
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
            print(level_line(rt))
            at_cgroup = (
                rt.engine.spawn.containment is not None
                and rt.engine.spawn.containment.level == "cgroup"
            )
            await bench_exec_true(rt, CALLS)
            await bench_gigabyte(rt, (32 if SMOKE else 256 if QUICK else 1024) * 2**20)
            await bench_concurrent_sleeps(rt, 20 if SMOKE else 200)
        await bench_floor(CALLS)
        if at_cgroup:
            # the same spawn without a cgroup per job, for comparison (setting cgroup=off)
            off = dataclasses.replace(cfg, cgroup="off", data_dir=os.path.join(d, "data-off"))
            async with conch.Runtime(off) as rt:
                print(level_line(rt))
                await bench_exec_true(rt, CALLS, only_argv=True)


if __name__ == "__main__":
    asyncio.run(main())
