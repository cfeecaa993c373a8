"""The default profile ``conch``: eight tools, thin handlers on the engine.

Hosts show at most eight tools (Codex's ``tool_search`` returns eight), so two capabilities
ride on others: closing a shell is a ``signal`` with ``shell_id``, and the server's facts are
``list {info: true}``; ``shell_close`` and ``info`` stay callable by name for clients that use
them, unlisted. Each wait ends before the calling host's own timeout, and each inline window stays
below where the host cuts a result (conch/tools/hosts.py)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import conch.core as core
from conch.core import Engine
from conch.tools import lean as L
from conch.tools import red_window
from conch.tools import schemas as S
from conch.tools.context import ToolContext
from conch.tools.hosts import IN_PROCESS, TRANSPORTS
from conch.tools.profiles._common import Profile
from conch.tools.tool import Tool, WireShape


def _without(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in names}


def _fitted(
    rt: Engine,
    ctx: ToolContext,
    args: dict[str, Any],
    wait: tuple[str, int],
    budget: str | None = None,
) -> tuple[dict[str, Any], bool]:
    """``args`` with the wait (name, default) ending before the host's timeout, and the
    inline window (``budget``) below where the host cuts a result (conch/tools/hosts.py);
    and whether the horizon cut the wait asked for."""
    if ctx.host is None and not rt.config.host_timeout_ms:
        return args, False
    out = dict(args)
    name, default = wait
    asked = out.get(name, default)
    out[name] = ctx.within_horizon(asked, rt.config)
    if budget is not None:
        given = out.get(budget, rt.config.default_max_output_bytes)
        out[budget] = min(given, (ctx.host or IN_PROCESS).max_output_bytes)
    return out, out[name] < asked


def _still_running(result: dict[str, Any], waited: bool) -> dict[str, Any]:
    """A wait that ended with the job running says so, as a fact that is no error, where a
    model could take it for one: an exec that waited by default or as long as the host let it,
    a read whose wait the host cut."""
    if waited and L.still_running(result):
        result["note"] = L.STILL_RUNNING
    return result


# `purpose` is the call's (its label, for the dashboard), not the request's
#: a shell's id (``s_`` and hex), as opposed to a name the caller gives
_SHELL_ID = re.compile(r"^s_[0-9a-f]+$")


async def _exec(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    wait = ("yield_ms", rt.config.default_yield_ms)
    fitted, cut = _fitted(rt, ctx, _without(args, "purpose"), wait, "max_output_bytes")
    try:
        result = dict(await rt.exec(core.ExecRequest(**fitted), ctx.engine_context(warm=True)))
    except core.ConchError as e:
        # a shell named in exec opens on first use (a call less than shell_open + exec); an
        # id that is gone stays not_found
        name = fitted.get("shell_id")
        if e.code != "not_found" or not isinstance(name, str) or _SHELL_ID.match(name):
            raise
        opened = await rt.shell_open(core.ShellOpenRequest(name=name, cwd=fitted.get("cwd")))
        fitted = {**_without(fitted, "cwd"), "shell_id": opened["shell_id"]}
        result = dict(await rt.exec(core.ExecRequest(**fitted), ctx.engine_context(warm=True)))
        result["shell_opened"] = True
    result = await red_window.shrink(rt, result, args)
    # the note where the early return was not the caller's choice: the default wait, or one
    # the host's horizon cut (a yield_ms the caller gave and got is its own early return)
    waited = fitted.get("yield_ms", rt.config.default_yield_ms) > 0
    return _still_running(result, waited and (cut or "yield_ms" not in args))


async def _read(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    fitted, cut = _fitted(rt, ctx, args, ("wait_ms", 0), "max_bytes")
    result = dict(await rt.read(core.ReadRequest(**fitted)))
    result = await red_window.shrink(rt, result, args)
    return _still_running(result, cut)


async def _write(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    fitted, _ = _fitted(rt, ctx, _without(args, "purpose"), ("yield_ms", 1000), "max_bytes")
    return dict(await rt.write(core.WriteRequest(**fitted)))


async def _signal(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    args, _ = _fitted(rt, ctx, _without(args, "purpose"), ("wait_ms", 2000), "max_bytes")
    shell_id = args.pop("shell_id", None)
    if shell_id is not None:  # closing a shell (and everything in it)
        if "job_id" in args:
            raise core.ConchError(
                "invalid_argument", "give job_id or shell_id, not both", field="shell_id"
            )
        if args.get("signal", "terminate") not in ("terminate", "kill"):
            raise core.ConchError(
                "invalid_argument",
                "a shell is closed with terminate or kill; signal the command it runs by its "
                "job_id",
                field="signal",
            )
        return dict(await rt.shell_close(shell_id))
    if "job_id" not in args:
        raise core.ConchError(
            "invalid_argument", "give job_id (or shell_id to close a shell)", field="job_id"
        )
    return dict(await rt.signal(core.SignalRequest(**args)))


async def _list(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    result = dict(await rt.list(**_without(args, "info")))
    if args.get("info"):
        result["info"] = await _info(rt, {}, ctx)
    return result


async def _shell_open(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_open(core.ShellOpenRequest(**args)))


async def _shell_close(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.shell_close(**args))


async def _search(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return dict(await rt.search(core.SearchRequest(**args)))


async def _changes(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    rest = _without(args, "job_id", "force")
    result = await rt.changes(args["job_id"], force=tuple(args.get("force", ())), **rest)
    return L.changes_full(result)


async def _info(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    h = ctx.wait_horizon(rt.config)
    return {
        **await rt.info(),
        "profiles": list(rt.config.profiles),
        "transports": list(TRANSPORTS),
        # how long one wait may last for the caller, and why (tools/hosts.py)
        "host": {
            "name": (ctx.host or IN_PROCESS).name,
            "timeout_ms": h.timeout_ms,
            "horizon_ms": h.ms,
            "source": h.source,
        },
    }


def _lean_snapshot(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.snapshot(r, cwd)


def _lean_followup(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    """read and write: the job's name was said by its exec (and is in `list`)."""
    return L.snapshot(r, cwd, named=False)


def _lean_signal(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.snapshot(r, cwd, named=False) if "job_id" in r else L.shell_close(r)


def _lean_list(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.listing(r, cwd)


def _lean_shell_open(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.shell_summary(r)


def _lean_shell_close(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.shell_close(r)


def _lean_search(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.search(r)


def _lean_changes(r: dict[str, Any], cwd: str) -> dict[str, Any]:
    return L.changes(r)


#: how a model should read a lean result (said once per tool that returns a job snapshot)
LEAN_NOTE = (
    "A field left out of the result has its default (see the output schema): e.g. no "
    "`exit_code` while running, no `next_cursor`/`total_bytes`/`eof` once everything was "
    "read (no `total_bytes` either while all printed so far was read), no `truncated` when "
    "nothing was cut."
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
            "Waits up to `yield_ms` (default 10 s, at most 10 min, less where the host would "
            "time the call out): if the job is still running you get `state: running` (not an "
            "error) with the output so far, and it keeps running in the background — use "
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
        "optionally waiting up to `wait_ms` for `until`: new output (default), the end "
        "(`exit`), no output for `quiet_ms` (`quiet`), a prompt (`input`), a regex, or a list "
        "of these. `job_ids` waits on several jobs and returns the first that is ready. "
        "Returns the job snapshot; `next_cursor`, `eof`, `total_bytes` tell what is left "
        "(absent: nothing is). `tail: true` gives the last `max_bytes`; `stream` picks "
        "stdout or stderr. `screen: true` (pty and shell jobs): `output` is the terminal's "
        "screen as it looks now, for a full-screen program (top, vim, less, a progress bar) "
        "instead of its stream of redraws; `screen` gives its size and cursor. "
        "`human_input` says a person typed into the job, or ran a command in its shell, from "
        "the dashboard (when, how many bytes; never what); while `attended`, `write` answers "
        "`busy`. "
        "Fields left out have their default (see the output schema)."
    ),
    "write": (
        "Send text and/or keys (enter, ctrl-c, up, tab, ...) to a running job's stdin or "
        "terminal; `eof: true` closes stdin; `resize: {rows, cols}` sets a pty or shell "
        "job's terminal size (a full-screen program redraws). Returns the output produced "
        "since, once it settles (up to `yield_ms`). `busy` (retryable) while a person types "
        "into the job from the dashboard. Fields left out have their default."
    ),
    "signal": (
        "Send a signal to a job's whole process tree. `terminate` (default) sends TERM "
        "then KILL after the grace period; `interrupt` is ctrl-c. On a finished job it "
        "kills processes the job left running (`lingering_pids`). With `shell_id` instead of "
        "`job_id` (terminate or kill) it closes that persistent shell and kills every process "
        "in it: the result is `{shell_id, state: closed}`. Waits up to `wait_ms` (default "
        "2000, at most 600000) for the job to end. Fields left out have their default."
    ),
    "list": (
        "List jobs (running and recent) and open persistent shells. `info: true` adds "
        "`info`, about this server: version, platform, shells, ripgrep, containment, whether "
        "job changes are tracked, limits, and how long one wait may last for your host. "
        "Fields left out have their default (see the output schema)."
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
        "change tracking, limits, profiles and transports (also `list {info: true}`)."
    ),
    "changes": (
        "What a finished job changed in the workspace, and undo. Returns the counts "
        "(`added`, `modified`, `deleted`), `files` (path, change, type, size, mode) and a "
        "bounded unified `diff` of text files; `next_cursor` pages on. `undo: true` restores "
        "exactly what was there before (content, mode, type, symlink target) and removes what "
        "the job added, touching nothing else: if a path was changed again since, it refuses "
        "with `conflict` naming the paths (pass them in `force` to take them back anyway). "
        "An undo's result is its own change set: `changes {job_id: <its id>, undo: true}` "
        "redoes. `not_covered` says what the record leaves out (files over the size cap, "
        "excluded or special files, writes outside the workspace); `overlapping_jobs`, jobs "
        "that ran at the same time. Fields left out have their default."
    ),
    "search": SEARCH_DESCRIPTION + " Fields left out have their default (see the output schema).",
}


# name, title, input schema, output schema, handler, lean form, what it is (docs/spec.md §6): r =
# read only, d = destructive, i = idempotent, p = sends progress while it waits, s = `purpose` is
# its _meta summary
_SNAP, _LEAN = S.SNAPSHOT_OUTPUT, _lean_snapshot
_Table = tuple[tuple[str, str, dict[str, Any], dict[str, Any], Any, Any, str], ...]
_CATALOGUE: _Table = (
    ("exec", "Run a command", S.EXEC_INPUT, _SNAP, _exec, _LEAN, "dps"),
    ("read", "Read a job's output", S.READ_INPUT, _SNAP, _read, _lean_followup, "rp"),
    ("write", "Send input to a job", S.WRITE_INPUT, _SNAP, _write, _lean_followup, "ps"),
    ("signal", "Signal a job, or close a shell", S.SIGNAL_INPUT, S.SIGNAL_OUTPUT, _signal,
     _lean_signal, "ds"),
    ("list", "List jobs and shells", S.LIST_INPUT, S.LIST_OUTPUT, _list, _lean_list, "ri"),
    ("shell_open", "Open a persistent shell", S.SHELL_OPEN_INPUT, S.SHELL_OPEN_OUTPUT,
     _shell_open, _lean_shell_open, ""),
    ("search", "Search files", S.SEARCH_INPUT, S.SEARCH_OUTPUT, _search, _lean_search, "ri"),
    ("changes", "A job's changes, and undo", S.CHANGES_INPUT, S.CHANGES_OUTPUT, _changes,
     _lean_changes, "d"),
)  # fmt: skip
# callable by name, not listed: what clients of the nine-tool profile call
_UNLISTED = (
    ("shell_close", "Close a persistent shell", S.SHELL_CLOSE_INPUT, S.SHELL_CLOSE_OUTPUT,
     _shell_close, _lean_shell_close, "di"),
    ("info", "About this Conch server", S.INFO_INPUT, S.INFO_OUTPUT, _info, None, "ri"),
)  # fmt: skip


def _tools(table: _Table) -> tuple[Tool, ...]:
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
        for name, title, inp, out, handler, lean, kind in table
    )


@lru_cache(maxsize=1)
def conch_tools() -> tuple[Tool, ...]:
    return _tools(_CATALOGUE)


@lru_cache(maxsize=1)
def unlisted_tools() -> tuple[Tool, ...]:
    return _tools(_UNLISTED)


# the calls as the first 250 characters of the instructions show them (Profile.call_sheet)
CALL_SHEET = (
    "exec{command,yield_ms,pty,ready,shell_id,cwd,env}; read{job_id,until:exit|quiet|input|"
    "{pattern},wait_ms}; write{job_id,text|keys}; signal{job_id}; shell_open{cwd,env}; "
    "search{pattern}; changes{job_id,undo}."
)
PROFILE = Profile("conch", conch_tools, unlisted=unlisted_tools, call_sheet=CALL_SHEET)
