"""What front ends watch of a fleet (the host protocol's view, conch/tools/host.py)."""

from __future__ import annotations

from collections.abc import Callable

from conch.core import JobView, ShellAvailable, ShellSummary
from conch.errors import ConchError
from conch.fleet.mirror import Mirrors
from conch.fleet.nodes import NodeTable
from conch.tools import resources
from conch.tools.registry import ToolRegistry


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
    ) -> None:
        self._add_listener = add_listener
        self._table = table
        self._registry = registry
        self._mirrors = mirrors

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

    def sandboxed_caller(self, client: tuple[str, int], server: tuple[str, int]) -> str | None:
        return None  # the jobs run on the nodes, never in this process's tree

    def changed_resources(self, job_id: str | None) -> list[str]:
        return resources.change_uris(self._registry, job_id)
