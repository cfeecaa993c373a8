"""Profile ``ai-device-bash``: seed 1's ``bash`` / ``run`` / ``script`` / ``get`` on the runtime.

A drop-in for ai-device-bash 0.2.0 (docs/spec.md §7): the same tools/list entries (descriptions, the
schemas FastMCP generates, the ``summary_key`` annotation), arguments parsed the way its
FastMCP/pydantic layer parses them (lax mode: ``"5"`` and ``true`` are numbers; a bad argument
is pydantic's own error text with ``isError: true``), its 12-key result as the one compact JSON
text block (no structuredContent), its checks in its order with its messages, its preview (head
+ marker + tail of the raw output file, ANSI stripped, CR turned into LF) and its output files
(every call that reaches the executor gets one, failures included). Served alone, the server
also says what the original says at initialize (name, version, capabilities) and has no
resources or prompts (the MCP server and ``conch.mcp.seed_wire`` read the constants below; see
``conch.tools.profiles``). Proven against the
published package by ``tests/tools/profiles/differential/test_ai_device_bash_diff.py``.

Where docs/spec.md §2 decides otherwise: a call returns when the leader exits (the seed waits for
descendants holding stdout), the kill-mode deadline sends TERM before KILL, the child
environment has Conch's agent defaults (``TERM=dumb``, ``PAGER=cat``, ...).

Bugs dropped (seed-contracts §4): ``duration_ms`` is frozen when the job ends; a negative
``timeout`` is ``INVALID_TIMEOUT``; a kill-mode timeout returns as soon as the tree is dead,
whatever escaped daemons hold; nothing is printed on stdout. ``background_pid`` is not an OS pid
(docs/spec.md §9): it is a random handle, above any pid the OS can hand out, that ``get`` maps back
to the Conch job.

The package, one concern a module: ``tools.json`` (the seed's tools/list entries, as data),
``validate`` (FastMCP's pydantic parsing and the seed's own checks), ``handlers`` (``bash``,
``run``, ``script``), ``background`` (the handles of background jobs and ``get``), ``results``
(the 12-key result, previews, error shapes, the text block) and ``limits``; this module puts
them together as the profile and says who the server is when it is served alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from conch.tools.profiles._common import Profile
from conch.tools.profiles.ai_device_bash.background import get_handler
from conch.tools.profiles.ai_device_bash.handlers import exec_handler
from conch.tools.profiles.ai_device_bash.results import (
    error_result,
    preview,
    sanitize,
    text_block,
)
from conch.tools.profiles.ai_device_bash.validate import (
    SIGNATURES,
    adapter,
    purpose_summary,
    validator,
)
from conch.tools.tool import Tool, WireShape

__all__ = [
    "CAPABILITIES",
    "INSTRUCTIONS",
    "PROFILE",
    "RESOURCE_TEMPLATES",
    "SERVER_NAME",
    "SERVER_VERSION",
    "UNKNOWN_PROMPT",
    "UNKNOWN_RESOURCE",
    "UNKNOWN_TOOL_TEXT",
    "preview",
    "sanitize",
    "tools",
]

# what a client sees in the initialize result when this profile is served alone
SERVER_NAME = "bash"
SERVER_VERSION = "3.4.11"  # FastMCP reports its own version: fastmcp 3.4.11 served 0.2.0
INSTRUCTIONS: str | None = None
# FastMCP's answers (tools/profiles.py, conch.mcp.seed_wire): an unknown tool, resource, prompt
UNKNOWN_TOOL_TEXT = "Unknown tool: {name}"
UNKNOWN_RESOURCE = (-32002, "Resource not found: Unknown resource: {uri}")
UNKNOWN_PROMPT = (0, "Unknown prompt: {name}")
RESOURCE_TEMPLATES: list[dict[str, Any]] = []  # it lists none (and no resources)
# the capabilities FastMCP 3.4.11 announces for the seed
CAPABILITIES: dict[str, Any] = {
    "experimental": {},
    "logging": {},
    "prompts": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "tools": {"listChanged": True},
    "extensions": {"io.modelcontextprotocol/ui": {}},
}

_DEFAULT_SUMMARY = {"bash": "bash", "run": "run command", "script": "script"}
_CONTRACT = Path(__file__).with_name("tools.json")


@lru_cache(maxsize=1)
def _descriptors() -> dict[str, dict[str, Any]]:
    """The tools/list entries ai-device-bash 0.2.0 publishes, verbatim (its descriptions, the
    schemas FastMCP generates, the ``summary_key`` annotation, FastMCP's ``_meta``)."""
    return {t["name"]: t for t in json.loads(_CONTRACT.read_text(encoding="utf-8"))}


def _describer(entry: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    return lambda config: copy.deepcopy(entry)


def _summary(tool_mode: str) -> Callable[[Mapping[str, Any]], str]:
    default = _DEFAULT_SUMMARY[tool_mode]
    return lambda args: purpose_summary(args.get("purpose"), default)


def _get_summary(args: Mapping[str, Any]) -> str:
    return f"get {args.get('pid')}"


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's tools, in the seed's order: ``bash``, ``run``, ``script``, ``get``."""
    for name in SIGNATURES:
        adapter(name)  # fail at startup, not per call, when pydantic is missing
    out = []
    for name, entry in _descriptors().items():
        poll = name == "get"
        out.append(
            Tool(
                name,
                name,
                entry["description"],
                entry["inputSchema"],
                {},
                get_handler if poll else exec_handler(name),
                read_only=poll,
                destructive=not poll,
                wire=WireShape(
                    error_result=error_result(None if poll else name),
                    summary=_get_summary if poll else _summary(name),
                    validator=validator(name),
                    render_text=text_block,
                    structured=False,
                    describer=_describer(entry),
                ),
            )
        )
    return tuple(out)


# each tool shapes its own errors (they name the tool's mode) and words its own summary, so those
# stay per tool (WireShape.error_result, WireShape.summary), as do its text-only results
PROFILE = Profile("ai-device-bash", tools)
