"""Background jobs and ``get``: a call whose wait ends before its job does answers
``BACKGROUND`` with a ``background_pid``, which is not an OS pid (docs/spec.md §9) but a random
handle, above any pid the OS can hand out, that this runtime's table maps back to the Conch job and
the tool mode that started it; ``get`` polls the job through it."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conch.core import Engine
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles.ai_device_bash.limits import FOREVER_S, MAX_OUTPUT_BYTES
from conch.tools.profiles.ai_device_bash.results import (
    Fail,
    empty_log,
    exit_code_of,
    failure,
    job_preview,
    seed_result,
    wait_end,
)

if TYPE_CHECKING:
    from conch.core import JobView

# Linux pid_max is at most 2**22: a handle from this range can never be mistaken for a pid
_HANDLE_MIN = 10_000_000
_HANDLE_MAX = 2**31 - 1


class Handles:
    """background_pid <-> (job id, tool mode), per runtime."""

    def __init__(self) -> None:
        self._jobs: dict[int, tuple[str, str]] = {}  # handle -> (job id, tool mode)

    def add(self, job_id: str, tool_mode: str) -> int:
        while True:
            handle = _HANDLE_MIN + secrets.randbelow(_HANDLE_MAX - _HANDLE_MIN)
            if handle not in self._jobs:
                self._jobs[handle] = (job_id, tool_mode)
                return handle

    def get(self, handle: int) -> tuple[str, str] | None:
        return self._jobs.get(handle)

    def prune(self, alive: Callable[[str], bool]) -> None:
        for h, (job_id, _) in list(self._jobs.items()):
            if not alive(job_id):
                del self._jobs[h]


async def get_handler(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    pid = args["pid"]
    timeout = args.get("timeout")
    nbytes = args["bytes"]
    if nbytes < 0:
        return failure(Fail("INVALID_BYTES", "bytes 不能小于 0", None), None)
    if timeout is not None and timeout < 0:
        return failure(Fail("INVALID_TIMEOUT", "timeout 不能小于 0", None), None)
    entry = ctx.profile_state(Handles).get(pid)
    job = None
    if entry is not None:
        with contextlib.suppress(ConchError):
            job = rt.job(entry[0])
    if entry is None or job is None:
        return failure(Fail("NOT_RUNNING", f"目标进程不在运行中: {pid}", None), None)
    if timeout is not None and timeout > 0 and not job.terminal:
        await _wait_end_get(job, timeout)
    budget = min(nbytes, MAX_OUTPUT_BYTES)
    tool_mode = entry[1]
    if job.state == "output_limit":
        empty_log(job)
    output, truncated, size = job_preview(job, budget, prefer_tail=True)
    if not job.terminal:
        code, message, exit_code = "RUNNING", f"目标进程仍在运行: {pid}", None
    else:
        exit_code = -1 if job.state in ("output_limit", "timed_out") else exit_code_of(job)
        if exit_code == 0 and job.state == "exited":
            code, message = "OK", "命令执行成功"
        else:
            code, message = "COMMAND_ERROR", f"命令执行完成，退出码 {exit_code}"
    return seed_result(
        code,
        success=exit_code is None or exit_code == 0,
        message=message,
        exit_code=exit_code,
        tool_mode=tool_mode,
        output=output,
        output_path=job.log.path,
        truncated=truncated,
        total_bytes=size,
        duration_ms=job.duration_ms,
        background_pid=pid if exit_code is None else None,
    )


async def _wait_end_get(job: JobView, timeout: float) -> None:
    await wait_end(job, None if timeout >= FOREVER_S else timeout)
