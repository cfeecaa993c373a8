"""Containment benchmarks (issues 12, 22): what the cgroup level and the sandbox backends
(bwrap, and Landlock + seccomp: spawned by a restricted thread of the server, or, for a job
with a cgroup on glibc < 2.39, by its fork server) add to the spawn of `exec argv=["true"]`.
Each variant runs interleaved with the baseline (no cgroup, no sandbox) in the same run, so
both see the same machine load; medians and differences printed.

    uv run python bench/bench_sandbox.py [--quick]

``--smoke``: every variant once at the smallest size (the suite's check that it runs).

Targets: bwrap-sandboxed `exec true` <= +5 ms over unsandboxed, Landlock-sandboxed <= +3 ms
(issue 22); the cgroup level adds the pre-exec
placement (a fork instead of vfork, one write per cgroup) and a mkdir/rmdir per job.

The last variants set the sandbox as the server's policy (no per-call value): there, at the
cgroup level on glibc < 2.39, a warm process started under it may serve the call
(core/jobs/warm.py).

Two rhythms: back to back, and sparse (50 ms apart, like an agent's calls). Moving a process
into a cgroup takes the kernel's cgroup_threadgroup_rwsem for writing, which waits for an RCU
grace period when no migration happened just before: the sparse figures show that cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import sys
import tempfile
import time

import conch

QUICK = "--quick" in sys.argv
SMOKE = "--smoke" in sys.argv
N = 2 if SMOKE else 15 if QUICK else 150
WARM_UP = 1 if SMOKE else 5

BW, LL = {"sandbox_backend": "bwrap"}, {"sandbox_backend": "landlock"}
VARIANTS = [
    ("cgroup level, no sandbox", {"cgroup": "auto"}, {}),
    ("bwrap, no cgroup, read-only", {"cgroup": "off", **BW}, {"sandbox": "read-only"}),
    ("landlock, no cgroup, read-only", {"cgroup": "off", **LL}, {"sandbox": "read-only"}),
    ("bwrap, cgroup, read-only", {"cgroup": "auto", **BW}, {"sandbox": "read-only"}),
    ("landlock, cgroup, read-only", {"cgroup": "auto", **LL}, {"sandbox": "read-only"}),
    (
        "bwrap, cgroup, ws-write, net off",
        {"cgroup": "auto", **BW},
        {"sandbox": "workspace-write", "network": "off"},
    ),
    (
        "landlock, cgroup, ws-write, net off",
        {"cgroup": "auto", **LL},
        {"sandbox": "workspace-write", "network": "off"},
    ),
    # sandbox_sockets: the connect filter, its listener sent back, a supervisor thread per job
    # (bwrap: a Python shim inside the sandbox loads the filters and hands the listener over)
    (
        "bwrap, cgroup, net off, sockets",
        {"cgroup": "auto", **BW, "sandbox_sockets": "<socket>"},
        {"sandbox": "workspace-write", "network": "off"},
    ),
    (
        "landlock, no cgroup, net off, sockets",
        {"cgroup": "off", **LL, "sandbox_sockets": "<socket>"},
        {"sandbox": "workspace-write", "network": "off"},
    ),
    (
        "landlock, cgroup, net off, sockets",
        {"cgroup": "auto", **LL, "sandbox_sockets": "<socket>"},
        {"sandbox": "workspace-write", "network": "off"},
    ),
    # the server's own policy (setting), no per-call sandbox: where a warm process may serve
    # the call (Landlock at the cgroup level on glibc < 2.39: core/jobs/warm.py)
    (
        "landlock, cgroup, read-only, setting",
        {"cgroup": "auto", **LL, "sandbox": "read-only"},
        {},
    ),
    (
        "landlock, cgroup, ws-write, net off, setting",
        {"cgroup": "auto", **LL, "sandbox": "workspace-write", "network": "off"},
        {},
    ),
    (
        "landlock, no cgroup, read-only, setting",
        {"cgroup": "off", **LL, "sandbox": "read-only"},
        {},
    ),
]


def target(settings: dict[str, str]) -> int:
    return 3 if settings.get("sandbox_backend") == "landlock" else 5


def sandboxed(settings: dict[str, str], args: dict[str, str]) -> bool:
    return bool(args) or "sandbox" in settings


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(rt: conch.Runtime, args: dict[str, str]) -> float:
    t = time.perf_counter()
    r = await rt.exec(argv=["true"], **args)
    dt = time.perf_counter() - t
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    return dt


async def main() -> None:
    with contextlib.ExitStack() as stack:
        data = stack.enter_context(tempfile.TemporaryDirectory())
        ws = stack.enter_context(tempfile.TemporaryDirectory(dir="/var/tmp"))
        base_cfg = conch.Config(data_dir=data, default_cwd=ws, cgroup="off")
        listening = stack.enter_context(socket.socket(socket.AF_UNIX))
        listening.bind(os.path.join(data, "allowed.sock"))
        listening.listen(1)
        async with conch.Runtime(base_cfg) as base:
            for _ in range(WARM_UP):
                await timed(base, {})
            for label, settings, args in VARIANTS:
                given: dict[str, object] = dict(settings)
                if given.get("sandbox_sockets") == "<socket>":
                    given["sandbox_sockets"] = [listening.getsockname()]
                cfg = conch.Config(data_dir=data, default_cwd=ws, **given)  # type: ignore[arg-type]
                async with conch.Runtime(cfg) as rt:
                    info = await rt.info()
                    level = info["containment"]
                    if sandboxed(settings, args):
                        assert info["sandbox"]["backend"] == settings["sandbox_backend"], info
                    for _ in range(WARM_UP):
                        await timed(rt, args)
                    for rhythm, gap in (("dense", 0.0), ("sparse", 0.05)):
                        ours, ref = [], []
                        for _ in range(N if gap == 0 else max(2 if SMOKE else 10, N // 3)):
                            await asyncio.sleep(gap)
                            ours.append(await timed(rt, args))
                            await asyncio.sleep(gap)
                            ref.append(await timed(base, {}))
                        m, b = median_ms(ours), median_ms(ref)
                        print(
                            f"exec true {rhythm:<6} {label:<36} [{level}] {m:7.3f} ms   "
                            f"baseline {b:7.3f} ms   +{m - b:6.3f} ms   ratio {m / b:5.2f}x"
                            + (
                                f"  (target <= +{target(settings)} ms)"
                                if sandboxed(settings, args)
                                else ""
                            ),
                            flush=True,
                        )


if __name__ == "__main__":
    asyncio.run(main())
