"""tfbash's seven tool handlers on the runtime's persistent shells (``shell_open`` …
``shell_close``), each raising :class:`~conch.tools.profiles.tfbash.results.Reject` where the
original rejects the operation, and the table that pairs each with its annotations."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conch.core import (
    Engine,
    ExecRequest,
    ShellOpenRequest,
    SignalRequest,
    WriteRequest,
)
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles._common import nbytes
from conch.tools.profiles.tfbash.executions import (
    State,
    buffer_start,
    execution_window,
    inside_character,
)
from conch.tools.profiles.tfbash.limits import (
    MAX_READ_BYTES,
    MAX_SHELLS,
    OUTPUT_BUFFER_BYTES,
    TERMINAL_SIZE,
)
from conch.tools.profiles.tfbash.results import Reject
from conch.tools.profiles.tfbash.shells import (
    find_exec,
    find_shell,
    runtime_context,
    shell_items,
    shell_summaries,
)

if TYPE_CHECKING:
    from conch.core import JobView


async def _open(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    cwd = args.get("cwd")
    if cwd is not None and not os.path.isdir(cwd):
        raise Reject("invalid_argument")
    open_shells = [
        s for s in shell_summaries(rt).values() if s["state"] not in ("closing", "closed")
    ]
    if len(open_shells) >= min(MAX_SHELLS, rt.config.max_shells):
        raise Reject("resource_limit")
    try:
        req = ShellOpenRequest(
            cwd=cwd,
            env=args.get("env") or {},
            startup_command=args.get("startup_command"),
            echo=False,  # the original's PTY never echoes what shell_write sends
            size=TERMINAL_SIZE,
        )
        r = await rt.shell_open(req)
    except ConchError as e:
        code = {
            "cwd_not_found": "invalid_argument",
            "invalid_argument": "invalid_argument",
            "capacity": "resource_limit",
        }.get(e.code, "shell_start_failed")
        raise Reject(code) from None
    return {
        "shell_id": r["shell_id"],
        "status": "ready",
        "cwd": os.path.realpath(r["cwd"]),  # `pwd -P`: the physical path
        "dialect": r["shell"],
    }


async def _exec(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    find_shell(rt, shell_id, for_exec=True)
    capacity = args.get("max_output_bytes", OUTPUT_BUFFER_BYTES)
    try:
        req = ExecRequest(
            digest=False,  # the seed's own result shape has no digest
            shell_id=shell_id,
            command=args["command"],
            yield_ms=args.get("yield_ms", 10000),
            timeout_ms=args.get("timeout_ms", 120000),
            max_output_bytes=0,
        )
        first = await rt.exec(req, ctx.engine_context())
    except ConchError as e:
        code = {
            "shell_busy": "shell_busy",
            "not_found": "shell_not_found",
            "busy": "resource_limit",
            "invalid_argument": "invalid_argument",
        }.get(e.code, "shell_unavailable")
        raise Reject(code, retryable=False if code == "shell_unavailable" else None) from None
    st = ctx.profile_state(State)
    st.capacity[first["job_id"]] = capacity
    if len(st.capacity) > 2 * rt.config.max_jobs:  # forget executions the runtime evicted
        kept = {job.job_id for job in rt.retained()}
        st.capacity = {k: v for k, v in st.capacity.items() if k in kept}
        st.signalled = {k: v for k, v in st.signalled.items() if k in kept}
    # the exec result is a read from cursor 0 of up to max_output_bytes: the retained window
    return execution_window(rt, st, shell_id, rt.job(first["job_id"]), 0, capacity)


async def _read(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    find_shell(rt, shell_id)
    job = find_exec(rt, shell_id, exec_id)
    cursor = args["cursor"]
    st = ctx.profile_state(State)
    start = buffer_start(job, st.capacity.get(exec_id, OUTPUT_BUFFER_BYTES))
    if cursor > job.log.size() or (cursor >= start and inside_character(job, cursor)):
        raise Reject("invalid_cursor")
    wait_ms = args.get("wait_ms", 0)
    if wait_ms > 0 and cursor >= start and not job.terminal:
        # returns at once when there is output past the cursor or the execution ended
        await job.wait_until(
            lambda: job.log.size() > cursor or (job.terminal and job.log.closed), wait_ms / 1000
        )
    return execution_window(rt, st, shell_id, job, cursor, args.get("max_bytes", MAX_READ_BYTES))


def _active(rt: Engine, args: Mapping[str, Any]) -> JobView:
    shell_id, exec_id = args["shell_id"], args["exec_id"]
    sh = find_shell(rt, shell_id)
    job = find_exec(rt, shell_id, exec_id)
    if job.terminal or sh.get("job_id") != exec_id:
        raise Reject("exec_not_active")
    return job


async def _write(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    text = args["text"]
    _active(rt, args)
    if text:
        try:
            await rt.write(WriteRequest(args["exec_id"], text=text, yield_ms=0))
        except ConchError as e:
            code = "exec_not_active" if e.code != "not_found" else "exec_not_found"
            raise Reject(code) from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "accepted",
        "accepted_bytes": nbytes(text),
    }


async def _signal(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _active(rt, args)
    ctx.profile_state(State).signalled[args["exec_id"]] = args["signal"]
    try:
        await rt.signal(SignalRequest(args["exec_id"], args["signal"], wait_ms=0))
    except ConchError as e:
        raise Reject("exec_not_active" if e.code != "not_found" else "exec_not_found") from None
    return {
        "shell_id": args["shell_id"],
        "exec_id": args["exec_id"],
        "status": "delivered",
        "signal": args["signal"],
    }


async def _list(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    info = await rt.info()
    return {**runtime_context(rt, info), "shells": shell_items(rt)}


async def _close(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    shell_id = args["shell_id"]
    gone = find_shell(rt, shell_id)["last_job_id"]
    try:
        r = await rt.shell_close(shell_id)
    except ConchError:
        raise Reject("shell_closing") from None
    if gone is not None:
        st = ctx.profile_state(State)
        st.capacity.pop(gone, None)
        st.signalled.pop(gone, None)
    return {"shell_id": shell_id, "status": "closed", "cleanup_complete": r["cleanup_complete"]}


HANDLERS = {
    "shell_open": (_open, {}),
    "shell_exec": (_exec, {"destructive": True}),
    "shell_read": (_read, {"read_only": True}),
    "shell_write": (_write, {}),
    "shell_signal": (_signal, {"destructive": True}),
    "shell_list": (_list, {"read_only": True, "idempotent": True}),
    "shell_close": (_close, {"destructive": True}),
}
