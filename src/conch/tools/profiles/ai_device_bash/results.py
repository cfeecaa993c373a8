"""What an ai-device-bash call answers: the seed's 12-key result (``success``, ``code``,
``message``, ``exit_code``, ``output`` …), the failure the handlers raise and its result, the
output preview (head + marker + tail of the raw output file, ANSI stripped, CR turned into LF),
the result of a job once the wait is over, the shape of Conch's own errors (pydantic's
rejections, a closed runtime) and FastMCP's text block."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal as signal_mod
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from conch.errors import ConchError
from conch.tools.profiles._common import ProfileError

if TYPE_CHECKING:
    from conch.core import JobView

_MARKER = b"\n...[output omitted]...\n"  # the seed's preview marker (24 bytes)
# the seed's sanitizer, verbatim (its first branch also eats "ESC ]", as the seed's does)
_ANSI_ESCAPE = re.compile(
    r"""
    \x1B
    (?:
        [@-Z\\-_]
        |\[[0-?]*[ -/]*[@-~]
        |\][^\x07]*(?:\x07|\x1B\\)
    )
    """,
    re.VERBOSE,
)

_FIELD_CODES = {
    "argv": "INVALID_ARGV",
    "stdin": "INVALID_STDIN",
    "script": "INVALID_SCRIPT",
    "bytes": "INVALID_BYTES",
    "timeout": "INVALID_TIMEOUT",
    "timeout_behavior": "INVALID_TIMEOUT_BEHAVIOR",
    "purpose": "INVALID_PURPOSE",
    "cwd": "CWD_NOT_FOUND",
}


class Fail(ProfileError):
    """A seed-level failure: becomes a 12-key result with success false. ``output_path`` is
    set for failures the seed's executor reports (it made the output file first)."""

    def __init__(
        self,
        code: str,
        message: str,
        exit_code: int | None = -1,
        *,
        output_path: str | None = None,
        output: str = "",
        truncated: bool = False,
        duration_ms: int = 0,
    ) -> None:
        super().__init__(code, message)
        self.message = message
        self.exit_code = exit_code
        self.output_path = output_path
        self.output = output
        self.truncated = truncated
        self.duration_ms = duration_ms


def seed_result(
    code: str,
    *,
    success: bool,
    message: str,
    exit_code: int | None,
    tool_mode: str | None,
    output: str = "",
    output_path: str | None = None,
    truncated: bool = False,
    total_bytes: int | None = None,
    duration_ms: int = 0,
    background_pid: int | None = None,
) -> dict[str, Any]:
    return {
        "success": success,
        "code": code,
        "message": message,
        "exit_code": exit_code,
        "output": output,
        "output_path": output_path,
        "truncated": truncated,
        "returned_output_bytes": len(output.encode("utf-8", "surrogatepass")),
        "total_bytes": total_bytes,
        "duration_ms": duration_ms,
        "background_pid": background_pid,
        "tool_mode": tool_mode,
    }


def failure(e: Fail, tool_mode: str | None) -> dict[str, Any]:
    total = None
    if e.output_path is not None:
        with contextlib.suppress(OSError):
            total = os.path.getsize(e.output_path)
    return seed_result(
        e.code,
        success=False,
        message=e.message,
        exit_code=e.exit_code,
        tool_mode=tool_mode,
        output=e.output,
        output_path=e.output_path,
        truncated=e.truncated,
        total_bytes=total,
        duration_ms=e.duration_ms,
    )


def sanitize(text: str) -> str:
    """The seed's ``sanitize_output_text``: ANSI sequences out, CRLF and lone CR become LF."""
    if not text:
        return text
    text = _ANSI_ESCAPE.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def preview(
    read: Callable[[int, int], bytes], size: int, budget: int, *, prefer_tail: bool = False
) -> tuple[str, bool]:
    """The seed's ``read_preview_file`` over raw output bytes: all of it when it fits; else
    head + marker + tail (UTF-8 cut at the edges dropped); a budget too small for the marker
    keeps the head, or the newest tail for ``get`` (``prefer_tail``)."""
    budget = max(0, budget)
    if size <= budget:
        return sanitize(read(0, size).decode("utf-8", "replace")), False
    if budget < len(_MARKER) + 2:
        start = size - budget if prefer_tail and budget else 0
        return sanitize(read(start, start + budget).decode("utf-8", "ignore")), True
    head_n = (budget - len(_MARKER) + 1) // 2
    tail_n = budget - len(_MARKER) - head_n
    head = read(0, head_n).decode("utf-8", "ignore")
    tail = read(size - tail_n, size).decode("utf-8", "ignore")
    return sanitize(head + _MARKER.decode() + tail), True


def job_preview(job: JobView, budget: int, *, prefer_tail: bool = False) -> tuple[str, bool, int]:
    size = job.log.size()
    text, truncated = preview(job.log.read, size, budget, prefer_tail=prefer_tail)
    return text, truncated, size


def empty_log(job: JobView) -> None:
    """The seed empties the output file when the output cap is hit."""
    with contextlib.suppress(OSError):
        os.truncate(job.log.path, 0)


def exit_code_of(job: JobView) -> int:
    code = job.exit_code
    if job.signal is not None and (code is None or job.state == "cancelled"):
        # like asyncio's returncode: a signal is its negative number
        with contextlib.suppress(KeyError):
            code = -signal_mod.Signals[job.signal].value
    return -1 if code is None else code


def job_result(
    job: JobView, tool_mode: str, budget: int, timeout: float | None, handle: int | None, cap: int
) -> dict[str, Any]:
    """What bash/run/script answer once the wait is over (``cap``: the output file cap)."""
    if job.state == "output_limit":
        empty_log(job)
        return seed_result(
            "OUTPUT_LIMIT_EXCEEDED",
            success=False,
            message=f"命令输出超过 {cap} 字节上限，输出文件已清空",
            exit_code=-1,
            tool_mode=tool_mode,
            output_path=job.log.path,
            total_bytes=0,
            duration_ms=job.duration_ms,
        )
    output, truncated, size = job_preview(job, budget)
    common: dict[str, Any] = {
        "tool_mode": tool_mode,
        "output": output,
        "output_path": job.log.path,
        "truncated": truncated,
        "total_bytes": size,
        "duration_ms": job.duration_ms,
    }
    if not job.terminal:
        return seed_result(
            "BACKGROUND",
            success=True,
            message=f"命令执行超时（{timeout}秒），已转入后台继续运行",
            exit_code=None,
            background_pid=handle,
            **common,
        )
    if job.state == "timed_out":
        return seed_result(
            "TIMEOUT",
            success=False,
            message=f"命令执行超时（{timeout}秒），进程已终止",
            exit_code=-1,
            **common,
        )
    code = exit_code_of(job)
    if job.state == "exited" and code == 0:
        return seed_result("OK", success=True, message="命令执行成功", exit_code=0, **common)
    return seed_result(
        "COMMAND_ERROR",
        success=False,
        message=f"命令执行完成，退出码 {code}",
        exit_code=code,
        **common,
    )


# -- error_result: pydantic's rejections, a closed runtime -----------------------------------------


def error_result(tool_mode: str | None) -> Callable[[ConchError, Mapping[str, Any]], Any]:
    def shape(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        if e.code == "invalid_argument":
            # the text block is pydantic's message, as FastMCP sends it
            field = re.split(r"[.\[]", e.field or "", maxsplit=1)[0]
            code = _FIELD_CODES.get(field, "INVALID_ARGUMENT")
            message = e.message
        elif e.code == "closed":
            code, message = "EXECUTION_ERROR", "ExecutionEngine is closed"
        else:
            code, message = "EXECUTION_ERROR", f"Error calling tool {tool_mode or 'get'!r}"
        exit_code = None if tool_mode is None else -1
        return seed_result(
            code, success=False, message=message, exit_code=exit_code, tool_mode=tool_mode
        ), True

    return shape


def text_block(result: dict[str, Any], is_error: bool) -> str:
    """FastMCP's text block: the result as compact JSON; a rejected call is just the error."""
    if is_error:
        return str(result.get("message", ""))
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


async def wait_end(job: JobView, limit_s: float | None) -> None:
    """Wait for the job to end, or ``limit_s`` (forever when None), in steps of an hour at
    most (a timer that far out is what the loop handles well)."""
    while not job.terminal:
        step = 3600.0 if limit_s is None else min(limit_s, 3600.0)
        if step <= 0:
            return
        t0 = time.monotonic()
        await job.wait_until(lambda: job.terminal, step)
        if limit_s is not None:
            limit_s -= time.monotonic() - t0
