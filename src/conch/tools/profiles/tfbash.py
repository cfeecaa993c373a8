"""Profile ``tfbash``: tfbash-mcp 0.2.0's seven ``shell_*`` tools on the runtime's persistent
shells — a drop-in (SPEC §7), proven against the published original by
``tests/differential/test_tfbash_diff.py``.

Mapping: ``shell_id`` is the Conch shell id, ``exec_id`` the Conch job id of the command run in
it, cursors are byte offsets into the job's log (its text exactly as printed, ``\\n`` line
ends). Like the original's per-execution ring buffer of ``max_output_bytes``, an execution
keeps its newest ``max_output_bytes``: ``buffer_start_cursor`` is where that window starts and a
read from before it gets ``truncated_before_cursor``. Shells run with terminal echo off (the
original's PTY does not echo what ``shell_write`` sends). Results, the error envelope, the
validation messages, the tool descriptors, the overview resource and the server's identity are
the original's; ``isError`` is set only when the operation was rejected.

Bugs dropped (SPEC §4, seed-contracts §4): an interrupt ends the whole command list and its
execution at once; terminate/kill stop the whole command line; output has no prompt, marker
or bracketed-paste noise; close takes well under a second.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conch.core.engine import Engine
from conch.core.jobs.snapshot import observe, snapshot
from conch.core.output import window as win
from conch.core.output.utf8 import boundary_at_or_after
from conch.core.results import ShellSummary, parse_timestamp, timestamp
from conch.errors import ConchError
from conch.tools.context import CallContext
from conch.tools.profiles._common import (
    Profile,
    ProfileError,
    ProfileState,
    Resource,
    guard,
    nbytes,
)
from conch.tools.tool import Tool

if TYPE_CHECKING:
    from conch.config import Config
    from conch.core.jobs.job import Job

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

# The original's MCP identity, announced when this profile is served alone (SPEC §7).
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
FAILED_TEXT = "The tool failed unexpectedly."

OVERVIEW_URI = "window://io.github.a2c-smcp.tfbash/shell-overview"
OVERVIEW_TAIL_CHARS = 500
OUTPUT_BUFFER_BYTES = 4 * 1024 * 1024
MAX_READ_BYTES = 65536
MAX_COMMAND_BYTES = 262144
MAX_WRITE_BYTES = 65536
MAX_ENV_VALUE_BYTES = 32768
MAX_SHELLS = 8  # the original's --max-command-shells default
TERMINAL_SIZE = (24, 80)  # the original's PTY (pexpect's default dimensions)
_MAX_ID_BYTES = 128

RETRYABLE = {"shell_busy": True, "resource_limit": True}
MESSAGES = {
    "invalid_argument": "The request is invalid.",
    "shell_not_found": "The shell was not found.",
    "shell_busy": "The shell is busy.",
    "shell_closing": "The shell is closing.",
    "shell_unavailable": "The shell is temporarily unavailable.",
    "exec_not_found": "The execution was not found.",
    "exec_not_active": "The execution is not active.",
    "invalid_cursor": "The output cursor is invalid.",
    "resource_limit": "A configured resource limit was reached.",
    "shell_start_failed": "The shell failed to start.",
    "unsupported_shell": "The shell is unsupported.",
}
# bash's $? for a foreground command ended by the signal (what the original reports)
SIGNAL_STATUS = {"interrupt": 130, "terminate": 143, "kill": 137}


class _Reject(ProfileError):
    """The operation was rejected: becomes ``{"error": {...}}`` with isError."""

    def __init__(
        self,
        code: str,
        message: str | None = None,
        retryable: bool | None = None,
        *,
        ids: bool = True,
    ):
        super().__init__(code, message or MESSAGES[code])
        self.retryable = RETRYABLE.get(code, False) if retryable is None else retryable
        self.ids = ids  # echo the request's shell_id/exec_id (validation errors do not)


def _envelope(e: _Reject, args: Mapping[str, Any]) -> dict[str, Any]:
    err: dict[str, Any] = {"code": e.code, "message": e.message, "retryable": e.retryable}
    if e.ids:
        for key in ("shell_id", "exec_id"):  # echoed only when given (and so valid)
            v = args.get(key)
            if isinstance(v, str) and v:
                err[key] = v
    return {"error": err}


# -- per-runtime bookkeeping (what the runtime does not track for tfbash) -------------------------


class _State:
    """(When each shell was opened and its latest execution are the shell's own facts, in core.)"""

    def __init__(self) -> None:
        self.capacity: dict[str, int] = {}  # exec id -> its max_output_bytes
        self.signalled: dict[str, str] = {}  # exec id -> the last signal delivered to it


def _shells(rt: Engine) -> dict[str, ShellSummary]:
    return {s["shell_id"]: s for s in rt.shells.summaries()} if rt.shells is not None else {}


def _shell(rt: Engine, shell_id: str, *, for_exec: bool = False) -> ShellSummary:
    sh = _shells(rt).get(shell_id)
    if sh is None:
        raise _Reject("shell_not_found")
    if sh["state"] in ("closing", "closed"):
        raise _Reject("shell_closing")
    if for_exec:
        if sh["state"] == "exited":  # the shell died (e.g. `exit 3`): only close is left
            raise _Reject("shell_unavailable", retryable=False)
        if sh["state"] == "starting":  # being rebuilt
            raise _Reject("shell_unavailable", retryable=True)
        if sh["state"] == "busy":
            raise _Reject("shell_busy")
    return sh


def _check_exec(rt: Engine, shell_id: str, exec_id: str) -> Job:
    try:
        job = rt.job(exec_id)
    except ConchError:
        raise _Reject("exec_not_found") from None
    if job.shell_id != shell_id or job.job_id != exec_id:
        raise _Reject("exec_not_found")
    return job


def _shell_status(sh: ShellSummary | None) -> str:
    if sh is None or sh["state"] in ("closing", "closed"):
        return "closing"
    return "error" if sh["state"] == "exited" else "ready"


# -- the execution window --------------------------------------------------------------------------


def _buffer_start(job: Job, capacity: int) -> int:
    """Where the execution's retained window starts: its newest ``capacity`` bytes, never
    starting inside a character (the original's ring buffer evicts whole code points)."""
    total = job.log.size()
    base = total - capacity
    if base <= 0:
        return 0
    head = job.log.read(base, min(total, base + 4))
    return base + boundary_at_or_after(head, 0)


def _inside_character(job: Job, cursor: int) -> bool:
    if cursor <= 0 or cursor >= job.log.size():
        return False
    b = job.log.read(cursor, cursor + 1)
    return bool(b) and (b[0] & 0xC0) == 0x80


def _window(
    rt: Engine, st: _State, shell_id: str, job: Job, cursor: int, max_bytes: int
) -> dict[str, Any]:
    """tfbash's execution snapshot of ``[cursor, …)`` (at most ``max_bytes``)."""
    start = _buffer_start(job, st.capacity.get(job.job_id, OUTPUT_BUFFER_BYTES))
    truncated = cursor < start
    begin = max(cursor, start)
    observe(job)
    w = win.forward(
        job.log, begin, job.log.size(), max_bytes, stream=None, raw=True, final=job.terminal
    )
    s = snapshot(job, w)
    state = s["state"]
    exit_code = None
    cwd: str | None = s["cwd"]
    sh = _shells(rt).get(shell_id)
    shell_status = _shell_status(sh)
    if state == "running":
        status = "running"
    elif state == "exited":
        if shell_status == "error" and sh is not None and sh["last_job_id"] == s["job_id"]:
            status, cwd = "shell_error", None  # the shell itself ended during this command
        else:
            status, exit_code = "exited", s["exit_code"]
    elif state == "cancelled" and s["exit_code"] is not None and not s["restarted"]:
        # the shell came back after the signal: bash's $?. The runtime ends a shell command
        # line as Ctrl-C does first, so a status of a signal death is reported as the death by
        # the signal that was asked for (what the original, which sends that one, reports);
        # a command that handled the signal and exited on its own keeps its status
        status, exit_code = "exited", s["exit_code"]
        if exit_code in SIGNAL_STATUS.values():
            exit_code = SIGNAL_STATUS.get(st.signalled.get(job.job_id, ""), exit_code)
    elif state == "timed_out":
        status = "timeout"
    else:
        status = "cancelled"
    out: dict[str, Any] = {
        "shell_id": shell_id,
        "exec_id": s["job_id"],
        "status": status,
        "exit_code": exit_code,
        "output": w.text,
        "buffer_start_cursor": start,
        "next_cursor": w.next_cursor,
        "truncated_before_cursor": truncated,
        "eof": s["eof"],
    }
    if status != "running":
        out["duration_ms"] = s["duration_ms"]
        out["cwd"] = os.path.realpath(cwd) if cwd else cwd
        out["shell_status"] = shell_status
        out["shell_rebuilt"] = bool(s["restarted"]) and status in ("timeout", "cancelled")
    return out


# -- argument validation: the original's (pydantic strict mode) rules and messages -------------


class _Invalid(Exception):
    def __init__(self, loc: str, msg: str) -> None:
        super().__init__(f"{loc}: {msg}" if loc else msg)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid_utf8(v: str, loc: str) -> None:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _Invalid(
            loc, "Input should be a valid string, unable to parse raw data as a unicode string"
        ) from None


def _string(v: Any, loc: str) -> str:
    if not isinstance(v, str):
        raise _Invalid(loc, "Input should be a valid string")
    _valid_utf8(v, loc)
    return v


def _min1(v: str, loc: str) -> None:
    if not v:
        raise _Invalid(loc, "String should have at least 1 character")


def _identifier(v: Any, loc: str) -> None:
    v = _string(v, loc)
    _min1(v, loc)
    if len(v) > _MAX_ID_BYTES:
        raise _Invalid(loc, f"String should have at most {_MAX_ID_BYTES} characters")
    if len(v.encode()) > _MAX_ID_BYTES:
        raise _Invalid(loc, "Value error, must contain between 1 and 128 UTF-8 bytes")


def _command(v: Any, loc: str) -> None:
    v = _string(v, loc)
    _min1(v, loc)
    if "\x00" in v:
        raise _Invalid(loc, "Value error, must not contain U+0000")
    if len(v.encode()) > MAX_COMMAND_BYTES:
        raise _Invalid(loc, f"Value error, must not exceed {MAX_COMMAND_BYTES} UTF-8 bytes")


def _integer(v: Any, loc: str, lo: int, hi: int | None = None) -> None:
    if not _is_int(v):
        raise _Invalid(loc, "Input should be a valid integer")
    if v < lo:
        raise _Invalid(loc, f"Input should be greater than or equal to {lo}")
    if hi is not None and v > hi:
        raise _Invalid(loc, f"Input should be less than or equal to {hi}")


def _cwd(v: Any, loc: str) -> None:
    v = _string(v, loc)
    if "\x00" in v:
        raise _Invalid(loc, "Value error, must not contain U+0000")
    if not v.startswith("/"):
        raise _Invalid(loc, f"Value error, must be an absolute {_platform()} path")


_ENV_KEY = "^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NO_NUL = "^[^\\x00]*$"


def _env(v: Any, loc: str) -> None:
    if not isinstance(v, dict):
        raise _Invalid(loc, "Input should be a valid dictionary")
    for key, value in v.items():
        if not _ENV_KEY_RE.fullmatch(key):
            raise _Invalid(f"{loc}.{key}.[key]", f"String should match pattern '{_ENV_KEY}'")
        value = _string(value, f"{loc}.{key}")
        if "\x00" in value:
            raise _Invalid(f"{loc}.{key}", f"String should match pattern '{_NO_NUL}'")
        if len(value.encode()) > MAX_ENV_VALUE_BYTES:
            raise _Invalid(
                f"{loc}.{key}", f"Value error, must not exceed {MAX_ENV_VALUE_BYTES} UTF-8 bytes"
            )
    if len(v) > 256:
        raise _Invalid(
            loc, f"Dictionary should have at most 256 items after validation, not {len(v)}"
        )


def _startup(v: Any, loc: str) -> None:
    if v is not None:
        _command(v, loc)


def _write_text(v: Any, loc: str) -> None:
    v = _string(v, loc)
    if len(v.encode()) > MAX_WRITE_BYTES:
        raise _Invalid(loc, f"Value error, must not exceed {MAX_WRITE_BYTES} UTF-8 bytes")


def _signal_name(v: Any, loc: str) -> None:
    if v not in ("interrupt", "terminate", "kill") or not isinstance(v, str):
        raise _Invalid(loc, "Input should be 'interrupt', 'terminate' or 'kill'")


_Field = tuple[str, Callable[[Any, str], None], bool]  # name, check, required
_FIELDS: dict[str, list[_Field]] = {
    "shell_open": [
        ("cwd", _cwd, False),
        ("env", _env, False),
        ("startup_command", _startup, False),
    ],
    "shell_exec": [
        ("shell_id", _identifier, True),
        ("command", _command, True),
        ("yield_ms", lambda v, loc: _integer(v, loc, 0, 60000), False),
        ("timeout_ms", lambda v, loc: _integer(v, loc, 1, 86400000), False),
        ("max_output_bytes", lambda v, loc: _integer(v, loc, 4096), False),
    ],
    "shell_read": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("cursor", lambda v, loc: _integer(v, loc, 0), True),
        ("max_bytes", lambda v, loc: _integer(v, loc, 4), False),
        ("wait_ms", lambda v, loc: _integer(v, loc, 0, 60000), False),
    ],
    "shell_write": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("text", _write_text, True),
    ],
    "shell_signal": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("signal", _signal_name, True),
    ],
    "shell_list": [],
    "shell_close": [("shell_id", _identifier, True)],
}
# checks across fields, after every field passed (pydantic's model validators: no location)
_LIMITS = {
    "shell_exec": ("max_output_bytes", OUTPUT_BUFFER_BYTES),
    "shell_read": ("max_bytes", MAX_READ_BYTES),
}


def _validator(name: str) -> Callable[[dict[str, Any]], None]:
    fields = _FIELDS[name]
    known = {f[0] for f in fields}

    def check(args: dict[str, Any]) -> None:
        try:
            for field, fn, required in fields:
                if field in args:
                    fn(args[field], field)
                elif required:
                    raise _Invalid(field, "Field required")
            for key in args:
                if key not in known:
                    raise _Invalid(str(key), "Extra inputs are not permitted")
            if name in _LIMITS:
                field, most = _LIMITS[name]
                if args.get(field, most) > most:
                    raise _Invalid("", f"Value error, {field} must not exceed {most}")
        except _Invalid as e:
            raise ConchError("invalid_argument", str(e)) from None

    return check


def _platform() -> str:
    return "macos" if sys.platform == "darwin" else "linux"


# -- handlers --------------------------------------------------------------------------------------


async def _open(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    cwd = args.get("cwd")
    if cwd is not None and not os.path.isdir(cwd):
        raise _Reject("invalid_argument")
    open_shells = [s for s in _shells(rt).values() if s["state"] not in ("closing", "closed")]
    if len(open_shells) >= min(MAX_SHELLS, rt.config.max_shells):
        raise _Reject("resource_limit")
    try:
        r = await rt.open_shell(
            cwd=cwd,
            env=args.get("env") or {},
            startup_command=args.get("startup_command"),
            echo=False,  # the original's PTY never echoes what shell_write sends
            size=TERMINAL_SIZE,
        )
    except ConchError as e:
        code = {
            "cwd_not_found": "invalid_argument",
            "invalid_argument": "invalid_argument",
            "capacity": "resource_limit",
        }.get(e.code, "shell_start_failed")
        raise _Reject(code) from None
    return {
        "shell_id": r["shell_id"],
        "status": "ready",
        "cwd": os.path.realpath(r["cwd"]),  # `pwd -P`: the physical path
        "dialect": r["shell"],
    }


async def _exec(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    _shell(rt, shell_id, for_exec=True)
    capacity = args.get("max_output_bytes", OUTPUT_BUFFER_BYTES)
    try:
        first = await rt.exec_job(
            shell_id=shell_id,
            command=args["command"],
            yield_ms=args.get("yield_ms", 10000),
            timeout_ms=args.get("timeout_ms", 120000),
            max_output_bytes=0,
            shell_env=ctx.shell_env(),
            caller_session_id=ctx.caller_session_id(),
            on_start=ctx.job_started,
        )
    except ConchError as e:
        code = {
            "shell_busy": "shell_busy",
            "not_found": "shell_not_found",
            "busy": "resource_limit",
            "invalid_argument": "invalid_argument",
        }.get(e.code, "shell_unavailable")
        raise _Reject(code, retryable=False if code == "shell_unavailable" else None) from None
    st = ctx.profile_state(_State)
    st.capacity[first["job_id"]] = capacity
    if len(st.capacity) > 2 * rt.config.max_jobs:  # forget executions the runtime evicted
        kept = {job.job_id for job in rt.jobs}
        st.capacity = {k: v for k, v in st.capacity.items() if k in kept}
        st.signalled = {k: v for k, v in st.signalled.items() if k in kept}
    # the exec result is a read from cursor 0 of up to max_output_bytes: the retained window
    return _window(rt, st, shell_id, rt.job(first["job_id"]), 0, capacity)


async def _read(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    _shell(rt, shell_id)
    job = _check_exec(rt, shell_id, exec_id)
    cursor = args["cursor"]
    st = ctx.profile_state(_State)
    start = _buffer_start(job, st.capacity.get(exec_id, OUTPUT_BUFFER_BYTES))
    if cursor > job.log.size() or (cursor >= start and _inside_character(job, cursor)):
        raise _Reject("invalid_cursor")
    wait_ms = args.get("wait_ms", 0)
    if wait_ms > 0 and cursor >= start and not job.terminal:
        # returns at once when there is output past the cursor or the execution ended
        await job.wait_until(
            lambda: job.log.size() > cursor or (job.terminal and job.log.closed), wait_ms / 1000
        )
    return _window(rt, st, shell_id, job, cursor, args.get("max_bytes", MAX_READ_BYTES))


def _active(rt: Engine, args: Mapping[str, Any]) -> Job:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    sh = _shell(rt, shell_id)
    job = _check_exec(rt, shell_id, exec_id)
    if job.terminal or sh.get("job_id") != exec_id:
        raise _Reject("exec_not_active")
    return job


async def _write(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    text = args["text"]
    _active(rt, args)
    if text:
        try:
            await rt.write_job(args["exec_id"], text=text, yield_ms=0)
        except ConchError as e:
            code = "exec_not_active" if e.code != "not_found" else "exec_not_found"
            raise _Reject(code) from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "accepted",
        "accepted_bytes": nbytes(text),
    }


async def _signal(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    _active(rt, args)
    ctx.profile_state(_State).signalled[args["exec_id"]] = args["signal"]
    try:
        await rt.signal_job(args["exec_id"], args["signal"], wait_ms=0)
    except ConchError as e:
        raise _Reject("exec_not_active" if e.code != "not_found" else "exec_not_found") from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "delivered",
        "signal": args["signal"],
    }


_LIST_STATUS = {"ready": "ready", "busy": "busy", "exited": "error", "closing": "closing"}


def _dialect(config: Config) -> str:
    dialect = config.shell or "bash"
    if os.path.isabs(dialect):
        dialect = "zsh" if os.path.basename(dialect).startswith("zsh") else "bash"
    return dialect


def _context(rt: Engine, info: Mapping[str, Any]) -> dict[str, Any]:
    """shell_list's runtime and host context (the overview shows it too)."""
    dialect = _dialect(rt.config)
    version = next(
        (a.get("version_line") or a["version"] for a in info["shells"] if a["name"] == dialect),
        "",
    )
    return {
        "runtime": {
            "platform": _platform(),
            "dialect": dialect,
            "shell_version": version,
            "default_cwd": info["default_cwd"],
        },
        "host": {"mode": "standalone", "workspace_root": info["default_cwd"]},
    }


def _shell_items(rt: Engine) -> list[dict[str, Any]]:
    items = []
    for sh in _shells(rt).values():
        if sh["state"] == "starting" and not sh.get("job_id"):
            continue  # not registered until its first prompt
        status = "rebuilding" if sh["state"] == "starting" else _LIST_STATUS[sh["state"]]
        cwd = sh.get("cwd")
        items.append(
            {
                "shell_id": sh["shell_id"],
                "status": status,
                "last_known_cwd": os.path.realpath(cwd) if cwd else None,
                "active_exec_id": sh.get("job_id") if status in ("busy", "rebuilding") else None,
                "created_at_ms": round(parse_timestamp(sh["created_at"]).timestamp() * 1000),
            }
        )
    return items


async def _list(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    info = await rt.info()
    return {**_context(rt, info), "shells": _shell_items(rt)}


async def _close(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    gone = _shell(rt, shell_id)["last_job_id"]
    try:
        r = await rt.close_shell(shell_id)
    except ConchError:
        raise _Reject("shell_closing") from None
    if gone is not None:
        st = ctx.profile_state(_State)
        st.capacity.pop(gone, None)
        st.signalled.pop(gone, None)
    return {"shell_id": shell_id, "status": "closed", "cleanup_complete": r["cleanup_complete"]}


# -- the overview resource (the original's Markdown layout) -----------------------------------


def _visible(value: str) -> str:
    out = []
    for ch in value:
        cp = ord(ch)
        if ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif cp < 32 or cp == 127:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _longest_run(value: str, ch: str) -> int:
    longest = current = 0
    for c in value:
        current = current + 1 if c == ch else 0
        longest = max(longest, current)
    return longest


def _code_span(text: str) -> str:
    delim = "`" * (_longest_run(text, "`") + 1)
    return f"{delim}{text}{delim}" if len(delim) == 1 else f"{delim} {text} {delim}"


def _inline(value: object | None) -> str:
    return "—" if value is None else _code_span(_visible(str(value)))


def _table_inline(value: object | None) -> str:
    return "—" if value is None else _code_span(_visible(str(value)).replace("|", r"\|"))


def _code_block(value: str) -> str:
    fence = "`" * max(3, _longest_run(value, "`") + 1)
    return f"{fence}text\n{value}{'' if value.endswith(chr(10)) else chr(10)}{fence}"


def _created(ms: int) -> str:
    return timestamp(datetime.fromtimestamp(ms / 1000, tz=timezone.utc))


def tfbash_overview_markdown(rt: Engine, state: ProfileState | None = None) -> str:
    """Markdown for ``window://io.github.a2c-smcp.tfbash/shell-overview``, laid out as the
    original lays it out: the context, a table of shells with their latest execution, and the
    last 500 characters of each one's output. Without the runtime's profile ``state``, every
    execution is shown as if started with the default capacity and never signalled."""
    info_shells = rt.shells.available() if rt.shells is not None else []
    ctx = _context(rt, {"shells": info_shells, "default_cwd": rt.config.resolved_default_cwd})
    items = _shell_items(rt)
    lines = [
        "# Shell Overview",
        "",
        f"- Platform: {_inline(ctx['runtime']['platform'])}",
        f"- Dialect: {_inline(ctx['runtime']['dialect'])}",
        f"- Workspace: {_inline(ctx['host']['workspace_root'])}",
        f"- Shells: {len(items)}",
        "",
    ]
    if not items:
        lines.append("No active Shells.")
        return "\n".join(lines)
    lines += [
        "| Shell ID | Status | CWD | Created | Execution ID | Execution status | Exit code | "
        "Duration |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    st = state.get(_State) if state is not None else _State()
    shells = _shells(rt)
    latest: dict[str, dict[str, Any] | None] = {}
    for item in items:
        sid = item["shell_id"]
        exec_id = item["active_exec_id"] or shells[sid]["last_job_id"]
        snap = None
        if exec_id is not None:
            try:
                job = rt.job(exec_id)
            except ConchError:
                job = None
            if job is not None:
                snap = _window(rt, st, sid, job, job.log.size(), 0)
                tail = job.log.read(
                    max(0, job.log.size() - OVERVIEW_TAIL_CHARS * 4), job.log.size()
                )
                skip = boundary_at_or_after(tail, 0) if job.log.size() > len(tail) else 0
                text = tail[skip:].decode("utf-8", "replace")[-OVERVIEW_TAIL_CHARS:]
                snap = {**snap, "tail": text, "tail_truncated": job.log.size() > nbytes(text)}
        latest[sid] = snap
        dur = snap.get("duration_ms") if snap else None
        lines.append(
            "| "
            + " | ".join(
                (
                    _table_inline(sid),
                    item["status"],
                    _table_inline(item["last_known_cwd"]),
                    _created(item["created_at_ms"]),
                    _table_inline(snap["exec_id"] if snap else None),
                    snap["status"] if snap else "—",
                    str(snap["exit_code"]) if snap and snap["exit_code"] is not None else "—",
                    f"{dur} ms" if dur is not None else "—",
                )
            )
            + " |"
        )
    for item in items:
        snap = latest[item["shell_id"]]
        lines += ["", f"## {_inline(item['shell_id'])} — recent output", ""]
        if snap is None:
            lines.append("No retained execution.")
            continue
        if snap["tail_truncated"]:
            lines += ["_Earlier output was truncated._", ""]
        lines.append(_code_block(snap["tail"]) if snap["tail"] else "No output captured.")
    return "\n".join(lines)


# -- errors, text blocks, the descriptors ------------------------------------------------------


def _error_result(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if e.code == "invalid_argument":  # the arguments failed validation: no ids echoed
        return _envelope(_Reject("invalid_argument", e.message, ids=False), args), True
    if e.code == "closed":
        return _envelope(_Reject("shell_closing"), args), True
    return {}, True  # the original's "The tool failed unexpectedly." (see render_text)


def _is_error(result: dict[str, Any]) -> bool:
    return "error" in result


def render_text(result: dict[str, Any], is_error: bool) -> str:
    """The original's text block: the structured result as compact JSON."""
    if is_error and not result:
        return FAILED_TEXT
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


_CONTRACT = Path(__file__).with_name("tfbash_tools.json")


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
        return _fill(_descriptors()[name], os.path.realpath(cwd), _platform())

    return describe


_HANDLERS = {
    "shell_open": (_open, {}),
    "shell_exec": (_exec, {"destructive": True}),
    "shell_read": (_read, {"read_only": True}),
    "shell_write": (_write, {}),
    "shell_signal": (_signal, {"destructive": True}),
    "shell_list": (_list, {"read_only": True, "idempotent": True}),
    "shell_close": (_close, {"destructive": True}),
}


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's seven tools, in tfbash's order."""
    out = []
    for name, desc in _descriptors().items():
        fn, flags = _HANDLERS[name]
        out.append(
            Tool(
                name,
                name,
                desc["description"],
                desc["inputSchema"],
                desc["outputSchema"],
                guard(fn, _envelope, _Reject),
                meta=desc["_meta"],
                read_only=flags.get("read_only", False),
                destructive=flags.get("destructive", False),
                idempotent=flags.get("idempotent", False),
                own_error_shapes=True,
                progress=name in ("shell_exec", "shell_read", "shell_write"),
                describer=_describer(name),
                validator=_validator(name),
            )
        )
    return tuple(out)


PROFILE = Profile(
    "tfbash",
    tools,
    error_result=_error_result,
    result_is_error=_is_error,
    render_text=render_text,
    resources=(
        Resource(
            OVERVIEW_URI,
            "Shell Overview",
            None,
            "Current Shell states and recent execution output.",
            tfbash_overview_markdown,
            extra={
                "annotations": {"audience": ["assistant"], "priority": 0.8},
                "_meta": {"fullscreen": False},
            },
        ),
    ),
)
