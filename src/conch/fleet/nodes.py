"""The fleet's view of the cluster: one entry per Ray node, and which node a call goes to.

Pure: the Ray side (conch.fleet.runtime) feeds it ``ray.nodes()`` rows and load reports.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conch.errors import ConchError
from conch.fleet.ids import node_tag

_MIN_PREFIX = 4


@dataclass
class Node:
    node_id: str
    tag: str
    alive: bool
    labels: dict[str, str]
    address: str = ""
    hostname: str = ""
    pid: int = 0  # the executor's process on the node
    loopback: str = ""  # which loopback the executor shares (conch.fleet.loopback)
    running: int = 0  # running jobs, as last reported by the node's executor
    pending: int = 0  # calls placed on it that have not answered yet
    executor: Any = None  # the Ray actor handle, once started
    channel: Any = None  # its calls' channel (conch.fleet.channel), once started
    ready: bool = False  # the executor answered its start call
    lost_reason: str = ""
    executor_died: bool = False  # on a node still alive: a new executor is due

    @property
    def load(self) -> int:
        return self.running + self.pending

    def describe(self) -> dict[str, Any]:
        """The node as ``info.nodes`` shows it."""
        return {
            "node": self.node_id,
            "tag": self.tag,
            "alive": self.alive and not self.lost_reason,
            "address": self.address,
            "hostname": self.hostname,
            "executor_pid": self.pid,
            "labels": dict(self.labels),
            "running_jobs": self.running,
            # tool calls sent to this executor, and the Ray calls that carried them
            "calls": self.channel.calls if self.channel is not None else 0,
            "ray_calls": self.channel.ray_calls if self.channel is not None else 0,
        }


@dataclass
class NodeTable:
    nodes: dict[str, Node] = field(default_factory=dict)  # by node id
    # earlier executors of nodes still in the cluster: their ids keep answering node_lost
    retired: list[Node] = field(default_factory=list)
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    def by_tag(self, tag: str) -> Node | None:
        for n in (*self.nodes.values(), *self.retired):
            if n.tag == tag:
                return n
        return None

    @property
    def tags(self) -> set[str]:
        return {n.tag for n in (*self.nodes.values(), *self.retired)}

    def with_dead_executors(self) -> list[Node]:
        """Alive nodes whose executor died (its jobs and shells are lost)."""
        return [n for n in self.nodes.values() if n.alive and n.executor_died]

    def replace(self, old: Node) -> Node:
        """A new entry for ``old``'s node, under a tag of its own, for a new executor; ``old``
        stays known (retired), so the ids it gave out still answer node_lost."""
        self.retired.append(old)
        new = Node(
            node_id=old.node_id,
            tag=node_tag(old.node_id, self.tags),
            alive=True,
            labels=dict(old.labels),
            address=old.address,
        )
        self.nodes[old.node_id] = new
        return new

    def update(self, rows: Iterable[Mapping[str, Any]]) -> tuple[list[Node], list[Node]]:
        """Merge ``ray.nodes()`` rows; returns (nodes that need an executor, nodes just lost)."""
        fresh: list[Node] = []
        lost: list[Node] = []
        for row in rows:
            node_id = str(row.get("NodeID", ""))
            if not node_id:
                continue
            alive = bool(row.get("Alive", False))
            node = self.nodes.get(node_id)
            if node is None:
                if not alive:
                    continue  # died before we ever saw it: nothing of ours ran there
                node = Node(
                    node_id=node_id,
                    tag=node_tag(node_id, self.tags),
                    alive=True,
                    labels=_labels(row),
                    address=str(row.get("NodeManagerAddress", "")),
                )
                self.nodes[node_id] = node
                fresh.append(node)
                continue
            if node.alive and not alive:
                node.alive = False
                node.lost_reason = node.lost_reason or "the node left the cluster"
                lost.append(node)
            node.labels = _labels(row) or node.labels
        return fresh, lost

    def usable(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.alive and n.ready and not n.lost_reason]

    def choose(self, spec: str | None) -> Node:
        """The node a new job or shell goes to: ``spec`` is a node id (or a unique prefix of
        one), ``key=value`` or a label value; none means any. Among matches, the least loaded
        alive node (ties taken in turn)."""
        if spec is None:
            matches = list(self.nodes.values())
        else:
            matches = self.match(spec)
            if not matches:
                known = ", ".join(sorted(n.node_id for n in self.nodes.values())) or "none"
                raise ConchError(
                    "invalid_argument",
                    f"node {spec!r} matches no node id or label (nodes: {known})",
                )
        candidates = [n for n in matches if n.alive and n.ready and not n.lost_reason]
        if not candidates:
            if spec is not None and all(not n.alive or n.lost_reason for n in matches):
                raise ConchError("node_lost", f"node {spec!r} is no longer in the cluster")
            raise ConchError("node_unreachable", "no node of the fleet is ready yet")
        turn = next(self._turn)
        k = len(candidates)
        ordered = candidates[turn % k :] + candidates[: turn % k]
        return min(ordered, key=lambda n: n.load)

    def match(self, spec: str) -> list[Node]:
        nodes = list(self.nodes.values())
        exact = [n for n in nodes if spec in (n.node_id, n.tag)]
        if exact:
            return exact
        if len(spec) >= _MIN_PREFIX:
            prefixed = [n for n in nodes if n.node_id.startswith(spec)]
            if len(prefixed) == 1:
                return prefixed
        if "=" in spec:
            key, _, value = spec.partition("=")
            return [n for n in nodes if n.labels.get(key.strip()) == value.strip()]
        return [n for n in nodes if spec in n.labels.values()]


def _labels(row: Mapping[str, Any]) -> dict[str, str]:
    raw = row.get("Labels") or {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
