"""Profile ``ai-device-bash``: seed 1's ``bash`` / ``run`` / ``script`` / ``get`` on the runtime.

Contract kept: the 12-key result, ``timeout`` in seconds with ``timeout_behavior``
(``background``: the job goes on and ``get`` follows it; ``kill``: the tree is killed), the
``bytes`` budget (at most 8192, the seed's ``BASH_MAX_OUTPUT_BYTES``), ``purpose`` as
``_meta.summary``, ``_meta.shell_env``, caller-context projection and the seed's codes.

Bugs dropped: ``duration_ms`` is frozen when the job ends; a negative ``timeout`` is
``INVALID_TIMEOUT``; a kill-mode timeout returns as soon as the tree is dead, whatever escaped
daemons hold. ``background_pid`` is not an OS pid (SPEC §9): it is a random handle, above any
pid the OS can hand out, that ``get`` maps back to the Conch job.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import signal as signal_mod
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from conch.config import ENV_NAME_PATTERN, MAX_WAIT_MS
from conch.core.engine import Engine
from conch.core.env import CALLER_SESSION_VAR
from conch.core.output import window as win
from conch.errors import ConchError
from conch.tools.context import CallContext
from conch.tools.profiles._common import Profile, ProfileError, profile_state
from conch.tools.tool import Tool

if TYPE_CHECKING:
    from conch.core.jobs.job import Job

MAX_OUTPUT_BYTES = 8192
MAX_ARGV_COUNT = 4096
MAX_ARGV_BYTES = 262144
MAX_SCRIPT_BYTES = 1024 * 1024
MAX_STDIN_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT_S = 60.0
GET_DEFAULT_BYTES = 200
_MARKER = "\n...[output omitted]...\n"  # the seed's preview marker (24 bytes)
# Linux pid_max is at most 2**22: a handle from this range can never be mistaken for a pid
_HANDLE_MIN = 10_000_000
_HANDLE_MAX = 2**31 - 1
_MAX_YIELD_MS = MAX_WAIT_MS
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
_DEFAULT_SUMMARY = {"bash": "bash", "run": "run command", "script": "script"}
_TOOL_MODE = {"command": "bash", "argv": "run", "script": "script"}
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


class _Fail(ProfileError):
    """A seed-level failure: becomes a 12-key result with success false."""

    def __init__(self, code: str, message: str, exit_code: int | None = -1) -> None:
        super().__init__(code, message)
        self.exit_code = exit_code


# -- handles: background_pid <-> job id, per runtime ---------------------------------------------


class _Handles:
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


def _handles(rt: Engine) -> _Handles:
    return profile_state(rt, _Handles)


# -- results -------------------------------------------------------------------------------------


def _result(
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


def _failure(e: _Fail, tool_mode: str | None) -> dict[str, Any]:
    return _result(
        e.code, success=False, message=e.message, exit_code=e.exit_code, tool_mode=tool_mode
    )


def _preview(job: Job, budget: int, *, prefer_tail: bool) -> tuple[str, bool]:
    """The seed's preview: everything if it fits, else head + marker + tail (tail only for
    ``get`` when the budget cannot hold the marker); normalized text from the job's log."""
    log = job.log
    total = log.size()
    if total == 0:
        return "", False
    if budget <= 0:
        return "", True
    final = job.terminal
    whole = win.forward(log, 0, total, budget, stream=None, raw=False, final=final)
    if whole.next_cursor >= total:
        return whole.text, False
    room = budget - len(_MARKER)
    if room < 2:
        if prefer_tail:
            return win.backward(log, 0, total, budget, stream=None, raw=False).text, True
        return whole.text, True
    head = win.forward(log, 0, total, (room + 1) // 2, stream=None, raw=False, final=final)
    tail = win.backward(
        log, head.next_cursor, total, room - (room + 1) // 2, stream=None, raw=False
    )
    return head.text + _MARKER + tail.text, True


def _job_result(
    job: Job,
    tool_mode: str,
    budget: int,
    *,
    prefer_tail: bool = False,
    running_code: str = "BACKGROUND",
    handle: int | None = None,
) -> dict[str, Any]:
    output, truncated = _preview(job, budget, prefer_tail=prefer_tail)
    common: dict[str, Any] = {
        "tool_mode": tool_mode,
        "output": output,
        "output_path": job.log.path,
        "truncated": truncated,
        "total_bytes": job.log.size(),
        "duration_ms": job.duration_ms,
    }
    if not job.terminal:
        message = (
            "命令在超时后转入后台继续运行，可用 get 查询结果"
            if running_code == "BACKGROUND"
            else "后台命令仍在运行"
        )
        return _result(
            running_code,
            success=True,
            message=message,
            exit_code=None,
            background_pid=handle,
            **common,
        )
    if job.state == "timed_out":
        return _result(
            "TIMEOUT", success=False, message="命令执行超时，已终止", exit_code=-1, **common
        )
    if job.state == "output_limit":
        return _result(
            "OUTPUT_LIMIT_EXCEEDED",
            success=False,
            message="输出超过文件上限，命令已终止",
            exit_code=-1,
            **common,
        )
    code = job.exit_code
    if job.signal is not None and (code is None or job.state == "cancelled"):
        # like asyncio's returncode: a signal is its negative number
        with contextlib.suppress(KeyError):
            code = -signal_mod.Signals[job.signal].value
    if job.state == "exited" and code == 0:
        return _result("OK", success=True, message="命令执行成功", exit_code=0, **common)
    if code is None:
        code = -1
    how = "被终止" if job.state == "cancelled" else "执行失败"
    return _result(
        "COMMAND_ERROR",
        success=False,
        message=f"命令{how}，退出码 {code}",
        exit_code=code,
        **common,
    )


# -- argument checks the seed made itself (its codes, not schema errors) ----------------------


def _purpose_summary(purpose: Any, default: str) -> str:
    if isinstance(purpose, str) and purpose.strip() and len(purpose.strip()) <= 200:
        return purpose.strip()
    return default


def _check_common(args: Mapping[str, Any]) -> tuple[int, float | None]:
    purpose = args.get("purpose")
    if purpose is not None and (not purpose.strip() or len(purpose.strip()) > 200):
        raise _Fail("INVALID_PURPOSE", "purpose 去除首尾空白后必须为 1 到 200 个字符")
    nbytes = args.get("bytes")
    if nbytes is not None and nbytes < 0:
        raise _Fail("INVALID_BYTES", "bytes 不能为负数")
    budget = MAX_OUTPUT_BYTES if nbytes is None else min(nbytes, MAX_OUTPUT_BYTES)
    timeout = args.get("timeout", DEFAULT_TIMEOUT_S)
    if timeout is not None and timeout < 0:
        raise _Fail("INVALID_TIMEOUT", "timeout 不能为负数（0 或 null 表示一直等待）")
    return budget, (float(timeout) if timeout else None)


def _shell_env(ctx: CallContext) -> dict[str, str]:
    raw = (ctx.meta or {}).get("shell_env")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Fail("INVALID_META", "_meta.shell_env 必须是对象")
    env: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise _Fail("INVALID_META", f"_meta.shell_env 的变量名无效: {k!r}")
        if v is None:
            raise _Fail("INVALID_META", f"_meta.shell_env 的值不能为 null: {k}")
        value = v if isinstance(v, str) else str(v)
        if "\x00" in value:
            raise _Fail("INVALID_META", f"_meta.shell_env 的值不能包含 NUL: {k}")
        env[k] = value
    env.pop(CALLER_SESSION_VAR, None)  # only the caller context may set it
    return env


def _check_stdin(stdin: str | None) -> None:
    if stdin is not None and len(stdin.encode("utf-8", "surrogatepass")) > MAX_STDIN_BYTES:
        raise _Fail("STDIN_TOO_LARGE", f"stdin 超过 {MAX_STDIN_BYTES} 字节")


def _check_argv(argv: list[str]) -> None:
    if not argv or argv[0] == "":
        raise _Fail("INVALID_ARGV", "argv 必须是非空列表，且 argv[0] 不能为空")
    if len(argv) > MAX_ARGV_COUNT:
        raise _Fail("ARGV_TOO_LARGE", f"argv 超过 {MAX_ARGV_COUNT} 个元素")
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in argv) > MAX_ARGV_BYTES:
        raise _Fail("ARGV_TOO_LARGE", f"argv 总长度超过 {MAX_ARGV_BYTES} 字节")


def _check_script(script: str) -> None:
    if not script.strip():
        raise _Fail("INVALID_SCRIPT", "script 不能为空")
    if len(script.encode("utf-8", "surrogatepass")) > MAX_SCRIPT_BYTES:
        raise _Fail("SCRIPT_TOO_LARGE", f"script 超过 {MAX_SCRIPT_BYTES} 字节")


# -- handlers --------------------------------------------------------------------------------------


async def _wait_end(rt: Engine, job: Job, limit_s: float | None) -> None:
    """Wait for the job to end (forever when limit_s is None); a cancelled call kills it."""
    try:
        while not job.terminal:
            step = 3600.0 if limit_s is None else limit_s
            if step <= 0:
                return
            t0 = time.monotonic()
            await job.wait_until(lambda: job.terminal, step)
            if limit_s is not None:
                limit_s -= time.monotonic() - t0
    except asyncio.CancelledError:
        if not job.terminal:
            with contextlib.suppress(Exception):
                await asyncio.shield(rt.signal(job.job_id, "kill", wait_ms=2000))
        raise


async def _run(rt: Engine, args: dict[str, Any], ctx: CallContext, tool_mode: str) -> dict:
    budget, timeout_s = _check_common(args)
    behavior = args.get("timeout_behavior", "background")
    shell_env = _shell_env(ctx)
    what: dict[str, Any] = {}
    if tool_mode == "bash":
        what["command"] = args["command"]
    elif tool_mode == "run":
        _check_argv(args["argv"])
        what["argv"] = args["argv"]
    else:
        _check_script(args["script"])
        what["script"] = args["script"]
    if tool_mode != "bash":
        _check_stdin(args.get("stdin"))
        what["stdin"] = args.get("stdin")
    wait_ms = None if timeout_s is None else max(1, round(timeout_s * 1000))
    kill = behavior == "kill" and wait_ms is not None
    try:
        snap = await rt.exec(
            **what,
            cwd=args.get("cwd"),
            # background: the job outlives the wait with no deadline, like the seed's
            timeout_ms=wait_ms if kill and wait_ms else 0,
            yield_ms=_MAX_YIELD_MS if wait_ms is None else min(wait_ms, _MAX_YIELD_MS),
            max_output_bytes=0,
            shell_env=shell_env,
            caller_session_id=ctx.caller_session_id(),
            on_start=ctx.job_started,
        )
    except ConchError as e:
        raise _exec_failure(e) from None
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
        return _result(
            "TIMEOUT",
            success=False,
            message="命令执行超时，显式终止失败",
            exit_code=-1,
            tool_mode=tool_mode,
            output_path=job.log.path,
            total_bytes=job.log.size(),
            duration_ms=job.duration_ms,
        )
    handle = None
    if not job.terminal:
        handles = _handles(rt)
        handles.prune(lambda jid: _alive(rt, jid))
        handle = handles.add(job.job_id, tool_mode)
    return _job_result(job, tool_mode, budget, handle=handle)


def _alive(rt: Engine, job_id: str) -> bool:
    try:
        rt.job(job_id)
    except ConchError:
        return False
    return True


def _exec_failure(e: ConchError) -> _Fail:
    if e.code == "cwd_not_found":
        return _Fail("CWD_NOT_FOUND", f"工作目录不存在: {e.value}")
    if e.code == "syntax_error":
        return _Syntax(e.message)
    if e.code == "spawn_failed":
        return _Fail("EXECUTION_ERROR", f"无法启动命令: {e.message}")
    if e.code == "invalid_argument" and e.field == "_meta.shell_env":
        return _Fail("INVALID_META", e.message)
    return _Fail("EXECUTION_ERROR", f"执行失败: {e.message}")


class _Syntax(_Fail):
    def __init__(self, diagnostics: str) -> None:
        super().__init__("SCRIPT_SYNTAX_ERROR", "脚本语法检查失败（bash -n），未执行")
        self.diagnostics = diagnostics


def _failure_with_output(e: _Fail, tool_mode: str | None) -> dict[str, Any]:
    r = _failure(e, tool_mode)
    if isinstance(e, _Syntax):
        r["output"] = e.diagnostics
        r["returned_output_bytes"] = len(e.diagnostics.encode("utf-8", "surrogatepass"))
    return r


async def _get(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    timeout = args.get("timeout", 0)
    nbytes = args.get("bytes", GET_DEFAULT_BYTES)
    if timeout is not None and timeout < 0:
        return _failure(_Fail("INVALID_TIMEOUT", "timeout 不能为负数", None), None)
    if nbytes < 0:
        return _failure(_Fail("INVALID_BYTES", "bytes 不能为负数", None), None)
    entry = _handles(rt).get(args["pid"])
    job = None
    if entry is not None:
        with contextlib.suppress(ConchError):
            job = rt.job(entry[0])
    if entry is None or job is None:
        return _failure(
            _Fail("NOT_RUNNING", "没有这个后台任务（未知、已过期或属于其他实例）", None), None
        )
    if timeout and not job.terminal:
        await job.wait_until(lambda: job.terminal, float(timeout))
    budget = min(nbytes, MAX_OUTPUT_BYTES)
    return _job_result(
        job,
        entry[1],
        budget,
        prefer_tail=True,
        running_code="RUNNING",
        handle=args["pid"],
    )


# -- error_result: schema failures, host, closed runtime -------------------------------------------


def _error_result(tool_mode: str | None) -> Callable[[ConchError, Mapping[str, Any]], Any]:
    def shape(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        if e.code == "invalid_argument":
            field = re.split(r"[.\[]", e.field or "", maxsplit=1)[0]
            code = _FIELD_CODES.get(field, "INVALID_ARGUMENT")
            if field == "bytes" and tool_mode is None:
                code = "INVALID_BYTES"
            message = f"参数无效: {e.message}"
        elif e.code == "closed":
            code, message = "EXECUTION_ERROR", "运行时已关闭"
        else:
            code, message = "EXECUTION_ERROR", f"执行失败: {e.message}"
        exit_code = None if tool_mode is None else -1
        return _result(
            code, success=False, message=message, exit_code=exit_code, tool_mode=tool_mode
        ), True

    return shape


def _exec_handler(
    tool_mode: str,
) -> Callable[[Engine, dict[str, Any], CallContext], Awaitable[dict[str, Any]]]:
    async def run(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        try:
            return await _run(rt, args, ctx, tool_mode)
        except _Fail as e:
            return _failure_with_output(e, tool_mode)

    return run


# -- schemas ---------------------------------------------------------------------------------------

_NULLABLE_STR = {"type": ["string", "null"]}
_COMMON_PROPS: dict[str, Any] = {
    "purpose": {
        "type": ["string", "null"],
        "description": "Why you run this (1-200 characters); shown as the call's summary.",
    },
    "cwd": {
        "type": ["string", "null"],
        "description": "Working directory (absolute, or relative to the default cwd).",
    },
    "timeout": {
        "type": ["number", "null"],
        "default": DEFAULT_TIMEOUT_S,
        "description": "Seconds to wait. 0 or null: wait until the command ends.",
    },
    "bytes": {
        "type": ["integer", "null"],
        "description": f"Inline output budget in bytes (at most {MAX_OUTPUT_BYTES}; null = max).",
    },
    "timeout_behavior": {
        "enum": ["background", "kill"],
        "default": "background",
        "description": "At the timeout: `background` keeps the command running (follow it "
        "with `get`), `kill` kills its whole process tree.",
    },
}
_STDIN = {
    "type": ["string", "null"],
    "description": "Text fed to stdin (exact UTF-8 bytes, then EOF). null: empty stdin.",
}


def _input(first: str, first_schema: dict[str, Any], *, stdin: bool) -> dict[str, Any]:
    props = {first: first_schema, **_COMMON_PROPS}
    if stdin:
        props = {first: first_schema, "purpose": _COMMON_PROPS["purpose"], "stdin": _STDIN}
        props.update({k: v for k, v in _COMMON_PROPS.items() if k != "purpose"})
    return {
        "type": "object",
        "properties": props,
        "required": [first],
        "additionalProperties": False,
    }


GET_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {
            "type": "integer",
            "description": "The `background_pid` handle from bash/run/script (not an OS pid).",
        },
        "timeout": {
            "type": ["number", "null"],
            "default": 0,
            "description": "Seconds to wait for the command to finish (0: answer at once).",
        },
        "bytes": {
            "type": "integer",
            "default": GET_DEFAULT_BYTES,
            "description": f"Inline output budget (at most {MAX_OUTPUT_BYTES}).",
        },
    },
    "required": ["pid"],
    "additionalProperties": False,
}

RESULT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "success": {"type": "boolean"},
        "code": {"type": "string"},
        "message": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},
        "output": {"type": "string"},
        "output_path": {"type": ["string", "null"]},
        "truncated": {"type": "boolean"},
        "returned_output_bytes": {"type": "integer"},
        "total_bytes": {"type": ["integer", "null"]},
        "duration_ms": {"type": "integer"},
        "background_pid": {"type": ["integer", "null"]},
        "tool_mode": {"enum": ["bash", "run", "script", None]},
    },
    "required": [
        "success",
        "code",
        "message",
        "exit_code",
        "output",
        "output_path",
        "truncated",
        "returned_output_bytes",
        "total_bytes",
        "duration_ms",
        "background_pid",
        "tool_mode",
    ],
}

_HANDLE_NOTE = "`background_pid` is an opaque handle for `get`, never an OS process id."
_COMMON_NOTE = (
    "Waits up to `timeout` seconds (default 60). At the timeout, `timeout_behavior: "
    "background` (default) leaves the command running and returns code BACKGROUND with a "
    "`background_pid` for `get`; `kill` kills the whole process tree (code TIMEOUT). "
    "Output (stdout and stderr merged) is previewed within `bytes` (max 8192); the full "
    "output is in `output_path`. " + _HANDLE_NOTE
)


def _summary(tool_mode: str) -> Callable[[Mapping[str, Any]], str]:
    default = _DEFAULT_SUMMARY[tool_mode]
    return lambda args: _purpose_summary(args.get("purpose"), default)


def _get_summary(args: Mapping[str, Any]) -> str:
    return f"get {args.get('pid')}"


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's tools, in the seed's order."""
    specs = (
        (
            "bash",
            "Run a bash command",
            "Run a bash command line (`bash -c`), stdin empty. " + _COMMON_NOTE,
            _input("command", {"type": "string", "description": "Bash command line."}, stdin=False),
        ),
        (
            "run",
            "Run a program",
            "Run a program with literal arguments (no shell, no globbing). " + _COMMON_NOTE,
            _input(
                "argv",
                {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Program and arguments, all literal.",
                },
                stdin=True,
            ),
        ),
        (
            "script",
            "Run a bash script",
            "Run a multi-line bash script; it is syntax-checked with `bash -n` first and "
            "nothing runs on a syntax error. " + _COMMON_NOTE,
            _input("script", {"type": "string", "description": "Bash script text."}, stdin=True),
        ),
    )
    out = [
        Tool(
            name,
            title,
            description,
            schema,
            RESULT_OUTPUT,
            _exec_handler(name),
            destructive=True,
            error_result=_error_result(name),
            summary=_summary(name),
            progress=True,
        )
        for name, title, description, schema in specs
    ]
    out.append(
        Tool(
            "get",
            "Get a background command's result",
            "Result of a command that went to the background (code RUNNING while it runs). "
            "`pid` is the `background_pid` handle returned by bash/run/script. Waits up to "
            "`timeout` seconds; the preview shows the newest output when `bytes` is small.",
            GET_INPUT,
            RESULT_OUTPUT,
            _get,
            read_only=True,
            error_result=_error_result(None),
            summary=_get_summary,
            progress=True,
        )
    )
    return tuple(out)


PROFILE = Profile("ai-device-bash", tools)
