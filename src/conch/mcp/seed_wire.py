"""What a seed profile served alone puts on the wire that the SDK's models would not: the
original's extra annotation keys in ``tools/list`` (ai-device-bash's ``summary_key``), its
exact ``capabilities`` and, when it serves no resources of its own, empty resource lists.

A server middleware (the SDK shapes every result through its models inside the chain, so the
shaped dict is amended on the way out). A seed module opts in with module-level constants:
``CAPABILITIES`` (the initialize result's capabilities, as the original announces them) and
``CONCH_RESOURCES = False`` (Conch's job resources are not served, as the original has none),
``UNKNOWN_RESOURCE_ERROR`` / ``UNKNOWN_PROMPT_ERROR`` (``(code, message template)`` of the
original's JSON-RPC error for a resource / prompt it does not have).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

METHOD_NOT_FOUND = -32601


class SeedWire:
    def __init__(self, seed: ModuleType | None, listed: list[dict[str, Any]]) -> None:
        self.capabilities: Mapping[str, Any] | None = getattr(seed, "CAPABILITIES", None)
        self.conch_resources = bool(getattr(seed, "CONCH_RESOURCES", True))
        self.unknown_resource: tuple[int, str] = getattr(
            seed, "UNKNOWN_RESOURCE_ERROR", (-32002, "Resource not found: {uri!r}")
        )
        self.unknown_prompt: tuple[int, str] = getattr(
            seed, "UNKNOWN_PROMPT_ERROR", (-32602, "Unknown prompt: {name!r}")
        )
        # tool name -> the annotations as the listing has them (extra keys included)
        self.annotations = {
            t["name"]: t["annotations"] for t in listed if isinstance(t.get("annotations"), dict)
        }

    @property
    def needed(self) -> bool:
        return bool(self.annotations) or self.capabilities is not None or not self.conch_resources

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        method = ctx.method
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if not self.conch_resources:
            if method == "resources/list":
                return {"resources": []}
            if method == "resources/templates/list":
                return {"resourceTemplates": []}
            if method == "resources/read":
                code, template = self.unknown_resource
                raise MCPError(code, template.format(uri=str(params.get("uri", ""))))
            if method in ("resources/subscribe", "resources/unsubscribe"):
                raise MCPError(METHOD_NOT_FOUND, "Method not found")
        announced = self.capabilities or {}
        if "prompts" in announced:  # announced by the original, which has none
            if method == "prompts/list":
                return {"prompts": []}
            if method == "prompts/get":
                code, template = self.unknown_prompt
                raise MCPError(code, template.format(name=str(params.get("name", ""))))
        if method == "logging/setLevel" and "logging" in announced:
            return {}
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if method == "tools/list" and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                extra = self.annotations.get(tool.get("name"))
                if extra is not None:
                    tool["annotations"] = {**extra, **(tool.get("annotations") or {})}
        elif method == "initialize" and self.capabilities is not None:
            result["capabilities"] = copy.deepcopy(dict(self.capabilities))
        return result
