"""What front ends watch of a fleet (the host protocol's view, conch/tools/host.py)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from conch.core import JobView, ShellAvailable, ShellSummary
from conch.errors import ConchError
from conch.fleet.loopback import loopback_id
from conch.fleet.mirror import Mirrors
from conch.fleet.nodes import Node, NodeTable
from conch.tools import resources
from conch.tools.registry import ToolRegistry

#: how long the HTTP guard waits for the nodes that share the server's loopback
CALLER_WAIT_S = 2.0
Address = tuple[str, int]
AskCaller = Callable[[Node, Address, Address], "concurrent.futures.Future[str | None]"]


class FleetView:
    """What front ends watch of a fleet: its jobs and shells live on their nodes (``list`` and
    the resources show them), so what it holds here is none; it counts what runs, and a job
    it has heard of is its mirror (conch.fleet.mirror: what an MCP task waits on)."""

    bash: str | None = "bash"

    def __init__(
        self,
        add_listener: Callable[[Callable[[str | None], None]], Callable[[], None]],
        table: NodeTable,
        registry: ToolRegistry,
        mirrors: Mirrors,
        ask_caller: AskCaller,
    ) -> None:
        self._add_listener = add_listener
        self._table = table
        self._registry = registry
        self._mirrors = mirrors
        self._ask_caller = ask_caller
        self._loopback = loopback_id()

    def add_listener(self, fn: Callable[[str | None], None]) -> Callable[[], None]:
        return self._add_listener(fn)

    def job(self, job_id: str) -> JobView:
        mirror = self._mirrors.get(job_id)
        if mirror is None:
            raise ConchError("not_found", f"no node has reported job {job_id!r}: use `read`")
        return mirror

    def retained(self) -> list[JobView]:
        return []

    def shell_summaries(self) -> list[ShellSummary]:
        return []

    def shells_available(self) -> list[ShellAvailable]:
        return []

    @property
    def running(self) -> int:
        """Running jobs on every usable node, as each last reported."""
        return sum(n.running for n in self._table.usable())

    @property
    def retained_count(self) -> int:
        return 0

    async def type_secret(self, job_id: str, text: str) -> None:
        raise ConchError("not_found", "a fleet's jobs live on their nodes")

    def sandboxed_caller(self, client: Address, server: Address) -> str | None:
        """The sandboxed job or shell of a node holding the client end of a connection to this
        server, asked of every node whose jobs share this server's loopback (same machine and
        network namespace, or not known); None when each answers none. Fails closed: a node
        that does not answer within ``CALLER_WAIT_S`` (or fails) makes the request refused.
        Blocking (a Ray call per such node, in parallel)."""
        nodes = [
            n
            for n in self._table.usable()
            if not (n.loopback and self._loopback) or n.loopback == self._loopback
        ]
        if not nodes:
            return None
        asked: list[tuple[Node, concurrent.futures.Future[str | None]]] = []
        for node in nodes:
            try:
                asked.append((node, self._ask_caller(node, client, server)))
            except Exception as e:
                return _unanswered(node, e)
        concurrent.futures.wait([f for _, f in asked], CALLER_WAIT_S)
        for node, future in asked:
            if not future.done():
                future.cancel()
                return _unanswered(node, TimeoutError(f"no answer within {CALLER_WAIT_S:g} s"))
            error = future.exception()
            if error is not None:
                return _unanswered(node, error)
            unit = future.result()
            if unit is not None:
                return f"{unit} on node {node.node_id}"
        return None

    def changed_resources(self, job_id: str | None) -> list[str]:
        return resources.change_uris(self._registry, job_id)


def _unanswered(node: Node, error: BaseException) -> str:
    """What the guard refuses when a node that may hold the caller cannot say."""
    return (
        f"a job of node {node.node_id}, as far as Conch can tell (the node did not answer "
        f"whether one of its jobs holds this connection: {type(error).__name__}: {error})"
    )
