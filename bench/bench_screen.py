"""What the terminal screens and recordings (docs/spec.md §8) cost a busy PTY job.

Run: uv run python bench/bench_screen.py [--quick]

A busy job prints text as fast as it can on a PTY (`yes` lines through `head -c`). Figures, each
against a baseline of the same run:

1. unwatched: Conch's PTY job vs a bare PTY read loop of the same program (this script reading
   the master itself). The only screen-related work on this path is the recording's timing mark
   per chunk of output (core/output/cast.py); its share is reported on its own too.
2. watched: the same job while a screen is looked at every 250 ms (the dashboard's poll), vs
   unwatched; plus the emulator's busy time as a share of the job's run time.
3. why the emulator is not on the output path: pyte's speed on that output and on `top`'s, and
   the share of the job's run time it would cost to emulate every byte (target for anything on
   the path: <= 5 %).
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
from conch.core.output.cast import Recording
from conch.core.output.screen import Screen
from conch.core.process import terminal
from conch.core.process.spec import SpawnSpec

QUICK = "--quick" in sys.argv
SIZE = (8 if QUICK else 64) * 1024 * 1024
ROUNDS = 3 if QUICK else 5
PROGRAM = [
    "sh",
    "-c",
    f"yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c {SIZE}",
]


def bare_run() -> tuple[float, int]:
    """Seconds to read all of PROGRAM's output from a PTY master, and how many reads it took."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color"}
    t0 = time.perf_counter()
    pid, master, _, _ = terminal.spawn(SpawnSpec(None, PROGRAM, env, "/"))
    got = reads = 0
    while True:
        select.select([master], [], [])
        data = terminal.read_master(master)
        if data is None:
            break
        got += len(data)
        reads += 1
    elapsed = time.perf_counter() - t0
    os.waitpid(pid, 0)
    os.close(master)
    assert got == SIZE, got
    return elapsed, reads


async def conch_run(rt: conch.Runtime, watch: bool) -> tuple[float, float, int]:
    """Seconds for the job to finish, seconds spent in looks at its screen, bytes emulated."""
    engine = rt.engine
    fed0 = engine.screens.bytes_fed
    t0 = time.perf_counter()
    job = await rt.exec(argv=PROGRAM, pty=True, yield_ms=0)
    jid = job["job_id"]
    looking = 0.0
    while True:
        r = await rt.read(jid, wait_ms=250, until="exit", max_bytes=1)
        if watch:
            s = time.perf_counter()
            engine.screen(jid)
            looking += time.perf_counter() - s
        if r["state"] != "running":
            break
    elapsed = time.perf_counter() - t0
    total = (await rt.read(jid, max_bytes=1))["total_bytes"]
    assert total == SIZE, total
    return elapsed, looking, engine.screens.bytes_fed - fed0


def mark_cost(calls: int) -> float:
    """Seconds for ``calls`` recording marks at a busy job's pace (most coalesce)."""
    rec = Recording(50, 200)
    t0 = time.perf_counter()
    for i in range(calls):
        rec.mark(i * 4096)
    return time.perf_counter() - t0


def emulator_speed(data: bytes) -> float:
    """Bytes a second pyte (Conch's Screen) takes in."""
    s = Screen(50, 200)
    t0 = time.perf_counter()
    s.feed(data)
    return len(data) / (time.perf_counter() - t0)


async def top_output(rt: conch.Runtime) -> bytes:
    job = await rt.exec(argv=["top", "-d", "0.2"], pty=True, yield_ms=0)
    await asyncio.sleep(1.5 if QUICK else 3)
    await rt.signal(job["job_id"], "kill")
    r = await rt.read(job["job_id"], cursor=0, raw=True, max_bytes=conch.config.MAX_OUTPUT_BYTES)
    return r["output"].encode()


async def conch_figures(data_dir: str) -> dict[str, list[float] | bytes]:
    out: dict[str, list[float] | bytes] = {"plain": [], "watched": [], "looking": [], "fed": []}
    async with conch.Runtime(conch.Config(data_dir=data_dir, max_log_bytes=2 * SIZE)) as rt:
        await conch_run(rt, False)  # warm up
        for _ in range(ROUNDS):
            plain = await conch_run(rt, False)
            watched = await conch_run(rt, True)
            out["plain"].append(plain[0])  # type: ignore[union-attr]
            out["watched"].append(watched[0])  # type: ignore[union-attr]
            out["looking"].append(watched[1])  # type: ignore[union-attr]
            out["fed"].append(watched[2])  # type: ignore[union-attr]
        out["top"] = await top_output(rt)
    return out


def main() -> None:
    bare = [bare_run() for _ in range(ROUNDS)]
    bare_s = statistics.median(b[0] for b in bare)
    reads = int(statistics.median(b[1] for b in bare))
    base = os.path.dirname(conch.config.default_data_dir())
    os.makedirs(base, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as d:
        fig = asyncio.run(conch_figures(d))
    plain = statistics.median(fig["plain"])  # type: ignore[arg-type]
    watched = statistics.median(fig["watched"])  # type: ignore[arg-type]
    looking = statistics.median(fig["looking"])  # type: ignore[arg-type]
    fed = statistics.median(fig["fed"])  # type: ignore[arg-type]
    mb = SIZE / 1e6
    print(f"busy PTY job: {mb:.0f} MB of text, {reads} reads of the master (median of {ROUNDS})")
    print(f"1. bare PTY read loop          median {bare_s * 1000:8.1f} ms  {mb / bare_s:7.1f} MB/s")
    print(
        f"   Conch pty job, unwatched    median {plain * 1000:8.1f} ms  {mb / plain:7.1f} MB/s"
        f"   ratio {plain / bare_s:.2f}x vs bare"
    )
    marks = mark_cost(reads)
    print(
        f"   recording marks ({reads} calls)      {marks * 1000:8.3f} ms"
        f"   ratio {marks / plain * 100:.3f} % of the job's run time (target <= 5 %)"
    )
    print(
        f"2. Conch pty job, watched      median {watched * 1000:8.1f} ms  {mb / watched:7.1f} MB/s"
        f"   ratio {watched / plain:.2f}x vs unwatched"
    )
    print(
        f"   emulator while watched      median {looking * 1000:8.1f} ms"
        f"   ratio {looking / watched * 100:.1f} % of the job's run time; "
        f"{fed / 1e3:.0f} KB of {mb * 1e3:.0f} KB emulated"
    )
    sample = (PROGRAM[2].split("'")[1] + "\n").encode() * 4000
    text_speed = emulator_speed(sample)
    top = fig["top"]
    assert isinstance(top, bytes) and top
    top_speed = emulator_speed(top)
    every = SIZE / text_speed
    print(
        f"3. pyte on this text           {text_speed / 1e6:8.2f} MB/s;  on top's output "
        f"{top_speed / 1e6:.2f} MB/s ({len(top) / 1e3:.0f} KB)"
    )
    print(
        f"   emulating every byte        {every * 1000:8.0f} ms"
        f"   ratio {every / plain * 100:.0f} % of the job's run time (why it runs only on a look)"
    )


if __name__ == "__main__":
    main()
