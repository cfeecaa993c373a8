"""The handlers of ``bash``, ``run`` and ``script``: the seed's checks in its order, the output
file a call gets even when it fails before it has a job, the cwd and ``PWD`` as the seed's
programs see them, the job started on the runtime and the wait (``timeout``;
``timeout_behavior`` kill or background, where a job still running gets a handle that ``get``
polls)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from conch.config import MAX_WAIT_MS
from conch.core import CallContext, Engine, ExecRequest, SignalRequest
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles.ai_device_bash.background import Handles
from conch.tools.profiles.ai_device_bash.limits import (
    FOREVER_S,
    MAX_OUTPUT_BYTES,
    MAX_SYNTAX_OUTPUT_BYTES,
)
from conch.tools.profiles.ai_device_bash.results import (
    Fail,
    failure,
    job_preview,
    job_result,
    sanitize,
    seed_result,
    wait_end,
)
from conch.tools.profiles.ai_device_bash.validate import (
    caller_session_id,
    check_argv,
    check_script,
    check_stdin,
    meta_shell_env,
    normalize_purpose,
)

if TYPE_CHECKING:
    from conch.core import JobView

_MAX_YIELD_MS = MAX_WAIT_MS
_MAX_ARG_STRLEN = 131072  # Linux: one argv string (with its NUL) may not be longer


def _output_file(rt: Engine, content: bytes = b"") -> str:
    """An output file for a call that failed before it had a job (the seed makes one for every
    call its executor sees); named like the job logs, so the log retention removes it."""
    return rt.output_file(content)


async def _wait_end(rt: Engine, job: JobView, limit_s: float | None) -> None:
    """Wait for the job to end (forever when limit_s is None); a cancelled call kills it."""
    try:
        await wait_end(job, limit_s)
    except asyncio.CancelledError:
        if not job.terminal:
            with contextlib.suppress(Exception):
                await asyncio.shield(rt.signal(SignalRequest(job.job_id, "kill", wait_ms=2000)))
        raise


def _physical_pwd(cwd: str) -> dict[str, str] | None:
    """``PWD`` for a job in ``cwd`` as the seed's programs see it: the resolved directory,
    where it differs from ``cwd`` (None: the runtime's default, which names ``cwd``)."""
    real = os.path.realpath(cwd)
    return {"PWD": real} if real != os.path.abspath(cwd) else None


def _resolve_cwd(rt: Engine, cwd: str | None) -> tuple[str, str]:
    """(directory to run in, the name the seed would print): ``~`` is not expanded, relative
    paths start at the default cwd, "" means the default."""
    base = rt.config.resolved_default_cwd
    if not cwd:
        return base, base
    return os.path.join(base, cwd), cwd


async def _run(rt: Engine, args: dict[str, Any], ctx: ToolContext, tool_mode: str) -> dict:
    normalize_purpose(args.get("purpose"))
    what: dict[str, Any] = {}
    if tool_mode == "run":
        check_argv(args["argv"])
        check_stdin(args.get("stdin"))
    elif tool_mode == "script":
        check_script(args["script"])
        check_stdin(args.get("stdin"))
    shell_env = meta_shell_env(ctx)

    # from here on the seed's executor has made the call's output file
    nbytes = args.get("bytes")
    if nbytes is not None and nbytes < 0:
        raise Fail("INVALID_BYTES", "bytes 不能小于 0", output_path=_output_file(rt))
    timeout = args.get("timeout")
    if timeout is not None and timeout < 0:
        raise Fail("INVALID_TIMEOUT", "timeout 不能小于 0", output_path=_output_file(rt))
    budget = MAX_OUTPUT_BYTES if nbytes is None else min(nbytes, MAX_OUTPUT_BYTES)
    run_cwd, shown_cwd = _resolve_cwd(rt, args.get("cwd"))
    if not os.path.isdir(run_cwd):
        raise Fail("CWD_NOT_FOUND", f"工作目录不存在: {shown_cwd}", output_path=_output_file(rt))
    text: str | None = args.get("command") if tool_mode == "bash" else args.get("script")
    if (text is not None and "\x00" in text) or any("\x00" in v for v in shell_env.values()):
        raise Fail("EXECUTION_ERROR", "embedded null byte", output_path=_output_file(rt))
    shell = rt.bash or "/bin/sh"
    big = text is not None and len(text.encode("utf-8", "surrogatepass")) >= _MAX_ARG_STRLEN
    if tool_mode == "bash" and big:
        # the seed passes the command as one argument: the kernel refuses one this long
        message = f"无法启动命令: [Errno 7] Argument list too long: {shell!r}"
        raise Fail("EXECUTION_ERROR", message, output_path=_output_file(rt))
    if tool_mode == "run":
        what["argv"] = args["argv"]
    elif text is not None and not text.strip():
        what["argv"] = [shell, "-c", text]  # blank: runs, and does nothing
    else:
        what["command" if tool_mode == "bash" else "script"] = text
    if tool_mode != "bash":
        what["stdin"] = args.get("stdin")

    # None, 0 and nan wait for the end (the seed's `timeout > 0` test); so does an endless one
    wait_s = timeout if timeout is not None and 0 < timeout < FOREVER_S else None
    kill = args.get("timeout_behavior") == "kill" and wait_s is not None
    wait_ms = None if wait_s is None else max(1, round(wait_s * 1000))
    started = time.monotonic()
    try:
        req = ExecRequest(
            digest=False,  # the seed's own result shape has no digest
            **what,
            cwd=run_cwd,
            # the seed's bash inherits the server's PWD, which never names the job's directory,
            # so it starts from the physical path: a symlinked cwd prints resolved (`pwd`)
            env=_physical_pwd(run_cwd),
            # background: the job outlives the wait with no deadline, like the seed's
            timeout_ms=wait_ms if kill and wait_ms else 0,
            yield_ms=_MAX_YIELD_MS if wait_ms is None else min(wait_ms, _MAX_YIELD_MS),
            max_output_bytes=0,
        )
        context = CallContext(
            caller_session_id=caller_session_id(ctx), shell_env=shell_env, label=ctx.label
        )
        snap = await rt.exec(req, context)
    except ConchError as e:
        program = what["argv"][0] if "argv" in what else shell
        raise _exec_failure(rt, e, budget, started, program) from None
    job = rt.job(snap["job_id"])
    if not job.terminal:
        waited = job.duration_ms / 1000
        if wait_ms is None:
            await _wait_end(rt, job, None)
        elif kill:
            # the runtime's deadline kills the tree (TERM, grace, KILL); wait for it, bounded
            grace = rt.config.kill_grace_ms / 1000
            await _wait_end(rt, job, wait_ms / 1000 - waited + grace + 2.0)
        else:
            await _wait_end(rt, job, wait_ms / 1000 - waited)
    if kill and not job.terminal:
        output, truncated, size = job_preview(job, budget)
        return seed_result(
            "TIMEOUT",
            success=False,
            message="显式终止失败: 进程树未在限时内结束",
            exit_code=-1,
            tool_mode=tool_mode,
            output=output,
            output_path=job.log.path,
            truncated=truncated,
            total_bytes=size,
            duration_ms=job.duration_ms,
        )
    handle = None
    if not job.terminal and job.state != "output_limit":
        handles = ctx.profile_state(Handles)
        handles.prune(lambda jid: _alive(rt, jid))
        handle = handles.add(job.job_id, tool_mode)
    return job_result(job, tool_mode, budget, timeout, handle, rt.config.max_log_bytes)


def _alive(rt: Engine, job_id: str) -> bool:
    try:
        rt.job(job_id)
    except ConchError:
        return False
    return True


def _os_error(e: ConchError, program: str) -> str:
    """What Python's OSError says when ``program`` does not start, as the seed shows it."""
    number = {"not found": errno.ENOENT, "not permitted": errno.EACCES}.get(str(e.value))
    if number is None:
        number = getattr(errno, str(e.value), None) if e.value else None
    if not isinstance(number, int):
        return e.message
    return f"[Errno {number}] {os.strerror(number)}: {program!r}"


def _exec_failure(rt: Engine, e: ConchError, budget: int, started: float, program: str) -> Fail:
    if e.code == "syntax_error":
        # bash's own text (the core keeps its bytes in ``value``)
        raw = (e.value or e.message).encode("utf-8", "surrogateescape")
        kept = raw[:MAX_SYNTAX_OUTPUT_BYTES]
        return Fail(
            "SCRIPT_SYNTAX_ERROR",
            "脚本语法检查失败，未执行脚本",
            output_path=_output_file(rt, kept),
            output=sanitize(kept[:budget].decode("utf-8", "replace")),
            truncated=len(raw) > MAX_SYNTAX_OUTPUT_BYTES or len(kept) > budget,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
    if e.code == "cwd_not_found":
        message = f"工作目录不存在: {e.message.rsplit(': ', 1)[-1]}"
        return Fail("CWD_NOT_FOUND", message, output_path=_output_file(rt))
    if e.code == "spawn_failed":
        message = f"无法启动命令: {_os_error(e, program)}"
        return Fail("EXECUTION_ERROR", message, output_path=_output_file(rt))
    return Fail("EXECUTION_ERROR", f"无法启动命令: {e.message}", output_path=_output_file(rt))


def exec_handler(
    tool_mode: str,
) -> Callable[[Engine, dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]:
    async def handler(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            return await _run(rt, args, ctx, tool_mode)
        except Fail as e:
            return failure(e, tool_mode)

    return handler
