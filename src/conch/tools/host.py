"""The host protocol: what the front ends (MCP, HTTP, CLI) are typed against.

``conch.Runtime`` implements it, whether its backend is the engine of this machine or a fleet's
(docs/spec.md §9b, the engines of a cluster); a front end never knows which it has. A host is the
catalogue (tools, resources, calls) plus a :class:`HostView`: a read-only view of what runs, so that
no front end holds a live job or a driver; and a ``watch`` (conch/tools/watch.py): what the
dashboard shows a person and takes from them, which a fleet asks of each job's node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from conch.config import Config
from conch.core import Engine, JobView, ShellAvailable, ShellSummary
from conch.tools import resources
from conch.tools.context import ToolContext
from conch.tools.registry import ToolRegistry
from conch.tools.watch import Watch

if TYPE_CHECKING:
    from conch.tools.call import ToolOutcome

_H = TypeVar("_H", bound="Host")


class HostView(Protocol):
    """What front ends watch (the dashboard, health, MCP resources and tasks, secret
    prompts): jobs read-only, shells as summaries, change events."""

    @property
    def bash(self) -> str | None: ...

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

    async def type_secret(self, job_id: str, text: str) -> None:
        """Type ``text`` and Enter into a job's terminal; nothing is returned or kept (the
        value of a password prompt must reach no result, no log, no model)."""
        ...

    def sandboxed_caller(self, client: tuple[str, int], server: tuple[str, int]) -> str | None:
        """The sandboxed job or shell holding the client end of a loopback connection."""
        ...

    def changed_resources(self, job_id: str | None) -> list[str]:
        """The resource URIs a change of ``job_id`` (or of the job/shell set) may update."""
        ...


class HostParts(Protocol):
    """What a host serves and a runtime's backend provides alike (conch/runtime.py): the
    catalogue, the view and the watch, the lifecycle."""

    config: Config

    @property
    def registry(self) -> ToolRegistry:
        """The catalogue: tools, resources, profile state."""
        ...

    @property
    def view(self) -> HostView: ...

    @property
    def watch(self) -> Watch:
        """What the dashboard shows a person and takes from them (conch/tools/watch.py)."""
        ...

    @property
    def closed(self) -> bool: ...

    @property
    def default_cwd(self) -> str: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def tools(self) -> list[dict[str, Any]]:
        """Every tool of the active profiles as MCP ``tools/list`` shows it."""
        ...

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome:
        """Call a tool: its result, whether it is an error, and its ``_meta``."""
        ...

    async def list_resources(self, *, seed_only: bool = False) -> list[dict[str, Any]]: ...

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]: ...


class Host(HostParts, Protocol):
    """A host: its parts, ``async with`` (a class that subclasses this protocol gets it from
    here: ``start`` on entry, ``aclose`` on exit), ``info``, ``signal`` and ``changes``."""

    async def __aenter__(self: _H) -> _H:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def info(self) -> Mapping[str, Any]: ...

    def signal(
        self, job_id: str, signal: str = "terminate", *, wait_ms: int = 2000
    ) -> Awaitable[dict[str, Any]]:
        """docs/spec.md §8's ``signal`` (the dashboard's stop button, a task's cancel)."""
        ...

    async def changes(
        self,
        job_id: str,
        undo: bool = False,
        force: Sequence[str] = (),
        *,
        cursor: str | None = None,
        max_bytes: int | None = None,
    ) -> dict[str, Any]:
        """A job's changes to the workspace, or their undo (the dashboard's view and undo)."""
        ...


class EngineView:
    """The host view of one engine (``conch.Runtime.view``)."""

    def __init__(self, engine: Engine, registry: ToolRegistry) -> None:
        self._engine = engine
        self._registry = registry

    @property
    def bash(self) -> str | None:
        return self._engine.bash

    def add_listener(self, fn: Callable[[str | None], None]) -> Callable[[], None]:
        return self._engine.add_listener(fn)

    def job(self, job_id: str) -> JobView:
        return self._engine.job(job_id)

    def retained(self) -> list[JobView]:
        return self._engine.retained()

    def shell_summaries(self) -> list[ShellSummary]:
        return self._engine.shell_summaries()

    def shells_available(self) -> list[ShellAvailable]:
        return self._engine.shells_available()

    @property
    def running(self) -> int:
        return self._engine.running

    @property
    def retained_count(self) -> int:
        return len(self._engine.jobs)  # (a count: no eviction, no list)

    async def type_secret(self, job_id: str, text: str) -> None:
        await self._engine.type_secret(job_id, text)

    def sandboxed_caller(self, client: tuple[str, int], server: tuple[str, int]) -> str | None:
        return self._engine.sandboxed_caller(client, server)

    def changed_resources(self, job_id: str | None) -> list[str]:
        return resources.change_uris(self._registry, job_id)
