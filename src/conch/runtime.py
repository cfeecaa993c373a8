"""The embedded API (SPEC §8): ``async with conch.Runtime(conch.Config(...)) as rt:``.

:class:`Runtime` is the engine (conch/core/engine.py) plus what sits above the core: the tool
catalogue of the configured profiles (``tools()``, ``call_tool()``), the per-runtime state those
profiles keep, and the profile/transport facts of ``info()``. Front ends (MCP, HTTP, CLI) take a
Runtime; nothing in ``conch.core`` or ``conch.tools`` imports this module.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from conch.config import Config
from conch.core.engine import Engine
from conch.core.results import InfoResult
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import CallContext
from conch.tools.registry import ToolRegistry

TRANSPORTS = ("embedded", "stdio", "streamable-http", "sse", "http-invoke")


class RuntimeInfo(InfoResult):
    """``info``: the engine's facts plus the active profiles and the transports."""

    profiles: list[str]
    transports: list[str]


class Runtime(Engine):
    """Conch's engine with its tool catalogue, usable in-process."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        super().__init__(config, owns_process=owns_process)
        self.registry = ToolRegistry(self.config.profiles)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def info(self) -> RuntimeInfo:
        return {
            **await super().info(),
            "profiles": list(self.config.profiles),
            "transports": list(TRANSPORTS),
        }

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
        return await call_tool_full(self, name, arguments, context, registry=self.registry)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        context: CallContext | None = None,
    ) -> dict[str, Any]:
        """Call a tool by name; returns its structured result or ``{"error": {...}}``."""
        return (await self.call_tool_full(name, arguments, context)).result
