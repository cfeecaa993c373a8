"""Profile ``claude-code``: Claude Code 2.1.197's own shell tools, ``Bash``, ``TaskOutput`` and
``TaskStop``, on Conch's engine (docs/spec.md §7, dialect profiles; docs/profile-claude-code.md).

The same names, parameters, types, defaults and ``required`` lists as the tools Claude Code
sends the model (``tools.json``; the descriptions are Conch's own words), and the original's
text results, word for word: the output with its ends trimmed, ``Exit code N`` flagged as an
error, the timeout wording, the background message with a real output file (the job's log in
Conch's data dir, growing as the job writes), ``<persisted-output>`` over 30000 characters,
TaskOutput's tags, TaskStop's JSON and ``<tool_use_error>`` for unknown ids and bad arguments.
Results are text only (no structuredContent), as a host shows the original's.

Proven against the real CLI by tests/hosts/claude/test_claude_dialect.py (the same calls to
Claude Code's built-in tools and to this profile, compared); what differs, and why, is listed
there and in the docs. :func:`anthropic_tools` gives the three tools as Anthropic Messages-API
tool definitions, for an embedding that offers them to a model itself.

The package: ``tools.json`` (the descriptors), ``validate`` (the original's argument checks),
``handlers`` (the three tools on the engine), ``tasks`` (task ids, the kept cwd) and
``results`` (the text of every result).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from conch.errors import ConchError
from conch.tools.profiles._common import Profile
from conch.tools.profiles.claude_code import handlers
from conch.tools.profiles.claude_code.results import tool_use_error
from conch.tools.profiles.claude_code.validate import validator
from conch.tools.tool import Tool, WireShape

__all__ = ["PROFILE", "anthropic_tools", "tools"]

_CONTRACT = Path(__file__).with_name("tools.json")
_HANDLERS = {
    "Bash": handlers.bash,
    "TaskOutput": handlers.task_output,
    "TaskStop": handlers.task_stop,
}
# the parameters a call cannot do without (TaskOutput's other required ones have defaults);
# TaskStop checks its own (task_id or shell_id), Bash's timeout takes a numeric string
_REQUIRED = {"Bash": ("command",), "TaskOutput": ("task_id",), "TaskStop": ()}
_COERCED = {"Bash": ("timeout",)}


@lru_cache(maxsize=1)
def _descriptors() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads(_CONTRACT.read_text(encoding="utf-8"))}


def anthropic_tools() -> list[dict[str, Any]]:
    """The three tools as Anthropic Messages-API tool definitions
    (``{"name", "description", "input_schema"}``), the schemas as Claude Code sends them."""
    return [
        {
            "name": n,
            "description": t["description"],
            "input_schema": copy.deepcopy(t["inputSchema"]),
        }
        for n, t in _descriptors().items()
    ]


def _error_result(error: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A failure in the original's words: its validation text, or the error's message."""
    if error.code == "invalid_argument" and error.message.startswith("InputValidationError: "):
        return tool_use_error(error.message), True
    return tool_use_error(f"Error: {error.message}"), True


def _describer(entry: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    return lambda config: {
        "name": entry["name"],
        "description": entry["description"],
        "inputSchema": copy.deepcopy(entry["inputSchema"]),
    }


def _text(result: dict[str, Any], is_error: bool) -> str:
    return str(result.get("text", ""))


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """``Bash``, ``TaskOutput``, ``TaskStop``, in the original's order."""
    out = []
    for name, entry in _descriptors().items():
        out.append(
            Tool(
                name,
                name,
                entry["description"],
                entry["inputSchema"],
                {},
                _HANDLERS[name],
                read_only=name == "TaskOutput",
                destructive=name != "TaskOutput",
                progress=name != "TaskStop",
                wire=WireShape(
                    validator=validator(
                        name, entry["inputSchema"], _COERCED.get(name, ()), _REQUIRED[name]
                    ),
                    describer=_describer(entry),
                    render_text=_text,
                    structured=False,
                    own_error_shapes=True,
                ),
            )
        )
    return tuple(out)


PROFILE = Profile(
    "claude-code",
    tools,
    error_result=_error_result,
    result_is_error=lambda result: bool(result.get("is_error")),
    render_text=_text,
    call_sheet=(
        "Bash{command,timeout,run_in_background,description} runs one; a background one: "
        "TaskOutput{task_id,block,timeout}, TaskStop{task_id}."
    ),
)
