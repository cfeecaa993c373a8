"""Profile ``bash-mcp``: @1agents/bash-mcp's ``bash.*`` methods on the runtime.

Mapping: ``bash.exec`` is a one-shot runtime job (``wait_ms`` is the yield, ``timeout_ms`` the
deadline), its ``job_id`` is the Conch job id; stdout and stderr are read apart from the job's
log, each clipped to ``max_output_bytes`` at a UTF-8 boundary (head only, as the seed did);
``bash.search`` is the runtime's ripgrep search. ``isError`` is set whenever ``success`` is
false, with the seed's codes and ``Unknown parameter: <k>`` / ``Missing parameter: <k>``.
"""

from __future__ import annotations

import base64
import os
import platform
import sys
from collections.abc import Mapping
from datetime import timedelta
from functools import lru_cache
from typing import Any

from conch.core.engine import Engine
from conch.core.results import parse_timestamp, timestamp
from conch.errors import ConchError
from conch.tools.context import CallContext
from conch.tools.profiles._common import Profile, ProfileError, guard, obj
from conch.tools.tool import Tool

DEFAULT_MAX_OUTPUT_BYTES = 65536
MAX_TIMEOUT_MS = 300000
NEXT_WAIT_MS = 1000
# the seed's child environment is process.env minus BASH_ENV, ENV, SHELLOPTS, BASHOPTS (Conch
# drops those for every job, SPEC §2) and JEST_WORKER_ID (seed-contracts §3)
INHERIT_NOT = ("JEST_WORKER_ID",)
_CANCEL_EXTRA_MS = 1000
_NOT_FOUND = "Job not found or expired; service restart clears jobs."
_TRUNCATED = "Output was truncated; increase max_output_bytes to parse it."
_STATUS = {
    "running": "running",
    "exited": "completed",
    "timed_out": "timed_out",
    "cancelled": "cancelled",
    "output_limit": "completed",
    "limit": "completed",  # a cgroup limit (memory_max) ended it
}
# runtime error code -> seed code
_CODES = {
    "invalid_argument": "INVALID_ARGUMENT",
    "cwd_not_found": "INVALID_ARGUMENT",
    "not_found": "JOB_NOT_FOUND",
    "busy": "BUSY",
    "capacity": "JOB_CAPACITY",
    "spawn_failed": "RUNNER_ERROR",
    "rg_not_found": "RIPGREP_NOT_FOUND",
    "closed": "SERVICE_CLOSED",
}


class _Fail(ProfileError):
    """A failure in the seed's words: ``{success: false, code, error}``."""


def _failure(code: str, message: str) -> dict[str, Any]:
    return {"success": False, "code": code, "error": message}


def _from_conch(e: ConchError) -> _Fail:
    if e.code == "not_found":
        return _Fail("JOB_NOT_FOUND", _NOT_FOUND)
    message = e.message
    if e.code == "spawn_failed" and e.field == "argv" and e.value == "not found":
        message = f"spawn ENOENT: {message}"
    return _Fail(_CODES.get(e.code, "RUNNER_ERROR"), message)


# -- per-runtime: the output cap each job was started with -------------------------------


class _Caps(dict[str, int]):
    """job id -> the max_output_bytes its bash.exec gave; entries of evicted jobs are pruned."""

    def prune(self, rt: Engine) -> None:
        for job_id in [j for j in self if j not in rt.jobs]:
            del self[job_id]


# -- job results -----------------------------------------------------------------------------------


def _finished_at(s: Mapping[str, Any]) -> str | None:
    if s["state"] == "running":
        return None
    end = parse_timestamp(s["started_at"]) + timedelta(milliseconds=s["duration_ms"])
    return timestamp(end)


def _summary(s: Mapping[str, Any]) -> dict[str, Any]:
    status = _STATUS[s["state"]]
    return {
        "success": status == "running" or (s["state"] == "exited" and s["exit_code"] == 0),
        "job_id": s["job_id"],
        "status": status,
        "pid": s["pid"],
        "cwd": s["cwd"],
        "kind": "exec",
        "started_at": s["started_at"],
        "finished_at": _finished_at(s),
        "duration_ms": s["duration_ms"],
    }


async def _job_result(rt: Engine, ctx: CallContext, job_id: str) -> dict[str, Any]:
    cap = ctx.profile_state(_Caps).get(job_id, DEFAULT_MAX_OUTPUT_BYTES)
    job = rt.job(job_id)
    if not job.streams:  # one terminal stream: it is all stdout
        out = await rt.read_job(job_id, cursor=0, max_bytes=cap, raw=True)
        err = None
    else:
        out = await rt.read_job(job_id, stream="stdout", cursor=0, max_bytes=cap, raw=True)
        err = await rt.read_job(job_id, stream="stderr", cursor=0, max_bytes=cap, raw=True)
    s = err or out  # the later read has the newest state
    fmt = job.output_format
    stdout_truncated = out["next_cursor"] < out["total_bytes"]
    stderr_truncated = err is not None and err["next_cursor"] < err["total_bytes"]
    data, parse_error = s["data"], s["parse_error"]
    if stdout_truncated and fmt != "text" and s["state"] != "running":
        # cut output is never presented as parsed data
        data, parse_error = None, (None if fmt == "auto" else _TRUNCATED)
    r = _summary(s)
    r.update(
        {
            "exit_code": s["exit_code"],
            "signal": s["signal"],
            "stdout": out["output"],
            "stderr": err["output"] if err is not None else "",
            "stdout_bytes": s["stdout_bytes"] if err is not None else s["total_bytes"],
            "stderr_bytes": s["stderr_bytes"] if err is not None else 0,
            "truncated": stdout_truncated or stderr_truncated,
            "stdout_truncated": stdout_truncated,
            "stderr_truncated": stderr_truncated,
            "timed_out": s["state"] == "timed_out",
            "cancelled": s["state"] == "cancelled",
            "output_format": fmt,
        }
    )
    if data is not None:
        r["data"] = data
    if parse_error is not None:
        r["parse_error"] = parse_error
    code, error = _outcome(s, parse_error)
    if code is not None or error is not None:
        r["success"] = False
    if code is not None:
        r["code"] = code
    if error is not None:
        r["error"] = error
    if s["state"] == "running":
        r["next_method"] = "bash.job_get"
        r["next_params"] = {"job_id": s["job_id"], "wait_ms": NEXT_WAIT_MS}
    return r


def _outcome(s: Mapping[str, Any], parse_error: str | None) -> tuple[str | None, str | None]:
    state = s["state"]
    if state == "running":
        return None, None
    if state == "timed_out":
        return "COMMAND_TIMEOUT", "Command timed out."
    if state == "cancelled":
        return "CANCELLED", "Command was cancelled."
    if state == "output_limit":
        return "OUTPUT_RESOURCE_LIMIT", "Output exceeded the server's log limit; job killed."
    if parse_error is not None:
        return "INVALID_OUTPUT", parse_error
    if s["signal"] is not None:
        return None, f"Command was terminated by {s['signal']}."
    if s["exit_code"] != 0:
        return None, f"Command exited with code {s['exit_code']}."
    return None, None


# -- handlers --------------------------------------------------------------------------------------


async def _exec(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    if ("command" in args) == ("argv" in args):
        raise _Fail("INVALID_ARGUMENT", "Provide exactly one of command or argv.")
    argv = args.get("argv")
    if argv is not None and not argv[0].strip():
        raise _Fail("INVALID_ARGUMENT", "argv[0] must not be empty.")
    if "command" in args and not args["command"].strip():
        raise _Fail("INVALID_ARGUMENT", "command must not be empty.")
    try:
        s = await rt.exec_job(
            command=args.get("command"),
            argv=argv,
            cwd=args.get("cwd"),
            stdin=args.get("stdin"),
            timeout_ms=args.get("timeout_ms", 30000),
            yield_ms=args.get("wait_ms", 800),
            output_format=args.get("output_format", "auto"),
            max_output_bytes=0,
            shell_env=ctx.shell_env(),
            caller_session_id=ctx.caller_session_id(),
            on_start=ctx.job_started,
            inherit_not=INHERIT_NOT,
        )
    except ConchError as e:
        raise _from_conch(e) from None
    caps = ctx.profile_state(_Caps)
    caps.prune(rt)
    caps[s["job_id"]] = args.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)
    return await _job_result(rt, ctx, s["job_id"])


def _job(rt: Engine, job_id: str) -> Any:
    try:
        return rt.job(job_id)
    except ConchError:
        raise _Fail("JOB_NOT_FOUND", _NOT_FOUND) from None


async def _job_get(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    job = _job(rt, args["job_id"])
    wait_ms = args.get("wait_ms", 0)
    if wait_ms and not job.terminal:
        await job.wait_until(lambda: job.terminal, wait_ms / 1000)
    return await _job_result(rt, ctx, job.job_id)


async def _job_cancel(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    job = _job(rt, args["job_id"])
    if not job.terminal:
        # TERM, then KILL after the runtime's grace; answer once the tree is gone
        wait_ms = min(rt.config.kill_grace_ms + _CANCEL_EXTRA_MS, 120_000)
        await rt.signal_job(job.job_id, "terminate", wait_ms=wait_ms)
    return await _job_result(rt, ctx, job.job_id)


async def _jobs(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    listing = await rt.list_jobs()
    return {"success": True, "jobs": [_summary(j) for j in listing["jobs"]]}


def _data(text: str, b64: str | None) -> tuple[str, dict[str, str]]:
    """rg's own ``{"text"}`` / ``{"bytes"}`` object and the seed's display text."""
    if b64 is None:
        return text, {"text": text}
    return f"[base64:{len(base64.b64decode(b64))}]", {"bytes": b64}


async def _search(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    path = args.get("path")
    if path is not None and not os.path.exists(os.path.join(rt.config.resolved_default_cwd, path)):
        raise _Fail("INVALID_ARGUMENT", f"Path does not exist: {path}")
    try:
        r = await rt.search_files(
            pattern=args["pattern"],
            path=path,
            regex=args.get("regex", False),
            ignore_case=args.get("ignore_case", False),
            hidden=args.get("hidden", False),
            glob=args.get("glob"),
            max_matches=args.get("max_matches", 100),
            timeout_ms=args.get("timeout_ms", 10000),
        )
    except ConchError as e:
        if e.code != "search_failed":
            raise _from_conch(e) from None
        return {
            "success": False,
            "status": "completed",
            "kind": "search",
            "exit_code": 2,
            "error": e.message,
            "matches": [],
            "count": 0,
            "truncated": False,
            "timed_out": False,
        }
    matches = []
    for m in r["matches"]:
        path_text, path_data = _data(m["path"], m.get("path_base64"))
        text, text_data = _data(m["text"], m.get("text_base64"))
        subs = []
        for sm in m["submatches"]:
            sm_text, sm_data = _data(sm["text"], sm.get("text_base64"))
            subs.append(
                {"start": sm["start"], "end": sm["end"], "text": sm_text, "match_data": sm_data}
            )
        matches.append(
            {
                "path": path_text,
                "path_data": path_data,
                "line_number": m["line"],
                "text": text,
                "text_data": text_data,
                "submatches": subs,
            }
        )
    out: dict[str, Any] = {
        "success": not r["timed_out"],
        "status": "timed_out" if r["timed_out"] else "completed",
        "kind": "search",
        "exit_code": 0 if matches else 1,
        "matches": matches,
        "count": len(matches),
        "truncated": r["truncated"],
        "timed_out": r["timed_out"],
        "duration_ms": r["elapsed_ms"],
    }
    if r["timed_out"]:
        out["code"] = "COMMAND_TIMEOUT"
        out["error"] = "Search timed out."
    return out


_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


async def _info(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    info = await rt.info()
    machine = platform.machine().lower()
    return {
        "success": True,
        "version": info["version"],
        "upstream": "conch",
        "upstream_version": info["version"],
        "platform": sys.platform,
        "arch": _ARCH.get(machine, machine),
        "cwd": info["default_cwd"],
        "shell": info["bash"] or "/bin/sh",
        "search": {"executable": info["rg"]["path"], "available": info["rg"]["path"] is not None},
        "limits": {
            "max_concurrent": info["limits"]["max_running"],
            "max_jobs": info["limits"]["max_jobs"],
            "retention_ms": info["limits"]["retention_s"] * 1000,
            "max_timeout_ms": MAX_TIMEOUT_MS,
        },
        "execution_isolation": info["containment"],
    }


# -- errors ----------------------------------------------------------------------------------------


def _seed_message(e: ConchError, args: Mapping[str, Any]) -> str:
    """The validator's ``key: is not a known argument`` in the seed's words."""
    head, tail = e.field or "", e.value
    if tail == "is not a known argument" and "." not in head and "[" not in head:
        return f"Unknown parameter: {head}"
    if tail == "is required" and "." not in head:
        return f"Missing parameter: {head}"
    return e.message


def _error_result(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if e.code == "invalid_argument":
        return _failure("INVALID_ARGUMENT", _seed_message(e, args)), True
    if e.code == "closed":
        return _failure("SERVICE_CLOSED", "Service is closed."), True
    f = _from_conch(e)
    return _failure(f.code, f.message), True


def _is_error(result: dict[str, Any]) -> bool:
    return result.get("success") is False


# -- schemas ---------------------------------------------------------------------------------------


_JOB_ID = {"type": "string", "minLength": 1, "maxLength": 128}
_WAIT = {
    "type": "integer",
    "minimum": 0,
    "maximum": 1000,
    "description": "Milliseconds to wait for the job to finish before answering.",
}
EXEC_INPUT = obj(
    {
        "command": {"type": "string", "description": "Bash command line (no state persists)."},
        "argv": {
            "type": "array",
            "minItems": 1,
            "maxItems": 256,
            "items": {"type": "string"},
            "description": "Program and literal arguments (no shell).",
        },
        "cwd": {"type": "string", "description": "Absolute, or relative to the service cwd."},
        "stdin": {"type": "string", "description": "Written to stdin, which is then closed."},
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TIMEOUT_MS,
            "default": 30000,
            "description": "Deadline: the process group is killed.",
        },
        "wait_ms": {**_WAIT, "default": 800},
        "output_format": {"enum": ["auto", "text", "json", "jsonl"], "default": "auto"},
        "max_output_bytes": {
            "type": "integer",
            "minimum": 1024,
            "maximum": 1048576,
            "default": DEFAULT_MAX_OUTPUT_BYTES,
            "description": "Per-stream cap on returned stdout and stderr.",
        },
    }
)
JOB_GET_INPUT = obj({"job_id": _JOB_ID, "wait_ms": {**_WAIT, "default": 0}}, ("job_id",))
JOB_CANCEL_INPUT = obj({"job_id": _JOB_ID}, ("job_id",))
EMPTY_INPUT = obj({})
SEARCH_INPUT = obj(
    {
        "pattern": {"type": "string", "minLength": 1},
        "path": {"type": "string", "minLength": 1, "description": "Default: the service cwd."},
        "regex": {"type": "boolean", "default": False},
        "ignore_case": {"type": "boolean", "default": False},
        "hidden": {"type": "boolean", "default": False},
        "glob": {"type": "array", "maxItems": 32, "items": {"type": "string", "minLength": 1}},
        "max_matches": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS},
        "wait_ms": _WAIT,
    },
    ("pattern",),
)
JOB_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "success": {"type": "boolean"},
        "job_id": {"type": "string"},
        "status": {"enum": ["running", "completed", "timed_out", "cancelled"]},
        "exit_code": {"type": ["integer", "null"]},
        "signal": {"type": ["string", "null"]},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "code": {"type": "string"},
        "error": {"type": "string"},
    },
    "required": ["success"],
}
ANY_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}},
    "required": ["success"],
}


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's six methods."""
    specs: list[tuple[str, str, str, dict[str, Any], dict[str, Any], Any, bool]] = [
        (
            "bash.exec",
            "Run a command",
            "Run a bash `command` or a literal `argv` as an independent process (no state "
            "persists). Waits up to `wait_ms` (max 1000); a job still running is returned "
            "with `next_method`/`next_params` to poll with bash.job_get. stdout and stderr "
            "come back separately, each capped at `max_output_bytes`; `output_format` "
            "json/jsonl/auto parses stdout into `data`.",
            EXEC_INPUT,
            JOB_OUTPUT,
            _exec,
            False,
        ),
        (
            "bash.job_get",
            "Poll a job",
            "Current state and output of a job (never re-runs it); waits up to `wait_ms`.",
            JOB_GET_INPUT,
            JOB_OUTPUT,
            _job_get,
            True,
        ),
        (
            "bash.job_cancel",
            "Cancel a job",
            "Stop a running job's process group (TERM, then KILL) and return its final state.",
            JOB_CANCEL_INPUT,
            JOB_OUTPUT,
            _job_cancel,
            False,
        ),
        (
            "bash.jobs",
            "List jobs",
            "Running and recently finished jobs.",
            EMPTY_INPUT,
            ANY_OUTPUT,
            _jobs,
            True,
        ),
        (
            "bash.search",
            "Search files",
            "Search file contents with ripgrep: literal by default (`regex: true` for a "
            "regular expression); .gitignore respected. Matches have path, line_number, text "
            "and byte-offset submatches; non-UTF-8 data is given as base64 in the *_data "
            "fields.",
            SEARCH_INPUT,
            ANY_OUTPUT,
            _search,
            True,
        ),
        (
            "bash.info",
            "Service info",
            "Version, platform, shell, ripgrep availability and limits.",
            EMPTY_INPUT,
            ANY_OUTPUT,
            _info,
            True,
        ),
    ]
    return tuple(
        Tool(
            name,
            title,
            description,
            schema,
            output,
            guard(fn, lambda e, args: _failure(e.code, e.message), _Fail),
            read_only=read_only,
            destructive=name in ("bash.exec", "bash.job_cancel"),
            own_error_shapes=True,
            progress=name in ("bash.exec", "bash.job_get"),
        )
        for name, title, description, schema, output, fn, read_only in specs
    )


PROFILE = Profile("bash-mcp", tools, error_result=_error_result, result_is_error=_is_error)
