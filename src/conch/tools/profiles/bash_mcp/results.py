"""What a bash-mcp call answers: the seed's failure ``{success: false, code, error}`` (its codes
for the runtime's errors, ``Unknown parameter: <k>`` / ``Missing parameter: <k>`` for a bad
argument) and ``isError`` whenever ``success`` is false; a job's result, with stdout and stderr
read apart from its log, each clipped to the ``max_output_bytes`` its ``bash.exec`` gave (kept
per runtime), and the seed's outcome codes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from conch.core import Engine, ReadRequest, parse_timestamp, timestamp
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles._common import ProfileError

DEFAULT_MAX_OUTPUT_BYTES = 65536
NEXT_WAIT_MS = 1000


NOT_FOUND = "Job not found or expired; service restart clears jobs."
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


class Fail(ProfileError):
    """A failure in the seed's words: ``{success: false, code, error}``."""


def failure(code: str, message: str) -> dict[str, Any]:
    return {"success": False, "code": code, "error": message}


def from_conch(e: ConchError) -> Fail:
    if e.code == "not_found":
        return Fail("JOB_NOT_FOUND", NOT_FOUND)
    message = e.message
    if e.code == "spawn_failed" and e.field == "argv" and e.value == "not found":
        message = f"spawn ENOENT: {message}"
    return Fail(_CODES.get(e.code, "RUNNER_ERROR"), message)


# per runtime: the output cap each job was started with


class Caps(dict[str, int]):
    """job id -> the max_output_bytes its bash.exec gave; entries of evicted jobs are pruned."""

    def prune(self, rt: Engine) -> None:
        kept = {j.job_id for j in rt.retained()}
        for job_id in [j for j in self if j not in kept]:
            del self[job_id]


def _finished_at(s: Mapping[str, Any]) -> str | None:
    if s["state"] == "running":
        return None
    end = parse_timestamp(s["started_at"]) + timedelta(milliseconds=s["duration_ms"])
    return timestamp(end)


def job_summary(s: Mapping[str, Any]) -> dict[str, Any]:
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


async def job_result(rt: Engine, ctx: ToolContext, job_id: str) -> dict[str, Any]:
    cap = ctx.profile_state(Caps).get(job_id, DEFAULT_MAX_OUTPUT_BYTES)
    job = rt.job(job_id)
    if not job.streams:  # one terminal stream: it is all stdout
        out = await rt.read(ReadRequest(job_id, cursor=0, max_bytes=cap, raw=True, digest=False))
        err = None
    else:
        out = await rt.read(
            ReadRequest(job_id, stream="stdout", cursor=0, max_bytes=cap, raw=True, digest=False)
        )
        err = await rt.read(
            ReadRequest(job_id, stream="stderr", cursor=0, max_bytes=cap, raw=True, digest=False)
        )
    s = err or out  # the later read has the newest state
    fmt = job.output_format
    stdout_truncated = out["next_cursor"] < out["total_bytes"]
    stderr_truncated = err is not None and err["next_cursor"] < err["total_bytes"]
    data, parse_error = s["data"], s["parse_error"]
    if stdout_truncated and fmt != "text" and s["state"] != "running":
        # cut output is never presented as parsed data
        data, parse_error = None, (None if fmt == "auto" else _TRUNCATED)
    r = job_summary(s)
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


# errors: Conch's own, in the seed's words


def _seed_message(e: ConchError, args: Mapping[str, Any]) -> str:
    """The validator's ``key: is not a known argument`` in the seed's words."""
    head, tail = e.field or "", e.value
    if tail == "is not a known argument" and "." not in head and "[" not in head:
        return f"Unknown parameter: {head}"
    if tail == "is required" and "." not in head:
        return f"Missing parameter: {head}"
    return e.message


def error_result(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if e.code == "invalid_argument":
        return failure("INVALID_ARGUMENT", _seed_message(e, args)), True
    if e.code == "closed":
        return failure("SERVICE_CLOSED", "Service is closed."), True
    f = from_conch(e)
    return failure(f.code, f.message), True


def result_is_error(result: dict[str, Any]) -> bool:
    return result.get("success") is False
