"""The dialect profiles as plain tool definitions and a dispatcher (docs/spec.md §7), for a harness
that calls a model API directly instead of going through an MCP host.

Models are post-trained on two shell-tool shapes: Codex's ``exec_command``/``write_stdin`` and
Claude Code's ``Bash``/``TaskOutput``/``TaskStop``. :func:`openai_tools` and
:func:`anthropic_tools` give a :class:`Dialect`: the definitions to send in the API request's
``tools``, and the calls the model makes dispatched to Conch's engine (its hygiene, lossless logs
and sandbox), answered in the original's text format::

    async with conch.dialects.openai_tools() as codex:
        response = client.responses.create(model=..., input=history, tools=codex.definitions)
        for item in response.output:
            if item.type == "function_call":
                history.append(await codex.function_call_output(item.model_dump()))

    async with conch.dialects.anthropic_tools() as claude:
        message = client.messages.create(model=..., messages=history, tools=claude.definitions)
        results = [await claude.tool_result(b.model_dump()) for b in message.content
                   if b.type == "tool_use"]

A dialect owns its runtime unless given one (``runtime=``, which must serve the profile).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conch.config import Config
from conch.errors import ConfigError
from conch.runtime import Runtime
from conch.tools.call import text_block

#: dialect -> (profile, module, the module's definitions function)
_DIALECTS = {
    "openai": ("codex", "conch.tools.profiles.codex", "openai_tools"),
    "anthropic": ("claude-code", "conch.tools.profiles.claude_code", "anthropic_tools"),
}


@dataclass(frozen=True)
class ToolOutput:
    """What a call gives the model: the original's text, and whether it is an error (Anthropic's
    ``is_error``; the OpenAI Responses API has no such flag, the text says it)."""

    text: str
    is_error: bool


class Dialect:
    """One dialect's tools on a Conch runtime: :attr:`definitions`, :meth:`call`, and the
    API-shaped helpers :meth:`function_call_output` (OpenAI) and :meth:`tool_result`
    (Anthropic)."""

    def __init__(self, api: str, config: Config | None = None, runtime: Runtime | None = None):
        profile, module, fn = _DIALECTS[api]
        self.api = api
        self.profile = profile
        if runtime is None:
            base = config or Config()
            if profile not in base.profiles:
                base = dataclasses.replace(base, profiles=[profile])
            config = base
            self._runtime, self._owned = Runtime(config), True
        else:
            if config is not None:
                raise ConfigError("give a config or a runtime, not both")
            if profile not in runtime.config.profiles:
                raise ConfigError(
                    f"the runtime does not serve the {profile!r} profile (profiles: "
                    f"{', '.join(runtime.config.profiles)})"
                )
            self._runtime, self._owned = runtime, False
        self.definitions: list[dict[str, Any]] = getattr(importlib.import_module(module), fn)()
        self._names = {d["name"] for d in self.definitions}

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    async def __aenter__(self) -> Dialect:
        if self._owned:
            await self._runtime.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the runtime this dialect owns (and every job it started); a runtime given to
        it stays open."""
        if self._owned:
            await self._runtime.aclose()

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolOutput:
        """Run one tool call; ``arguments`` as the API gives them (a JSON string for OpenAI, an
        object for Anthropic). A call the tools cannot take is an error output, never an
        exception: the model reads why."""
        if name not in self._names:
            known = ", ".join(sorted(self._names))
            return ToolOutput(f"unknown tool {name!r} (this dialect has: {known})", True)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                return ToolOutput(f"failed to parse function arguments: {e}", True)
        if arguments is not None and not isinstance(arguments, Mapping):
            return ToolOutput("the arguments must be a JSON object", True)
        outcome = await self._runtime.call_tool_full(name, dict(arguments or {}))
        return ToolOutput(text_block(self._runtime.registry, name, outcome), outcome.is_error)

    async def function_call_output(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """An OpenAI Responses ``function_call`` item -> its ``function_call_output`` item."""
        out = await self.call(str(item.get("name", "")), item.get("arguments"))
        return {"type": "function_call_output", "call_id": item.get("call_id"), "output": out.text}

    async def tool_result(self, block: Mapping[str, Any]) -> dict[str, Any]:
        """An Anthropic ``tool_use`` block -> its ``tool_result`` block."""
        out = await self.call(str(block.get("name", "")), block.get("input"))
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.get("id"),
            "content": out.text,
        }
        if out.is_error:
            result["is_error"] = True
        return result


def openai_tools(config: Config | None = None, *, runtime: Runtime | None = None) -> Dialect:
    """Codex's ``exec_command`` / ``write_stdin`` (the ``codex`` profile), as OpenAI Responses
    API function tools."""
    return Dialect("openai", config, runtime)


def anthropic_tools(config: Config | None = None, *, runtime: Runtime | None = None) -> Dialect:
    """Claude Code's ``Bash`` / ``TaskOutput`` / ``TaskStop`` (the ``claude-code`` profile), as
    Anthropic Messages API tools."""
    return Dialect("anthropic", config, runtime)
