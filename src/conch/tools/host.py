"""The host protocol: what the front ends (MCP, HTTP, CLI) are typed against.

``conch.Runtime`` (an engine on this machine) and the fleet's runtime (SPEC §9b, the engines of
a cluster) both implement it; a front end never knows which it has. Everything in it is about
the catalogue (tools, resources, calls) or a read-only view of what runs, so that no front end
holds a live job or a driver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from conch.config import Config
from conch.core import JobView, ShellAvailable, ShellSummary
from conch.tools.context import ToolContext
from conch.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from conch.tools.call import ToolOutcome


class Host(Protocol):
    config: Config
    registry: ToolRegistry  # the catalogue: tools, resources, profile state

    @property
    def closed(self) -> bool: ...

    @property
    def default_cwd(self) -> str: ...

    @property
    def bash(self) -> str | None: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Host: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def tools(self) -> list[dict[str, Any]]:
        """Every tool of the active profiles as MCP ``tools/list`` shows it."""
        ...

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome: ...

    async def info(self) -> Mapping[str, Any]: ...

    def signal(
        self, job_id: str, signal: str = "terminate", *, wait_ms: int = 2000
    ) -> Awaitable[dict[str, Any]]:
        """SPEC §8's ``signal`` (the dashboard's stop button, a task's cancel)."""
        ...

    async def list_resources(self, *, seed_only: bool = False) -> list[dict[str, Any]]: ...

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]: ...

    def add_listener(self, fn: Callable[[str | None], None]) -> Callable[[], None]:
        """fn(job_id or None) on every job or shell change; returns an unsubscribe."""
        ...

    def job(self, job_id: str) -> JobView:
        """A job of this host, read-only (``not_found`` for one it does not hold)."""
        ...

    def retained(self) -> list[JobView]:
        """The jobs this host holds here (a fleet's live on their nodes: none)."""
        ...

    def shell_summaries(self) -> list[ShellSummary]: ...

    def shells_available(self) -> list[ShellAvailable]: ...

    @property
    def running(self) -> int:
        """Jobs running now."""
        ...

    @property
    def retained_count(self) -> int: ...

    async def write_secret(self, job_id: str, text: str) -> None:
        """Type ``text`` and Enter into a job's terminal; nothing is returned or kept (the
        value of a password prompt must reach no result, no log, no model)."""
        ...

    def changed_resources(self, job_id: str | None) -> list[str]:
        """The resource URIs a change of ``job_id`` (or of the job/shell set) may update."""
        ...

    def sandboxed_caller(self, client: tuple[str, int], server: tuple[str, int]) -> str | None:
        """The sandboxed job or shell holding the client end of a loopback connection."""
        ...
