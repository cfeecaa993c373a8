"""The embedded API (SPEC §8): ``async with conch.Runtime(conch.Config(...)) as rt:``.

:class:`Runtime` is the tool host (conch/tools/host.py: the engine of conch/core/engine.py plus
the tool registry of the configured profiles, with their per-runtime state) and the façade on
top: ``tools()``, ``call_tool()`` and the profile/transport facts of ``info()``. Front ends
(MCP, HTTP, CLI) take a Runtime; nothing in ``conch.core`` or ``conch.tools`` imports this
module.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Concatenate, ParamSpec

from conch.config import Config
from conch.core.engine import Engine
from conch.core.results import InfoResult
from conch.tools import lean, resources
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import CallContext
from conch.tools.host import ToolHost

TRANSPORTS = ("embedded", "stdio", "streamable-http", "sse", "http-invoke")


class RuntimeInfo(InfoResult):
    """``info``: the engine's facts plus the active profiles and the transports."""

    profiles: list[str]
    transports: list[str]


P = ParamSpec("P")
Shape = Callable[[Any, str], dict[str, Any]]


def _facade(
    name: str,
    method: Callable[Concatenate[Engine, P], Awaitable[Any]],
    shape: Shape,
    **defaults: Any,
) -> Callable[Concatenate[Runtime, P], Awaitable[dict[str, Any]]]:
    """A typed method of the embedded API: the engine's ``method`` (with the ``conch`` tool's
    ``defaults``) with its result in the configured detail (SPEC §6: the same dictionaries as
    the ``conch`` tools return)."""

    async def call(self: Runtime, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        result = await method(self, *args, **{**defaults, **kwargs})
        if self.config.result_detail == "lean":
            return shape(result, self.default_cwd)
        return dict(result)

    call.__name__, call.__qualname__ = name, f"Runtime.{name}"
    call.__doc__ = method.__doc__
    return call


FLEETS_GROUP = "conch.fleets"  # entry points: fleet kind -> its runtime class (conch.fleet)


class Runtime(ToolHost):
    """Conch's engine with its tool catalogue, usable in-process.

    With ``Config(fleet="ray")`` the object made is the fleet's runtime instead (the same
    surface, over every node of a cluster: SPEC §9b), found through the ``conch.fleets`` entry
    points so that this layer never imports the one above it."""

    def __new__(cls, config: Config | None = None, **kwargs: Any) -> Runtime:
        if cls is Runtime and config is not None and config.fleet != "off":
            fleet: Runtime = _fleet_class(config.fleet)(config, **kwargs)
            return fleet
        return super().__new__(cls)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    # The typed methods (SPEC §8). The tools call the engine's own methods (``exec_job`` …),
    # which always give the full result; these give what ``call_tool`` gives.
    exec = _facade("exec", Engine.exec_job, lean.snapshot, warm=True)
    read = _facade("read", Engine.read_job, lean.snapshot)
    write = _facade("write", Engine.write_job, lean.snapshot)
    signal = _facade("signal", Engine.signal_job, lean.snapshot)
    list = _facade("list", Engine.list_jobs, lean.listing)
    shell_open = _facade("shell_open", Engine.open_shell, lambda r, cwd: lean.shell_summary(r))
    shell_close = _facade("shell_close", Engine.close_shell, lambda r, cwd: lean.shell_close(r))
    search = _facade("search", Engine.search_files, lambda r, cwd: lean.search(r))

    async def info(self) -> RuntimeInfo:
        return {
            **await super().info(),
            "profiles": list(self.config.profiles),
            "transports": list(TRANSPORTS),
        }

    async def list_resources(self, *, seed_only: bool = False) -> builtins.list[dict[str, Any]]:
        """The resources front ends publish (``seed_only``: what a seed profile served alone
        publishes)."""
        return resources.resource_list(self, seed_only=seed_only)

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
        """(mime type, text) of a resource; ``not_found`` for an unknown one."""
        return resources.read_resource(self, uri, seed_only=seed_only)

    def tools(self) -> builtins.list[dict[str, Any]]:
        """Every tool of the active profiles as MCP ``tools/list`` shows it."""
        return [t.describe(self.config) for t in self.registry.tools]

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: CallContext | None = None,
    ) -> ToolOutcome:
        """Call a tool: its result, whether it is an error, and its ``_meta``."""
        if not self.closed and not self.started:
            await self.start()
        return await call_tool_full(self, name, arguments, context)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        context: CallContext | None = None,
    ) -> dict[str, Any]:
        """Call a tool by name; returns its structured result or ``{"error": {...}}``."""
        return (await self.call_tool_full(name, arguments, context)).result


def _fleet_class(kind: str) -> Any:
    from importlib.metadata import entry_points

    from conch.errors import ConfigError

    found = [ep for ep in entry_points(group=FLEETS_GROUP) if ep.name == kind]
    if not found:
        raise ConfigError(f"fleet: no fleet named {kind!r} is installed (conch[{kind}])")
    return found[0].load()
