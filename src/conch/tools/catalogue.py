"""The tool catalogue: every tool's name, description, schemas, annotations and handler.

One catalogue serves every front end (MCP stdio/HTTP/SSE, HTTP invoke, CLI, embedded).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from conch.errors import ConchError
from conch.tools import schemas as S
from conch.tools.context import CallContext

if TYPE_CHECKING:
    from conch.config import Config
    from conch.core.runtime import Runtime

Handler = Callable[["Runtime", dict[str, Any], CallContext], Awaitable[dict[str, Any]]]
ErrorResult = Callable[[ConchError, Mapping[str, Any]], tuple[dict[str, Any], bool]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Handler
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # argument names that never reach the handler (echoed into _meta instead)
    summary_arg: str | None = None
    # seed-compatible profiles (conch.tools.compat) shape errors and isError their own way:
    # error_result(error, args) -> (result, is_error) for every ConchError, validation included;
    # result_is_error(result) -> isError of a normal result; summary(args) -> _meta.summary
    error_result: ErrorResult | None = None
    result_is_error: Callable[[dict[str, Any]], bool] | None = None
    summary: Callable[[Mapping[str, Any]], str] | None = None
    # the tool may wait on a job: front ends send progress notifications while it does
    progress: bool = False
    # a seed profile that publishes the original's exact descriptor (no title/annotations,
    # its own schemas; some values depend on the configuration) and checks arguments the
    # original's way (its validation messages): describer(config) -> descriptor,
    # validator(args) raises ConchError("invalid_argument"), or returns the arguments as the
    # original's SDK coerced them (ai-device-bash: pydantic lax mode)
    describer: Callable[[Config | None], dict[str, Any]] | None = None
    validator: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    # the text block of a result (result, is_error) -> text, instead of Conch's rendering
    render_text: Callable[[dict[str, Any], bool], str] | None = None
    # False: MCP results carry no structuredContent (the original sends its result as text only)
    structured: bool = True

    @property
    def annotations(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": True,
        }

    @property
    def published_output_schema(self) -> dict[str, Any]:
        """The result shape, or the error envelope: clients such as the TypeScript SDK validate
        ``structuredContent`` against it even when ``isError`` is true."""
        if self.error_result is not None:
            return self.output_schema  # seed profiles describe their own error shapes
        return {"type": "object", "anyOf": [self.output_schema, S.ERROR_OUTPUT]}

    def describe(self, config: Config | None = None) -> dict[str, Any]:
        """The tool as MCP `tools/list` shows it (every front end publishes this)."""
        if self.describer is not None:
            return self.describer(config)
        out = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.published_output_schema,
            "annotations": self.annotations,
        }
        if self.meta:
            out["_meta"] = self.meta
        return out


def _without(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in names}


async def _exec(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.exec(
        **_without(args, "purpose"),
        shell_env=ctx.shell_env(),
        caller_session_id=ctx.caller_session_id(),
    )


async def _read(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.read(**args)


async def _write(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.write(**_without(args, "purpose"))


async def _signal(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.signal(**_without(args, "purpose"))


async def _list(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.list(**args)


async def _shell_open(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.shell_open(**args)


async def _shell_close(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.shell_close(**args)


async def _search(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.search(**args)


async def _info(rt: Runtime, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return await rt.info()


EXEC_DESCRIPTION = "\n".join(
    [
        "Run a command on this machine as a job and return its result.",
        (
            "Give exactly one of `command` (a bash command line), `argv` (program + literal "
            "arguments, no shell) or `script` (multi-line bash, syntax-checked first); or "
            "`command` with `shell_id` to run it in a persistent shell (cwd, env and functions "
            "persist)."
        ),
        (
            "Waits up to `yield_ms` (default 10 s): if the job is still running you get `state: "
            "running` with the output so far, and it keeps running in the background — use "
            "`read` to follow it, `write` to type into it, `signal` to stop it. It is killed at "
            "`timeout_ms` (default 30 min)."
        ),
        (
            "Output is normalized text (ANSI stripped, progress bars collapsed); long output shows "
            "head and tail with a marker saying which cursor range to `read`. A non-zero exit is a "
            "normal result (`ok: false`), not an error. For servers, pass `ready` "
            "({pattern|port|url}) to return once they are up."
        ),
    ]
)


@lru_cache(maxsize=1)
def conch_tools() -> tuple[Tool, ...]:
    from conch.tools.search_tool import (
        SEARCH_DESCRIPTION,
        SEARCH_INPUT_SCHEMA,
        SEARCH_OUTPUT_SCHEMA,
    )

    return (
        Tool(
            "exec",
            "Run a command",
            EXEC_DESCRIPTION,
            S.EXEC_INPUT,
            S.SNAPSHOT_OUTPUT,
            _exec,
            destructive=True,
            summary_arg="purpose",
            progress=True,
        ),
        Tool(
            "read",
            "Read a job's output",
            "Read a job's output from where the last read stopped (or from `cursor`), "
            "optionally waiting up to `wait_ms` for new output, the end (`until: exit`) or a "
            "regex. Returns the job snapshot; `next_cursor`, `eof`, `total_bytes` tell what is "
            "left. `tail: true` gives the last `max_bytes`; `stream` picks stdout or stderr.",
            S.READ_INPUT,
            S.SNAPSHOT_OUTPUT,
            _read,
            read_only=True,
            progress=True,
        ),
        Tool(
            "write",
            "Send input to a job",
            "Send text and/or keys (enter, ctrl-c, up, tab, ...) to a running job's stdin or "
            "terminal; `eof: true` closes stdin. Returns the output produced since, once it "
            "settles (up to `yield_ms`).",
            S.WRITE_INPUT,
            S.SNAPSHOT_OUTPUT,
            _write,
            summary_arg="purpose",
            progress=True,
        ),
        Tool(
            "signal",
            "Signal or stop a job",
            "Send a signal to a job's whole process tree. `terminate` (default) sends TERM "
            "then KILL after the grace period; `interrupt` is ctrl-c. On a finished job it "
            "kills processes the job left running (`lingering_pids`).",
            S.SIGNAL_INPUT,
            S.SNAPSHOT_OUTPUT,
            _signal,
            destructive=True,
            summary_arg="purpose",
        ),
        Tool(
            "list",
            "List jobs and shells",
            "List jobs (running and recent) and open persistent shells.",
            S.LIST_INPUT,
            S.LIST_OUTPUT,
            _list,
            read_only=True,
            idempotent=True,
        ),
        Tool(
            "shell_open",
            "Open a persistent shell",
            "Start a persistent interactive shell (bash, or zsh) on a terminal. Run commands "
            "in it with `exec {shell_id, command}`: cwd, variables, functions, aliases and "
            "activated virtualenvs persist between commands.",
            S.SHELL_OPEN_INPUT,
            S.SHELL_OPEN_OUTPUT,
            _shell_open,
        ),
        Tool(
            "shell_close",
            "Close a persistent shell",
            "Close a shell and kill every process in it.",
            S.SHELL_CLOSE_INPUT,
            S.SHELL_CLOSE_OUTPUT,
            _shell_close,
            destructive=True,
            idempotent=True,
        ),
        Tool(
            "search",
            "Search files",
            SEARCH_DESCRIPTION,
            SEARCH_INPUT_SCHEMA,
            SEARCH_OUTPUT_SCHEMA,
            _search,
            read_only=True,
            idempotent=True,
        ),
        Tool(
            "info",
            "About this Conch server",
            "Version, platform, available shells, ripgrep, process containment level, "
            "limits, profiles and transports.",
            S.INFO_INPUT,
            S.INFO_OUTPUT,
            _info,
            read_only=True,
            idempotent=True,
        ),
    )


def catalogue(profiles: list[str] | tuple[str, ...] = ("conch",)) -> list[Tool]:
    """The tools of the given profiles; when two share a name, the first listed wins."""
    from conch.tools.profiles import profile_tools

    seen: dict[str, Tool] = {}
    for p in profiles:
        for tool in profile_tools(p):
            seen.setdefault(tool.name, tool)
    return list(seen.values())
