"""What a seed profile puts on the wire that the SDK's models would not: the original's extra
annotation keys in ``tools/list`` (ai-device-bash's ``summary_key``) and, served alone, its exact
``capabilities`` and the answers they imply (its original lists no prompts, accepts
``logging/setLevel``, has no ``resources/subscribe`` when it does not announce it).

A server middleware (the SDK shapes every result through its models inside the chain, so the
shaped dict is amended on the way out). A seed module opts in with module-level constants:
``CAPABILITIES`` (the initialize result's capabilities as the original announces them) and
``UNKNOWN_PROMPT = (code, message)`` (its error for ``prompts/get``; ``{name}`` is the name).
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
        self.unknown_prompt: tuple[int, str] = getattr(
            seed, "UNKNOWN_PROMPT", (-32602, "Unknown prompt: {name}")
        )
        # tool name -> the annotations as the seed's own listing has them (extra keys included)
        self.annotations = {
            t["name"]: t["annotations"] for t in listed if isinstance(t.get("annotations"), dict)
        }

    @property
    def needed(self) -> bool:
        return bool(self.annotations) or self.capabilities is not None

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        method = ctx.method
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        announced = self.capabilities
        if announced is not None:
            if "prompts" in announced and method == "prompts/list":
                return {"prompts": []}  # announced by the original, which has none
            if "prompts" in announced and method == "prompts/get":
                code, template = self.unknown_prompt
                raise MCPError(code, template.replace("{name}", repr(str(params.get("name")))))
            if "logging" in announced and method == "logging/setLevel":
                return {}
            subscribe = (announced.get("resources") or {}).get("subscribe")
            if not subscribe and method in ("resources/subscribe", "resources/unsubscribe"):
                raise MCPError(METHOD_NOT_FOUND, "Method not found")
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if method == "tools/list" and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                extra = self.annotations.get(tool.get("name"))
                if extra is not None:
                    tool["annotations"] = {**extra, **(tool.get("annotations") or {})}
        elif method == "initialize" and announced is not None:
            result["capabilities"] = copy.deepcopy(dict(announced))
        return result
