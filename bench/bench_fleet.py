"""Fleet benchmarks (issue 13) on a real 3-node Ray cluster on this machine (loopback only):

* per-call overhead of a fleet ``exec true`` over a local one (the same ``call_tool`` on an
  in-process ``conch.Runtime``), warm, interleaved; target <= +2 ms;
* 300 concurrent ``sleep 1`` jobs spread over the 3 nodes; target < 3 s from the first call to
  the last job's end.

    uv run python bench/bench_fleet.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep 127.0.0.1 as it is
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

from ray.cluster_utils import Cluster

from conch import Config
from conch.fleet import FleetRuntime
from conch.runtime import Runtime

QUICK = "--quick" in sys.argv
NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
JOBS = 300


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def overhead(fleet: FleetRuntime, local: Runtime, n: int) -> None:
    args = {"command": "true"}
    for _ in range(20):  # warm-up: executors, worker pools, caches
        await fleet.call_tool("exec", {**args, "node": "role=head"})
        await local.call_tool("exec", args)
    ours, base = [], []
    for _ in range(n):
        t = time.perf_counter()
        r = await fleet.call_tool("exec", {**args, "node": "role=head"})
        ours.append(time.perf_counter() - t)
        assert r["state"] == "exited", r
        t = time.perf_counter()
        r = await local.call_tool("exec", args)
        base.append(time.perf_counter() - t)
        assert r["state"] == "exited", r
    m, b = median_ms(ours), median_ms(base)
    print(
        f"exec true  fleet {m:7.3f} ms   local {b:7.3f} ms   overhead {m - b:+7.3f} ms   "
        f"ratio {m / b:5.2f}x  (target <= +2 ms, n={n})"
    )


async def spread(fleet: FleetRuntime) -> None:
    t = time.perf_counter()
    results = await asyncio.gather(
        *(fleet.call_tool("exec", {"command": "sleep 1", "yield_ms": 10_000}) for _ in range(JOBS))
    )
    elapsed = time.perf_counter() - t
    states = Counter(r.get("state", r.get("error", {}).get("code")) for r in results)
    per_node = sorted(Counter(r.get("node", "?")[:8] for r in results).values())
    print(
        f"{JOBS} x sleep 1 over 3 nodes: {elapsed:6.3f} s  states {dict(states)}  "
        f"per node {per_node}  ratio {elapsed / 1.0:5.2f}x of one sleep  (target < 3 s)"
    )


async def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "include_dashboard": False, "labels": {"role": "head"}},
    )
    try:
        for zone in ("a", "b"):
            cluster.add_node(labels={"zone": zone}, **NODE)
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory() as data:
            cfg = Config(fleet="ray", ray_address=cluster.address, data_dir=data, max_running=JOBS)
            async with FleetRuntime(cfg) as fleet, Runtime(Config(data_dir=data)) as local:
                await overhead(fleet, local, 50 if QUICK else 300)
                await spread(fleet)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
