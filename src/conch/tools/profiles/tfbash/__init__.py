"""Profile ``tfbash``: tfbash-mcp 0.2.0's seven ``shell_*`` tools on the runtime's persistent
shells — a drop-in (docs/spec.md §7), proven against the published original by
``tests/tools/profiles/differential/test_tfbash_diff.py``.

Mapping: ``shell_id`` is the Conch shell id, ``exec_id`` the Conch job id of the command run in
it, cursors are byte offsets into the job's log (its text exactly as printed, ``\\n`` line
ends). Like the original's per-execution ring buffer of ``max_output_bytes``, an execution
keeps its newest ``max_output_bytes``: ``buffer_start_cursor`` is where that window starts and a
read from before it gets ``truncated_before_cursor``. Shells run with terminal echo off (the
original's PTY does not echo what ``shell_write`` sends). Results, the error envelope, the
validation messages, the tool descriptors, the overview resource and the server's identity are
the original's; ``isError`` is set only when the operation was rejected.

Bugs dropped (docs/spec.md §4, seed-contracts §4): an interrupt ends the whole command list and its
execution at once; terminate/kill stop the whole command line; output has no prompt, marker
or bracketed-paste noise; close takes well under a second.

The package, one concern a module: ``tools.json`` (the original's tools/list entries, as
data), ``validate`` (its strict argument checks), ``handlers`` (the seven tools), ``shells``
and ``executions`` (the runtime's shells and jobs as tfbash shows them), ``results`` (its
rejections, envelope and text block), ``overview`` (its resource) and ``limits``; this module
puts them together as the profile and says who the server is when it is served alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conch.tools.profiles._common import Profile, guard
from conch.tools.profiles.tfbash.handlers import HANDLERS
from conch.tools.profiles.tfbash.limits import platform_name
from conch.tools.profiles.tfbash.overview import OVERVIEW_URI, RESOURCE, tfbash_overview_markdown
from conch.tools.profiles.tfbash.results import (
    Reject,
    envelope,
    error_result,
    render_text,
    result_is_error,
)
from conch.tools.profiles.tfbash.validate import validator
from conch.tools.tool import Tool, WireShape

if TYPE_CHECKING:
    from conch.config import Config

__all__ = [
    "INSTRUCTIONS",
    "OVERVIEW_URI",
    "PROFILE",
    "RESOURCE_TEMPLATES",
    "SERVER_NAME",
    "SERVER_VERSION",
    "UNKNOWN_RESOURCE",
    "tfbash_overview_markdown",
    "tools",
]

# The original's MCP identity, announced when this profile is served alone (docs/spec.md §7).
SERVER_NAME = "tfbash-mcp"
SERVER_VERSION = "0.2.0"
INSTRUCTIONS = (
    "Commands use the {dialect} dialect on {platform}. The terminal backend is POSIX PTY. "
    "Shell version: {shell_version}. The default working directory is {default_cwd}. "
    "The workspace root is context, not a filesystem sandbox boundary. "
    "Use shell_list for authoritative runtime and host metadata."
)
UNKNOWN_RESOURCE = (-32602, "Unknown Resource URI.")  # JSON-RPC INVALID_PARAMS
RESOURCE_TEMPLATES = None  # the original has no resources/templates/list (-32601)
UNKNOWN_TOOL_TEXT = "Unknown tool."

_CONTRACT = Path(__file__).with_name("tools.json")


@lru_cache(maxsize=1)
def _descriptors() -> dict[str, dict[str, Any]]:
    """The original's tools/list entries (its descriptions, schemas and ``_meta``, generated
    by tfbash-mcp 0.2.0 on Linux); ``@DEFAULT_CWD@`` stands for the default cwd."""
    return {t["name"]: t for t in json.loads(_CONTRACT.read_text(encoding="utf-8"))}


def _fill(obj: Any, default_cwd: str, platform: str, key: str = "") -> Any:
    if isinstance(obj, dict):
        return {k: _fill(v, default_cwd, platform, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fill(v, default_cwd, platform, key) for v in obj]
    if obj == "@DEFAULT_CWD@":
        return default_cwd
    if obj == "linux" and key in ("x-platform", "x-nativeAbsolutePath", "const"):
        return platform
    return obj


def _describer(name: str) -> Callable[[Config | None], dict[str, Any]]:
    def describe(config: Config | None) -> dict[str, Any]:
        cwd = config.resolved_default_cwd if config is not None else os.getcwd()
        return _fill(_descriptors()[name], os.path.realpath(cwd), platform_name())

    return describe


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's seven tools, in tfbash's order."""
    out = []
    for name, desc in _descriptors().items():
        fn, flags = HANDLERS[name]
        out.append(
            Tool(
                name,
                name,
                desc["description"],
                desc["inputSchema"],
                desc["outputSchema"],
                guard(fn, envelope, Reject),
                meta=desc["_meta"],
                read_only=flags.get("read_only", False),
                destructive=flags.get("destructive", False),
                idempotent=flags.get("idempotent", False),
                progress=name in ("shell_exec", "shell_read", "shell_write"),
                wire=WireShape(
                    own_error_shapes=True, describer=_describer(name), validator=validator(name)
                ),
            )
        )
    return tuple(out)


PROFILE = Profile(
    "tfbash",
    tools,
    error_result=error_result,
    result_is_error=result_is_error,
    render_text=render_text,
    resources=(RESOURCE,),
)
