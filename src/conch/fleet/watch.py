"""A fleet's watch (conch/tools/watch.py): the dashboard's data and a person's take-over, asked
of the node each job or shell lives on.

The job list merges every ready node's (ids made fleet ids, each job and shell with its
``node``; running first, then finished, each newest first); a job's log, screen and replay, and
a person's typing, hand-back, size and command in an idle shell go to the node its id names,
where that node's own watch answers them. So a fleet server's dashboard shows and takes over a
terminal on any node as a local one does. A node that is gone answers ``node_lost``, one that
does not answer ``node_unreachable``. Pure routing: no Ray here (``ask`` is the runtime's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from conch.errors import ConchError
from conch.fleet.ids import qualify, qualify_result, split
from conch.fleet.nodes import Node, NodeTable

Ask = Callable[[Node, str, tuple[Any, ...]], Awaitable[Any]]


class FleetWatch:
    def __init__(self, table: NodeTable, ask: Ask) -> None:
        self._table = table
        self._ask = ask  # (node, op, args) -> the node watch's (ok, answer or (code, message))

    async def _on_node(self, some_id: str, op: str, *args: Any) -> tuple[Node, Any]:
        local, tag = split(some_id, self._table.tags)
        node = self._table.by_tag(tag) if tag is not None else None
        if node is None:
            raise ConchError("not_found", f"unknown job or shell {some_id!r} (no node has it)")
        ok, answer = await self._ask(node, op, (local, *args))
        if not ok:
            code, message = answer
            raise ConchError(code, message)
        return node, qualify_result(answer, node.tag, node.node_id, add_node=False)

    async def jobs(self) -> dict[str, Any]:
        nodes = self._table.usable()
        replies = await asyncio.gather(
            *(self._ask(n, "jobs", ()) for n in nodes), return_exceptions=True
        )
        jobs: list[dict[str, Any]] = []
        shells: list[dict[str, Any]] = []
        for node, reply in zip(nodes, replies, strict=True):
            if isinstance(reply, BaseException) or not reply[0]:
                continue  # a node that is gone or silent lists nothing
            answer = qualify_result(reply[1], node.tag, node.node_id, add_node=True)
            jobs += answer["jobs"]
            shells += answer["shells"]
        jobs.sort(key=lambda j: j.get("started_at", ""), reverse=True)
        jobs.sort(key=lambda j: j["state"] != "running")  # (stable: newest first in each)
        return {"jobs": jobs, "shells": shells}

    async def log(self, job_id: str, cursor: int | None, style: str | None) -> dict[str, Any]:
        return (await self._on_node(job_id, "log", cursor, style))[1]

    async def screen(self, job_id: str) -> dict[str, Any]:
        return (await self._on_node(job_id, "screen"))[1]

    async def replay(self, job_id: str, t: float) -> dict[str, Any]:
        return (await self._on_node(job_id, "replay", t))[1]

    async def type_human(self, job_id: str, text: str | None, keys: Sequence[str]) -> int:
        return int((await self._on_node(job_id, "type_human", text, list(keys)))[1])

    async def hand_back(self, job_id: str) -> None:
        await self._on_node(job_id, "hand_back")

    async def resize(self, job_id: str, size: object) -> dict[str, int]:
        return (await self._on_node(job_id, "resize", size))[1]

    async def run_human(self, shell_id: str, command: str) -> str:
        node, local_job = await self._on_node(shell_id, "run_human", command)
        return qualify(str(local_job), node.tag)
