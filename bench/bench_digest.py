"""What digests cost (core/output/digest.py): a job printing a build log of 100 MB
(`--quick`: 10 MB) with and without its digest (the exec's wall time, the job's own time and
the server's CPU time), `exec argv:[true]` latency while such a log is digested against idle,
and `exec echo hi` (whose output fits: no digest work) with the digest on and off. `cat` of a
file in the page cache prints as fast as a pipe moves bytes: the worst case for a digest that
scans beside the job (a compiler or a test run prints far slower).

    uv run python bench/bench_digest.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time

import conch
from conch.core import ExecRequest, ReadRequest

QUICK = "--quick" in sys.argv
SIZE = (10 if QUICK else 100) * 10**6


def build_log(path: str, size: int) -> None:
    """Compiler noise, a warning every 5,000 lines, two errors in the middle."""
    lines, n, i = [], 0, 0
    middle = size // 76 // 2  # lines are ~76 bytes
    while n < size:
        i += 1
        if i % 5000 == 0:
            line = f"src/m{i}.c:{i % 900}:5: warning: unused variable 'x{i}' [-Wunused-variable]\n"
        else:
            line = f"  CC      build/obj/module_{i}/file_{i % 97}.o  gcc -O2 -Wall -c src/f{i}.c\n"
        if i in (middle, middle + 100):
            line = f"src/bad{i}.c:12:5: error: 'y' undeclared (first use in this function)\n"
        lines.append(line)
        n += len(line)
    with open(path, "w") as f:
        f.write("".join(lines))


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def p99_ms(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


#: a program printing the log line by line (a write per line, as a build or a test run does)
LINE_BY_LINE = "\n".join(
    [
        "import sys",
        "out = sys.stdout.buffer",
        "for line in open(sys.argv[1], 'rb'):",
        "    out.write(line)",
    ]
)


async def job_wall_time(rt: conch.Runtime, path: str, rounds: int, how: str) -> None:
    """The exec's wall time (the job, then its digest), the job's own (``duration_ms``:
    start to exit) and the server's CPU time (all its threads), with the digest and
    without, interleaved in one run: the box is shared, its load moves."""
    on: dict[str, list[float]] = {"wall": [], "job": [], "cpu": []}
    off: dict[str, list[float]] = {"wall": [], "job": [], "cpu": []}
    cut = 0
    for _ in range(rounds):
        for want, into in ((None, on), (False, off)):
            t, cpu = time.perf_counter(), time.process_time()
            argv = ["cat", path] if how == "cat" else [sys.executable, "-c", LINE_BY_LINE, path]
            r = await rt.engine.exec(ExecRequest(argv=argv, yield_ms=120000, digest=want))
            into["wall"].append(time.perf_counter() - t)
            into["cpu"].append(time.process_time() - cpu)
            into["job"].append(r["duration_ms"] / 1000)
            assert r["state"] == "exited", r["state"]
            if want is None:
                d = r["digest"]
                if "incomplete" in d:  # the result's 2 s ran out (a busy box): said, counted
                    cut += 1
                else:
                    assert sum("error:" in e["text"] for e in d["lines"]) == 2, d
    for what in ("wall", "job", "cpu"):
        a, b = ms(on[what]), ms(off[what])
        print(
            f"{how:12} {SIZE / 1e6:.0f} MB, {what:4}: with digest {a:7.1f} ms   without "
            f"{b:7.1f} ms   +{(a - b) / b * 100:5.1f} %"
            + ("  (target <= +5 %" + f"; rounds {rounds})" if what == "wall" else "")
        )
    after = [w - j for w, j in zip(on["wall"], on["job"], strict=True)]
    print(f"{how:12} {SIZE / 1e6:.0f} MB: the result waited {ms(after):7.1f} ms after the exit")
    if cut:
        print(f"  {cut} of {rounds} digests incomplete: the result's time budget ran out")


async def concurrent_p99(rt: conch.Runtime, path: str, n: int) -> None:
    async def exec_true() -> float:
        t = time.perf_counter()
        await rt.engine.exec(ExecRequest(argv=["true"]))
        return time.perf_counter() - t

    for _ in range(10):
        await exec_true()
    idle = [await exec_true() for _ in range(n)]
    busy: list[float] = []
    digests = 0
    while len(busy) < n:
        job = await rt.engine.exec(ExecRequest(argv=["cat", path], yield_ms=120000, digest=False))
        digest = asyncio.ensure_future(
            rt.engine.read(ReadRequest(job["job_id"], cursor=0, max_bytes=100, digest=True))
        )
        while not digest.done():
            busy.append(await exec_true())
        assert "digest" in digest.result()
        digests += 1
    print(
        f"exec argv:[true] while {SIZE / 1e6:.0f} MB logs are digested ({digests}): p99 "
        f"{p99_ms(busy):6.2f} ms, median {ms(busy):6.2f} ms   idle: p99 {p99_ms(idle):6.2f} ms, "
        f"median {ms(idle):6.2f} ms  ({len(busy)} and {len(idle)} calls)"
    )


async def echo_hi(rt: conch.Runtime, n: int) -> None:
    on, off = [], []
    for _ in range(n):
        for want, into in ((None, on), (False, off)):
            t = time.perf_counter()
            r = await rt.engine.exec(ExecRequest(command="echo hi", digest=want))
            into.append(time.perf_counter() - t)
            assert "digest" not in r or r["digest"] is None
    print(
        f"exec echo hi: digest on {ms(on):6.3f} ms   off {ms(off):6.3f} ms   "
        f"ratio {ms(on) / ms(off):5.2f}x  (target: no difference; {n} each)"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "build.log")
        build_log(path, SIZE)
        cfg = conch.Config(data_dir=os.path.join(tmp, "data"), default_cwd=tmp, cgroup="off")
        async with conch.Runtime(cfg) as rt:
            await echo_hi(rt, 50 if QUICK else 300)
            for how in ("cat", "line by line"):
                await job_wall_time(rt, path, 2 if QUICK else 7, how)
            await concurrent_p99(rt, path, 50 if QUICK else 300)


if __name__ == "__main__":
    asyncio.run(main())
