"""Profile ``tfbash``: tfbash-mcp's seven ``shell_*`` tools on the runtime's persistent shells.

Mapping: ``shell_id`` is the Conch shell id, ``exec_id`` the Conch job id of the command run in
it, cursors are the job's log cursors (nothing is evicted, so ``buffer_start_cursor`` is always
0 and ``truncated_before_cursor`` false). Results and errors have tfbash's shapes; ``isError``
is set only when the operation was rejected (the ``{"error": ...}`` envelope).

Bugs dropped (the runtime's shells do not have them): an interrupt ends the whole command list
and its execution at once; terminate/kill stop the whole command line; output has no prompt,
marker or bracketed-paste noise; close takes well under a second.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from conch.core.engine import Engine
from conch.core.results import JobSnapshot, ShellSummary
from conch.errors import ConchError
from conch.tools.context import CallContext
from conch.tools.profiles._common import (
    Profile,
    ProfileError,
    ProfileState,
    Resource,
    guard,
    nbytes,
    obj,
    profile_state,
)
from conch.tools.tool import Tool
from conch.tools.views import fence, tail_text

__all__ = ["OVERVIEW_URI", "tfbash_overview_markdown", "tools"]

OVERVIEW_URI = "window://io.github.a2c-smcp.tfbash/shell-overview"
OVERVIEW_TAIL_CHARS = 500
OUTPUT_BUFFER_BYTES = 4 * 1024 * 1024
MAX_READ_BYTES = 65536
MAX_COMMAND_BYTES = 262144
MAX_WRITE_BYTES = 65536
MAX_ENV_VALUE_BYTES = 32768
_WINDOW_CAP = 1024 * 1024  # the runtime's largest read window
_MAX_ID_BYTES = 128

RETRYABLE = {"shell_busy": True, "resource_limit": True}
MESSAGES = {
    "invalid_argument": "The request is invalid.",
    "shell_not_found": "The shell was not found.",
    "shell_busy": "The shell is busy.",
    "shell_closing": "The shell is closing.",
    "shell_unavailable": "The shell is unavailable.",
    "exec_not_found": "The execution was not found.",
    "exec_not_active": "The execution is not active.",
    "invalid_cursor": "The cursor is invalid.",
    "resource_limit": "A resource limit was reached.",
    "shell_start_failed": "The shell failed to start.",
    "unsupported_shell": "The shell is not supported.",
}
TAGS = {
    "shell_open": ["BuildIn", "Create"],
    "shell_exec": ["BuildIn", "Create", "Read", "Update", "Delete"],
    "shell_read": ["BuildIn", "Read"],
    "shell_write": ["BuildIn", "Create", "Read", "Update", "Delete"],
    "shell_signal": ["BuildIn", "Update"],
    "shell_list": ["BuildIn", "Read"],
    "shell_close": ["BuildIn", "Delete"],
}


class _Reject(ProfileError):
    """The operation was rejected: becomes ``{"error": {...}}`` with isError."""

    def __init__(self, code: str, message: str | None = None, retryable: bool | None = None):
        super().__init__(code, message or MESSAGES[code])
        self.retryable = RETRYABLE.get(code, False) if retryable is None else retryable


def _envelope(e: _Reject, args: Mapping[str, Any]) -> dict[str, Any]:
    err: dict[str, Any] = {"code": e.code, "message": e.message, "retryable": e.retryable}
    for key in ("shell_id", "exec_id"):  # echoed only when given and valid
        v = args.get(key)
        if isinstance(v, str) and 0 < len(v.encode("utf-8", "surrogatepass")) <= _MAX_ID_BYTES:
            err[key] = v
    return {"error": err}


# -- per-runtime bookkeeping (what the runtime does not track for tfbash) -------------------------


class _State:
    def __init__(self) -> None:
        self.created_ms: dict[str, int] = {}
        self.last_exec: dict[str, str] = {}  # shell id -> id of its latest execution


def _state(rt: Engine) -> _State:
    return profile_state(rt, _State)


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


def _check_exec(rt: Engine, shell_id: str, exec_id: str) -> Any:
    try:
        job = rt.job(exec_id)
    except ConchError:
        raise _Reject("exec_not_found") from None
    if job.shell_id != shell_id or job.job_id != exec_id:
        raise _Reject("exec_not_found")
    return job


def _shell_status(rt: Engine, shell_id: str) -> str:
    sh = _shells(rt).get(shell_id)
    if sh is None or sh["state"] in ("closing", "closed"):
        return "closing"
    return "error" if sh["state"] == "exited" else "ready"


def _snapshot(rt: Engine, shell_id: str, s: JobSnapshot) -> dict[str, Any]:
    """tfbash's execution snapshot from a runtime job snapshot."""
    state = s["state"]
    exit_code = None
    cwd: str | None = s["cwd"]
    shell_status = _shell_status(rt, shell_id)
    if state == "running":
        status = "running"
    elif state == "exited":
        if shell_status == "error" and _state(rt).last_exec.get(shell_id) == s["job_id"]:
            status, cwd = "shell_error", None  # the shell itself ended during this command
        else:
            status, exit_code = "exited", s["exit_code"]
    elif state == "cancelled" and s["exit_code"] is not None and not s["restarted"]:
        # the shell came back with a status after the signal: bash's $?
        status, exit_code = "exited", s["exit_code"]
    elif state == "timed_out":
        status = "timeout"
    else:
        status = "cancelled"
    out: dict[str, Any] = {
        "shell_id": shell_id,
        "exec_id": s["job_id"],
        "status": status,
        "exit_code": exit_code,
        "output": s["output"],
        "buffer_start_cursor": 0,
        "next_cursor": s["next_cursor"],
        "truncated_before_cursor": False,
        "eof": s["eof"],
    }
    if status != "running":
        out["duration_ms"] = s["duration_ms"]
        out["cwd"] = cwd
        out["shell_status"] = shell_status
        out["shell_rebuilt"] = bool(s["restarted"]) and status in ("timeout", "cancelled")
    return out


# -- handlers --------------------------------------------------------------------------------------


async def _open(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    cwd = args.get("cwd")
    if cwd is not None and not os.path.isabs(cwd):
        raise _Reject("invalid_argument", "cwd: must be an absolute path")
    env = args.get("env") or {}
    for k, v in env.items():
        if nbytes(v) > MAX_ENV_VALUE_BYTES:
            raise _Reject("invalid_argument", f"env.{k}: must be at most 32768 UTF-8 bytes")
    startup = args.get("startup_command")
    if startup is not None and nbytes(startup) > MAX_COMMAND_BYTES:
        raise _Reject("invalid_argument", "startup_command: too long")
    try:
        r = await rt.shell_open(cwd=cwd, env=env, startup_command=startup)
    except ConchError as e:
        code = {
            "cwd_not_found": "invalid_argument",
            "invalid_argument": "invalid_argument",
            "capacity": "resource_limit",
        }.get(e.code, "shell_start_failed")
        raise _Reject(code) from None
    _state(rt).created_ms[r["shell_id"]] = int(time.time() * 1000)
    return {
        "shell_id": r["shell_id"],
        "status": "ready",
        "cwd": os.path.realpath(r["cwd"]),
        "dialect": r["shell"],
    }


async def _exec(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    if nbytes(args["command"]) > MAX_COMMAND_BYTES:
        raise _Reject("invalid_argument", f"command: must be at most {MAX_COMMAND_BYTES} bytes")
    _shell(rt, shell_id, for_exec=True)
    try:
        first = await rt.exec(
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
    _state(rt).last_exec[shell_id] = first["job_id"]
    budget = min(args.get("max_output_bytes", OUTPUT_BUFFER_BYTES), _WINDOW_CAP)
    s = await rt.read(first["job_id"], cursor=0, max_bytes=budget)
    return _snapshot(rt, shell_id, s)


async def _read(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    _shell(rt, shell_id)
    _check_exec(rt, shell_id, exec_id)
    try:
        s = await rt.read(
            exec_id,
            cursor=args["cursor"],
            max_bytes=args.get("max_bytes", MAX_READ_BYTES),
            wait_ms=args.get("wait_ms", 0),
        )
    except ConchError as e:
        if e.code == "not_found":
            raise _Reject("exec_not_found") from None
        raise _Reject("invalid_cursor") from None  # arguments passed the schema: the cursor
    return _snapshot(rt, shell_id, s)


def _active(rt: Engine, args: Mapping[str, Any]) -> Any:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    sh = _shell(rt, shell_id)
    job = _check_exec(rt, shell_id, exec_id)
    if job.terminal or sh.get("job_id") != exec_id:
        raise _Reject("exec_not_active")
    return job


async def _write(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    text = args["text"]
    if nbytes(text) > MAX_WRITE_BYTES:
        raise _Reject("invalid_argument", f"text: must be at most {MAX_WRITE_BYTES} UTF-8 bytes")
    _active(rt, args)
    try:
        await rt.write(args["exec_id"], text=text, yield_ms=0)
    except ConchError as e:
        raise _Reject("exec_not_active" if e.code != "not_found" else "exec_not_found") from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "accepted",
        "accepted_bytes": nbytes(text),
    }


async def _signal(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    _active(rt, args)
    try:
        await rt.signal(args["exec_id"], args["signal"], wait_ms=0)
    except ConchError as e:
        raise _Reject("exec_not_active" if e.code != "not_found" else "exec_not_found") from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "delivered",
        "signal": args["signal"],
    }


_LIST_STATUS = {"ready": "ready", "busy": "busy", "exited": "error", "closing": "closing"}


async def _list(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    info = await rt.info()
    st = _state(rt)
    shells = []
    for sh in _shells(rt).values():
        if sh["state"] == "starting" and not sh.get("job_id"):
            continue  # not registered until its first prompt
        status = "rebuilding" if sh["state"] == "starting" else _LIST_STATUS[sh["state"]]
        shells.append(
            {
                "shell_id": sh["shell_id"],
                "status": status,
                "last_known_cwd": sh.get("cwd"),
                "active_exec_id": sh.get("job_id") if status in ("busy", "rebuilding") else None,
                "created_at_ms": st.created_ms.setdefault(sh["shell_id"], int(time.time() * 1000)),
            }
        )
    dialect = rt.config.shell or "bash"
    if os.path.isabs(dialect):
        dialect = "zsh" if os.path.basename(dialect).startswith("zsh") else "bash"
    version = next((a["version"] for a in info["shells"] if a["name"] == dialect), "")
    platform = "macos" if sys.platform == "darwin" else "linux"
    return {
        "runtime": {
            "platform": platform,
            "dialect": dialect,
            "shell_version": version,
            "default_cwd": info["default_cwd"],
        },
        "host": {"mode": "standalone", "workspace_root": info["default_cwd"]},
        "shells": shells,
    }


async def _close(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    _shell(rt, shell_id)
    try:
        r = await rt.shell_close(shell_id)
    except ConchError:
        raise _Reject("shell_closing") from None
    st = _state(rt)
    st.created_ms.pop(shell_id, None)
    st.last_exec.pop(shell_id, None)
    return {"shell_id": shell_id, "status": "closed", "cleanup_complete": r["cleanup_complete"]}


# -- the overview resource -------------------------------------------------------------------------


def _code(text: str) -> str:
    """An inline code span that survives backticks, pipes and newlines in ``text``."""
    text = text.replace("\r", " ").replace("\n", " ")
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def tfbash_overview_markdown(rt: Engine, state: ProfileState | None = None) -> str:
    """Markdown for ``window://io.github.a2c-smcp.tfbash/shell-overview``: every shell, its
    status, and the last 500 characters of its latest execution's output."""
    st = state.get(_State) if state is not None else _state(rt)
    shells = [s for s in _shells(rt).values() if s["state"] != "starting" or s.get("job_id")]
    if not shells:
        return "No active Shells."
    latest: dict[str, Any] = {}
    for job in rt.jobs:
        if job.shell_id is not None:
            latest[job.shell_id] = job
    lines = ["# Shells", ""]
    for sh in shells:
        sid = sh["shell_id"]
        status = "rebuilding" if sh["state"] == "starting" else _LIST_STATUS[sh["state"]]
        created = st.created_ms.setdefault(sid, int(time.time() * 1000))
        when = datetime.fromtimestamp(created / 1000, timezone.utc).isoformat(timespec="seconds")
        lines += [
            f"## Shell {_code(sid)}",
            "",
            f"- Status: {status}",
            f"- Working directory: {_code(sh.get('cwd') or '')}",
            f"- Active execution: {_code(sh['job_id'] or '') if sh['job_id'] else 'none'}",
            f"- Created: {when.replace('+00:00', 'Z')}",
            "",
        ]
        last = latest.get(sid)
        if last is None:
            lines += ["No output yet.", ""]
            continue
        text, _ = tail_text(last, OVERVIEW_TAIL_CHARS * 4)
        lines += [f"Last output of {_code(last.job_id)}:", "", fence(text[-OVERVIEW_TAIL_CHARS:])]
        lines.append("")
    return "\n".join(lines)


# -- error_result: schema failures and the like ----------------------------------------------------


def _error_result(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if e.code == "invalid_argument":
        r = _Reject("invalid_argument", e.message)
    elif e.code == "closed":
        r = _Reject("shell_closing")
    else:
        r = _Reject("shell_unavailable", "The tool failed unexpectedly.", retryable=False)
    return _envelope(r, args), True


def _is_error(result: dict[str, Any]) -> bool:
    return "error" in result


# -- schemas ---------------------------------------------------------------------------------------


_ID = {"type": "string", "minLength": 1, "maxLength": _MAX_ID_BYTES}
_SHELL_ID = {**_ID, "description": "The shell, from shell_open."}
_EXEC_ID = {**_ID, "description": "The execution, from shell_exec."}

OPEN_INPUT = obj(
    {
        "cwd": {
            "type": "string",
            "minLength": 1,
            "description": "Absolute working directory (must exist). Default: the default cwd.",
        },
        "env": {
            "type": "object",
            "maxProperties": 256,
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
            "additionalProperties": {"type": "string"},
            "description": "Extra environment variables for the shell.",
        },
        "startup_command": {
            "type": ["string", "null"],
            "minLength": 1,
            "description": "Command run once at start; the shell opens only if it exits 0.",
        },
    }
)
EXEC_INPUT = obj(
    {
        "shell_id": _SHELL_ID,
        "command": {"type": "string", "description": "Command text (may be multi-line)."},
        "yield_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": 60000,
            "default": 10000,
            "description": "How long this call waits; it never kills anything.",
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": 86400000,
            "default": 120000,
            "description": "Total run time allowed, from the start of the execution.",
        },
        "max_output_bytes": {
            "type": "integer",
            "minimum": 4096,
            "maximum": OUTPUT_BUFFER_BYTES,
            "default": OUTPUT_BUFFER_BYTES,
            "description": "Most output bytes in this result (the rest via shell_read).",
        },
    },
    ("shell_id", "command"),
)
READ_INPUT = obj(
    {
        "shell_id": _SHELL_ID,
        "exec_id": _EXEC_ID,
        "cursor": {"type": "integer", "minimum": 0, "description": "Read from here."},
        "max_bytes": {
            "type": "integer",
            "minimum": 4,
            "maximum": MAX_READ_BYTES,
            "default": MAX_READ_BYTES,
        },
        "wait_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": 60000,
            "default": 0,
            "description": "Wait this long for output past the cursor or the end.",
        },
    },
    ("shell_id", "exec_id", "cursor"),
)
WRITE_INPUT = obj(
    {
        "shell_id": _SHELL_ID,
        "exec_id": _EXEC_ID,
        "text": {"type": "string", "description": "Text typed into the running command."},
    },
    ("shell_id", "exec_id", "text"),
)
SIGNAL_INPUT = obj(
    {
        "shell_id": _SHELL_ID,
        "exec_id": _EXEC_ID,
        "signal": {"enum": ["interrupt", "terminate", "kill"]},
    },
    ("shell_id", "exec_id", "signal"),
)
LIST_INPUT = obj({})
CLOSE_INPUT = obj({"shell_id": _SHELL_ID}, ("shell_id",))

_CURSORS = {
    "shell_id": {"type": "string"},
    "exec_id": {"type": "string"},
    "output": {"type": "string"},
    "buffer_start_cursor": {"type": "integer", "minimum": 0},
    "next_cursor": {"type": "integer", "minimum": 0},
    "truncated_before_cursor": {"type": "boolean"},
    "eof": {"type": "boolean"},
}
_BASE_REQUIRED = [
    "shell_id",
    "exec_id",
    "status",
    "exit_code",
    "output",
    "buffer_start_cursor",
    "next_cursor",
    "truncated_before_cursor",
    "eof",
]
_TERMINAL_REQUIRED = [*_BASE_REQUIRED, "duration_ms", "cwd", "shell_status", "shell_rebuilt"]


def _variant(status: str, exit_code: Any, shell_status: list[str] | None) -> dict[str, Any]:
    props = {**_CURSORS, "status": {"const": status}, "exit_code": exit_code}
    if shell_status is None:
        return {"type": "object", "properties": props, "required": _BASE_REQUIRED}
    props.update(
        {
            "duration_ms": {"type": "integer", "minimum": 0},
            "cwd": {"type": ["string", "null"]},
            "shell_status": {"enum": shell_status},
            "shell_rebuilt": {"type": "boolean"},
        }
    )
    return {"type": "object", "properties": props, "required": _TERMINAL_REQUIRED}


SNAPSHOT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "oneOf": [
        _variant("running", {"type": "null"}, None),
        _variant("exited", {"type": "integer", "minimum": 0, "maximum": 255}, ["ready", "closing"]),
        _variant("timeout", {"type": "null"}, ["ready", "error", "closing"]),
        _variant("cancelled", {"type": "null"}, ["ready", "error", "closing"]),
        _variant("shell_error", {"type": "null"}, ["error", "closing"]),
    ],
}
OPEN_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "status": {"const": "ready"},
        "cwd": {"type": "string"},
        "dialect": {"type": "string"},
    },
    "required": ["shell_id", "status", "cwd", "dialect"],
}
WRITE_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "exec_id": {"type": "string"},
        "status": {"const": "accepted"},
        "accepted_bytes": {"type": "integer", "minimum": 0},
    },
    "required": ["shell_id", "exec_id", "status", "accepted_bytes"],
}
SIGNAL_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "exec_id": {"type": "string"},
        "status": {"const": "delivered"},
        "signal": {"enum": ["interrupt", "terminate", "kill"]},
    },
    "required": ["shell_id", "exec_id", "status", "signal"],
}
LIST_OUTPUT = {
    "type": "object",
    "properties": {
        "runtime": {
            "type": "object",
            "properties": {
                "platform": {"enum": ["macos", "linux", "windows"]},
                "dialect": {"type": "string"},
                "shell_version": {"type": "string"},
                "default_cwd": {"type": "string"},
            },
        },
        "host": {
            "type": "object",
            "properties": {
                "mode": {"enum": ["standalone", "ide"]},
                "workspace_root": {"type": "string"},
            },
        },
        "shells": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "shell_id": {"type": "string"},
                    "status": {"enum": ["ready", "busy", "rebuilding", "closing", "error"]},
                    "last_known_cwd": {"type": ["string", "null"]},
                    "active_exec_id": {"type": ["string", "null"]},
                    "created_at_ms": {"type": "integer"},
                },
            },
        },
    },
    "required": ["runtime", "host", "shells"],
}
CLOSE_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "status": {"const": "closed"},
        "cleanup_complete": {"type": "boolean"},
    },
    "required": ["shell_id", "status", "cleanup_complete"],
}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"enum": sorted(MESSAGES)},
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
                "shell_id": {"type": "string"},
                "exec_id": {"type": "string"},
            },
            "required": ["code", "message", "retryable"],
            "additionalProperties": False,
        }
    },
    "required": ["error"],
    "additionalProperties": False,
}


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's seven tools, in tfbash's order."""
    specs: list[tuple[str, str, str, dict[str, Any], dict[str, Any], Any, dict[str, bool]]] = [
        (
            "shell_open",
            "Open a shell",
            "Start a persistent interactive shell. cwd, exported variables and functions "
            "persist between shell_exec calls. Returns the shell_id.",
            OPEN_INPUT,
            OPEN_OUTPUT,
            _open,
            {},
        ),
        (
            "shell_exec",
            "Run a command in a shell",
            "Run a command in a shell and wait up to yield_ms. A running result has an exec_id "
            "and a next_cursor: follow it with shell_read, type into it with shell_write, stop "
            "it with shell_signal. It is interrupted at timeout_ms. One command at a time per "
            "shell.",
            EXEC_INPUT,
            SNAPSHOT_OUTPUT,
            _exec,
            {"destructive": True},
        ),
        (
            "shell_read",
            "Read an execution's output",
            "Read an execution's output from cursor (up to max_bytes), waiting up to wait_ms "
            "for more. eof is true once the execution ended and everything was read.",
            READ_INPUT,
            SNAPSHOT_OUTPUT,
            _read,
            {"read_only": True},
        ),
        (
            "shell_write",
            "Type into an execution",
            "Send text to the running command's terminal (\\n is Enter; \\u0004 at the start "
            "of a line is end-of-file).",
            WRITE_INPUT,
            WRITE_OUTPUT,
            _write,
            {},
        ),
        (
            "shell_signal",
            "Signal an execution",
            "interrupt (Ctrl-C), terminate or kill the running command and the rest of its "
            "command line; the shell stays usable.",
            SIGNAL_INPUT,
            SIGNAL_OUTPUT,
            _signal,
            {"destructive": True},
        ),
        (
            "shell_list",
            "List shells",
            "The runtime (platform, dialect, shell version, default cwd) and the open shells.",
            LIST_INPUT,
            LIST_OUTPUT,
            _list,
            {"read_only": True, "idempotent": True},
        ),
        (
            "shell_close",
            "Close a shell",
            "Close a shell and kill every process in it.",
            CLOSE_INPUT,
            CLOSE_OUTPUT,
            _close,
            {"destructive": True},
        ),
    ]
    return tuple(
        Tool(
            name,
            title,
            description,
            schema,
            output,
            guard(fn, _envelope, _Reject),
            meta={
                "tfbash-mcp/errorSchema": ERROR_SCHEMA,
                "a2c_tool_meta": {"tags": list(TAGS[name])},
            },
            read_only=flags.get("read_only", False),
            destructive=flags.get("destructive", False),
            idempotent=flags.get("idempotent", False),
            error_result=_error_result,
            result_is_error=_is_error,
            progress=name in ("shell_exec", "shell_read", "shell_write"),
        )
        for name, title, description, schema, output, fn, flags in specs
    )


PROFILE = Profile(
    "tfbash",
    tools,
    resources=(
        Resource(
            OVERVIEW_URI,
            "shell-overview",
            "Shell overview",
            "tfbash-compatible overview of the persistent shells.",
            tfbash_overview_markdown,
        ),
    ),
)
