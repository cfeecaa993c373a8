"""The default profile ``conch`` (SPEC §6): nine thin handlers on the engine."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from conch.core import (
    Engine,
    ExecRequest,
    ReadRequest,
    SearchRequest,
    ShellOpenRequest,
    SignalRequest,
    WriteRequest,
)
from conch.tools import lean as L
from conch.tools import schemas as S
from conch.tools.context import ToolContext
from conch.tools.profiles._common import Profile
from conch.tools.tool import Tool, WireShape


def _without(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in names}


# `purpose` is the call's (its label, for the dashboard), not the request's
async def _exec(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    req = ExecRequest(**_without(args, "purpose"))
    return dict(await rt.exec(req, ctx.engine_context(warm=True)))


async def _read(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.read(ReadRequest(**args)))


async def _write(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.write(WriteRequest(**_without(args, "purpose"))))


async def _signal(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.signal(SignalRequest(**_without(args, "purpose"))))


async def _list(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.list(**args))


async def _shell_open(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_open(ShellOpenRequest(**args)))


async def _shell_close(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_close(**args))


async def _search(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.search(SearchRequest(**args)))


async def _info(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.info())


def _lean_snapshot(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.snapshot(r, cwd)


def _lean_list(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.listing(r, cwd)


def _lean_shell_open(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.shell_summary(r)


def _lean_shell_close(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.shell_close(r)


def _lean_search(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.search(r)


#: how a model should read a lean result (said once per tool that returns a job snapshot)
LEAN_NOTE = (
    "A field left out of the result has its default (see the output schema): e.g. no "
    "`exit_code` while running, no `next_cursor`/`total_bytes`/`eof` once everything was "
    "read, no `truncated` when nothing was cut."
)

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
            "normal result (check `exit_code`), not an error. For servers, pass `ready` "
            "({pattern|port|url}) to return once they are up."
        ),
        LEAN_NOTE,
    ]
)


SEARCH_DESCRIPTION = (
    "Search file contents with ripgrep and get structured results: path, 1-based line, "
    "matching text and submatches. The pattern is a literal string by default; set "
    "regex=true for a (linear-time, non-PCRE) regular expression. Like rg, it skips "
    "hidden files (unless hidden=true), binary files and anything ignored by .gitignore/.ignore. "
    "column and submatch start/end are byte offsets into the line; mode=files or mode=count "
    "list matching files or per-file counts of matching lines instead."
)


@lru_cache(maxsize=1)
def conch_tools() -> tuple[Tool, ...]:
    return (
        Tool(
            "exec",
            "Run a command",
            EXEC_DESCRIPTION,
            S.EXEC_INPUT,
            S.SNAPSHOT_OUTPUT,
            _exec,
            destructive=True,
            progress=True,
            wire=WireShape(summary_arg="purpose", lean=_lean_snapshot),
        ),
        Tool(
            "read",
            "Read a job's output",
            "Read a job's output from where the last read stopped (or from `cursor`), "
            "optionally waiting up to `wait_ms` for new output, the end (`until: exit`) or a "
            "regex. Returns the job snapshot; `next_cursor`, `eof`, `total_bytes` tell what is "
            "left (absent: nothing is). `tail: true` gives the last `max_bytes`; `stream` picks "
            "stdout or stderr. Fields left out have their default (see the output schema).",
            S.READ_INPUT,
            S.SNAPSHOT_OUTPUT,
            _read,
            read_only=True,
            progress=True,
            wire=WireShape(lean=_lean_snapshot),
        ),
        Tool(
            "write",
            "Send input to a job",
            "Send text and/or keys (enter, ctrl-c, up, tab, ...) to a running job's stdin or "
            "terminal; `eof: true` closes stdin. Returns the output produced since, once it "
            "settles (up to `yield_ms`). Fields left out have their default.",
            S.WRITE_INPUT,
            S.SNAPSHOT_OUTPUT,
            _write,
            progress=True,
            wire=WireShape(summary_arg="purpose", lean=_lean_snapshot),
        ),
        Tool(
            "signal",
            "Signal or stop a job",
            "Send a signal to a job's whole process tree. `terminate` (default) sends TERM "
            "then KILL after the grace period; `interrupt` is ctrl-c. On a finished job it "
            "kills processes the job left running (`lingering_pids`). Fields left out have their "
            "default.",
            S.SIGNAL_INPUT,
            S.SNAPSHOT_OUTPUT,
            _signal,
            destructive=True,
            wire=WireShape(summary_arg="purpose", lean=_lean_snapshot),
        ),
        Tool(
            "list",
            "List jobs and shells",
            "List jobs (running and recent) and open persistent shells. Fields left out have "
            "their default (see the output schema).",
            S.LIST_INPUT,
            S.LIST_OUTPUT,
            _list,
            read_only=True,
            idempotent=True,
            wire=WireShape(lean=_lean_list),
        ),
        Tool(
            "shell_open",
            "Open a persistent shell",
            "Start a persistent interactive shell (bash, or zsh) on a terminal. Run commands "
            "in it with `exec {shell_id, command}`: cwd, variables, functions, aliases and "
            "activated virtualenvs persist between commands. Fields left out have their default.",
            S.SHELL_OPEN_INPUT,
            S.SHELL_OPEN_OUTPUT,
            _shell_open,
            wire=WireShape(lean=_lean_shell_open),
        ),
        Tool(
            "shell_close",
            "Close a persistent shell",
            "Close a shell and kill every process in it. `cleanup_complete` left out: true.",
            S.SHELL_CLOSE_INPUT,
            S.SHELL_CLOSE_OUTPUT,
            _shell_close,
            destructive=True,
            idempotent=True,
            wire=WireShape(lean=_lean_shell_close),
        ),
        Tool(
            "search",
            "Search files",
            SEARCH_DESCRIPTION + " Fields left out have their default (see the output schema).",
            S.SEARCH_INPUT,
            S.SEARCH_OUTPUT,
            _search,
            read_only=True,
            idempotent=True,
            wire=WireShape(lean=_lean_search),
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


PROFILE = Profile("conch", conch_tools)
