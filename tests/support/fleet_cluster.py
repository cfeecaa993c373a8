"""A real 3-node Ray cluster on this machine, every node and the driver on 127.0.0.1.

Imported before Ray: Ray swaps 127.0.0.1 for the host's interface address unless told the
cluster is local (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), and reports usage unless told not to.
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # workers use this venv as it is

import psutil
from ray.cluster_utils import Cluster

LOOPBACK = "127.0.0.1"
NODE_ARGS: dict[str, Any] = {
    "node_ip_address": LOOPBACK,
    "num_cpus": 1,
    "object_store_memory": 80 * 1024 * 1024,
    "include_dashboard": False,
}
# processes of Ray itself (raylets, GCS, agents, idle workers): the cluster's, not a test's
RAY_NAMES = ("raylet", "gcs_server")
RAY_PREFIX = "ray::"


@dataclass
class LocalCluster:
    cluster: Cluster
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # node id -> labels

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self, **labels: str) -> Any:
        return self.cluster.add_node(labels=labels, **_worker_args())

    def remove_node(self, node: Any) -> None:
        self.cluster.remove_node(node)


def _worker_args() -> dict[str, Any]:
    return {k: v for k, v in NODE_ARGS.items() if k != "include_dashboard"}


def start_cluster() -> LocalCluster:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE_ARGS, "labels": {"role": "head"}},
    )
    cluster.add_node(labels={"zone": "a"}, **_worker_args())
    cluster.add_node(labels={"zone": "b"}, **_worker_args())
    cluster.wait_for_nodes()
    return LocalCluster(cluster)


def is_ray_process(p: psutil.Process) -> bool:
    try:
        name = p.name()
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    if name in RAY_NAMES or (cmd.startswith(RAY_PREFIX) and "NodeExecutor" not in cmd):
        return True
    return "site-packages/ray/" in cmd and "conch" not in cmd


def descendants() -> list[psutil.Process]:
    return list(psutil.Process().children(recursive=True))


def stop_cluster(c: LocalCluster, limit_s: float = 30.0) -> list[str]:
    """Shut the cluster down; what is still alive of it after limit_s."""
    c.cluster.shutdown()
    deadline = time.monotonic() + limit_s
    while True:
        reap_zombie_children()  # Ray's processes reparent to us (the suite is a subreaper)
        left = [p for p in descendants() if _alive(p)]
        if not left or time.monotonic() > deadline:
            return [_describe(p) for p in left]
        time.sleep(0.2)


def reap_zombie_children() -> None:
    for p in psutil.Process().children():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(p.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            pass


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {p.name()} {' '.join(p.cmdline())[:120]}"
    except psutil.Error:
        return f"{p.pid} (gone)"


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def non_loopback_sockets(procs: Iterator[psutil.Process] | list[psutil.Process]) -> list[str]:
    """Every inet socket of these processes that listens on or talks to a non-loopback
    address (a wildcard listener counts: it is reachable from outside)."""
    bad = []
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except psutil.Error:
            continue
        for c in conns:
            ends = [c.laddr.ip] if c.laddr else []
            if c.raddr:
                ends.append(c.raddr.ip)
            if any(not is_loopback(ip) for ip in ends):
                bad.append(f"{_describe(p)}: {c.laddr} -> {c.raddr} {c.status}")
    return bad


def leftovers() -> list[str]:
    """Descendants of this process that are not part of the Ray cluster: jobs, guards and node
    executors of a fleet that was shut down."""
    return [_describe(p) for p in descendants() if _alive(p) and not is_ray_process(p)]


CAP_SYS_NICE = 23


def may_renice() -> bool:
    """This process may lower a niceness (CAP_SYS_NICE in its effective set)."""
    with open("/proc/self/status") as f:
        eff = next(line for line in f if line.startswith("CapEff:"))
    return bool(int(eff.split()[1], 16) >> CAP_SYS_NICE & 1)


def thread_nices(pid: int) -> set[int]:
    """The niceness of each thread of a process (Linux keeps one per thread)."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(os.getpriority(os.PRIO_PROCESS, int(tid)))
        except OSError:
            pass  # the thread ended
    return out
