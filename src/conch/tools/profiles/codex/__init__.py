"""Profile ``codex``: Codex CLI 0.171.0's own shell tools, ``exec_command`` and
``write_stdin``, on Conch's engine (docs/spec.md §7, dialect profiles).

The same names, parameters, types, required lists and ``additionalProperties: false`` as the
tools Codex sends the model (reference/hosts.md, "Built-in shell tool schemas"), described in
Conch's words (with the defaults and limits, which Codex strips from an MCP tool's schema), and
the same text results: ``Chunk ID`` … ``Output:`` then the raw stream, cut as Codex cuts it.
Underneath it is Conch's engine: process groups, the lossless log (a cut output says which log
bytes were left out, for Conch's ``read``), the configured sandbox and cgroups. Mapping and the
accepted differences: docs/profile-codex.md; proven against the real Codex CLI by
tests/hosts/codex/test_codex_dialect.py.

The package: ``tools.json`` (the two descriptors, as data), ``handlers`` (the tools),
``sessions`` (session ids and chunk cursors, per runtime), ``results`` (the result text and
errors), ``truncate`` (Codex's cut); :func:`openai_tools` gives the tools as the OpenAI
Responses API takes them, for harnesses that call a model directly.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Awaitable, Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from conch.core import Engine
from conch.tools.context import ToolContext
from conch.tools.profiles._common import Profile
from conch.tools.profiles.codex.handlers import exec_command, write_stdin
from conch.tools.profiles.codex.results import CodexError, error_result, render_text
from conch.tools.tool import Tool, WireShape

__all__ = ["PROFILE", "openai_tools", "tools"]

_CONTRACT = Path(__file__).with_name("tools.json")
_Handler = Callable[[Engine, dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]
_HANDLERS: dict[str, _Handler] = {"exec_command": exec_command, "write_stdin": write_stdin}


@lru_cache(maxsize=1)
def _descriptors() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(_CONTRACT.read_text(encoding="utf-8")))


def _guarded(fn: _Handler) -> _Handler:
    """``fn`` with a failure in Codex's words (CodexError) as its text result, an error."""

    async def run(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            return await fn(rt, args, ctx)
        except CodexError as e:
            return {"text": e.text, "error": True}

    return run


def _describer(entry: dict[str, Any], annotations: dict[str, Any]) -> Callable[[Any], Any]:
    # no outputSchema: the result is text only (a client would expect structuredContent)
    out = {k: entry[k] for k in ("name", "title", "description", "inputSchema")}
    out["annotations"] = annotations
    return lambda config: copy.deepcopy(out)


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """``exec_command`` and ``write_stdin``."""
    out = []
    for d in _descriptors():
        name = d["name"]
        tool = Tool(
            name,
            d["title"],
            d["description"],
            d["inputSchema"],
            {},
            _guarded(_HANDLERS[name]),
            destructive=True,
            progress=True,
        )
        wire = WireShape(
            error_result=error_result(name),
            render_text=render_text,
            structured=False,
            describer=_describer(d, tool.annotations),
        )
        out.append(dataclasses.replace(tool, wire=wire))
    return tuple(out)


def openai_tools() -> list[dict[str, Any]]:
    """Both tools as OpenAI Responses-API function tools, in the shape Codex sends them
    (``{"type": "function", "name", "description", "strict": false, "parameters"}``)."""
    return [
        {
            "type": "function",
            "name": d["name"],
            "description": d["description"],
            "strict": False,
            "parameters": copy.deepcopy(d["inputSchema"]),
        }
        for d in _descriptors()
    ]


PROFILE = Profile(
    "codex",
    tools,
    result_is_error=lambda result: bool(result.get("error")),
    call_sheet=(
        "exec_command{cmd,yield_time_ms,tty,workdir,max_output_tokens} runs one; while it "
        'runs (a session ID): write_stdin{session_id,chars,yield_time_ms} (chars "": wait).'
    ),
)
