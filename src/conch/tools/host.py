"""What tools run on: the engine plus the tool registry of its configured profiles.

``conch.Runtime`` (conch/runtime.py) is this host with the public façade on top (``tools()``,
``call_tool()``, the profile facts of ``info()``); the call path (tools/call.py) and the
resources (tools/resources.py) read the registry from the host's typed attribute, and each call
gets the registry's profile state in its :class:`~conch.tools.context.CallContext`."""

from __future__ import annotations

from conch.config import Config
from conch.core.engine import Engine
from conch.tools.registry import ToolRegistry


class ToolHost(Engine):
    """An engine that owns the tool registry (tools, resources, profile state) of its config."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        super().__init__(config, owns_process=owns_process)
        self.registry = ToolRegistry(self.config.profiles)
