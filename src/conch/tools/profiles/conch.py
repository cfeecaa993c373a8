"""The default profile ``conch`` (SPEC §6): nine thin handlers on the engine."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import conch.core as core
from conch.core import Engine
from conch.tools import lean as L
from conch.tools import schemas as S
from conch.tools.context import ToolContext
from conch.tools.profiles._common import Profile
from conch.tools.tool import Tool, WireShape


def _without(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in names}


# `purpose` is the call's (its label, for the dashboard), not the request's
async def _exec(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    req = core.ExecRequest(**_without(args, "purpose"))
    return dict(await rt.exec(req, ctx.engine_context(warm=True)))


async def _read(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.read(core.ReadRequest(**args)))


async def _write(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.write(core.WriteRequest(**_without(args, "purpose"))))


async def _signal(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.signal(core.SignalRequest(**_without(args, "purpose"))))


async def _list(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.list(**args))


async def _shell_open(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_open(core.ShellOpenRequest(**args)))


async def _shell_close(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_close(**args))


async def _search(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.search(core.SearchRequest(**args)))


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


DESCRIPTIONS = {
    "exec": EXEC_DESCRIPTION,
    "read": (
        "Read a job's output from where the last read stopped (or from `cursor`), "
        "optionally waiting up to `wait_ms` for new output, the end (`until: exit`) or a "
        "regex. Returns the job snapshot; `next_cursor`, `eof`, `total_bytes` tell what is "
        "left (absent: nothing is). `tail: true` gives the last `max_bytes`; `stream` picks "
        "stdout or stderr. Fields left out have their default (see the output schema)."
    ),
    "write": (
        "Send text and/or keys (enter, ctrl-c, up, tab, ...) to a running job's stdin or "
        "terminal; `eof: true` closes stdin. Returns the output produced since, once it "
        "settles (up to `yield_ms`). Fields left out have their default."
    ),
    "signal": (
        "Send a signal to a job's whole process tree. `terminate` (default) sends TERM "
        "then KILL after the grace period; `interrupt` is ctrl-c. On a finished job it "
        "kills processes the job left running (`lingering_pids`). Fields left out have their "
        "default."
    ),
    "list": (
        "List jobs (running and recent) and open persistent shells. Fields left out have "
        "their default (see the output schema)."
    ),
    "shell_open": (
        "Start a persistent interactive shell (bash, or zsh) on a terminal. Run commands "
        "in it with `exec {shell_id, command}`: cwd, variables, functions, aliases and "
        "activated virtualenvs persist between commands. Fields left out have their default."
    ),
    "shell_close": (
        "Close a shell and kill every process in it. `cleanup_complete` left out: true."
    ),
    "info": (
        "Version, platform, available shells, ripgrep, process containment level, "
        "limits, profiles and transports."
    ),
    "search": SEARCH_DESCRIPTION + " Fields left out have their default (see the output schema).",
}


# name, title, input schema, output schema, handler, lean form, what it is (SPEC §6): r = read
# only, d = destructive, i = idempotent, p = sends progress while it waits, s = `purpose` is
# its _meta summary
_SNAP, _LEAN = S.SNAPSHOT_OUTPUT, _lean_snapshot
_CATALOGUE: tuple[tuple[str, str, dict[str, Any], dict[str, Any], Any, Any, str], ...] = (
    ("exec", "Run a command", S.EXEC_INPUT, _SNAP, _exec, _LEAN, "dps"),
    ("read", "Read a job's output", S.READ_INPUT, _SNAP, _read, _LEAN, "rp"),
    ("write", "Send input to a job", S.WRITE_INPUT, _SNAP, _write, _LEAN, "ps"),
    ("signal", "Signal or stop a job", S.SIGNAL_INPUT, _SNAP, _signal, _LEAN, "ds"),
    ("list", "List jobs and shells", S.LIST_INPUT, S.LIST_OUTPUT, _list, _lean_list, "ri"),
    ("shell_open", "Open a persistent shell", S.SHELL_OPEN_INPUT, S.SHELL_OPEN_OUTPUT,
     _shell_open, _lean_shell_open, ""),
    ("shell_close", "Close a persistent shell", S.SHELL_CLOSE_INPUT, S.SHELL_CLOSE_OUTPUT,
     _shell_close, _lean_shell_close, "di"),
    ("search", "Search files", S.SEARCH_INPUT, S.SEARCH_OUTPUT, _search, _lean_search, "ri"),
    ("info", "About this Conch server", S.INFO_INPUT, S.INFO_OUTPUT, _info, None, "ri"),
)  # fmt: skip


@lru_cache(maxsize=1)
def conch_tools() -> tuple[Tool, ...]:
    return tuple(
        Tool(
            name,
            title,
            DESCRIPTIONS[name],
            inp,
            out,
            handler,
            read_only="r" in kind,
            destructive="d" in kind,
            idempotent="i" in kind,
            progress="p" in kind,
            wire=WireShape(summary_arg="purpose" if "s" in kind else None, lean=lean),
        )
        for name, title, inp, out, handler, lean, kind in _CATALOGUE
    )


PROFILE = Profile("conch", conch_tools)
