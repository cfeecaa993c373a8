"""Profile ``ai-device-bash``: seed 1's ``bash`` / ``run`` / ``script`` / ``get`` on the runtime.

A drop-in for ai-device-bash 0.2.0 (SPEC §7): the same tools/list entries (descriptions, the
schemas FastMCP generates, the ``summary_key`` annotation), arguments parsed the way its
FastMCP/pydantic layer parses them (lax mode: ``"5"`` and ``true`` are numbers; a bad argument
is pydantic's own error text with ``isError: true``), its 12-key result as the one compact JSON
text block (no structuredContent), its checks in its order with its messages, its preview (head
+ marker + tail of the raw output file, ANSI stripped, CR turned into LF) and its output files
(every call that reaches the executor gets one, failures included). Served alone, the server
also says what the original says at initialize (name, version, capabilities) and has no
resources or prompts (the MCP server and ``conch.mcp.seed_wire`` read the constants below; see
``conch.tools.profiles``). Proven against the
published package by ``tests/differential/test_ai_device_bash_diff.py``.

Where SPEC §2 decides otherwise: a call returns when the leader exits (the seed waits for
descendants holding stdout), the kill-mode deadline sends TERM before KILL, the child
environment has Conch's agent defaults (``TERM=dumb``, ``PAGER=cat``, ...).

Bugs dropped (seed-contracts §4): ``duration_ms`` is frozen when the job ends; a negative
``timeout`` is ``INVALID_TIMEOUT``; a kill-mode timeout returns as soon as the tree is dead,
whatever escaped daemons hold; nothing is printed on stdout. ``background_pid`` is not an OS pid
(SPEC §9): it is a random handle, above any pid the OS can hand out, that ``get`` maps back to
the Conch job.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import json
import os
import re
import secrets
import signal as signal_mod
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Literal, Optional, cast

from conch.config import ENV_NAME_PATTERN, MAX_WAIT_MS
from conch.core.engine import Engine
from conch.core.env import CALLER_SESSION_VAR
from conch.errors import ConchError, ConfigError
from conch.tools.context import CallContext
from conch.tools.profiles._common import Profile, ProfileError
from conch.tools.tool import Tool

if TYPE_CHECKING:
    from conch.core.jobs.job import Job

# what a client sees in the initialize result when this profile is served alone
SERVER_NAME = "bash"
SERVER_VERSION = "3.4.11"  # FastMCP reports its own version: fastmcp 3.4.11 served 0.2.0
INSTRUCTIONS: str | None = None
# FastMCP's answers (tools/profiles.py, conch.mcp.seed_wire): an unknown tool, resource, prompt
UNKNOWN_TOOL_TEXT = "Unknown tool: {name}"
UNKNOWN_RESOURCE = (-32002, "Resource not found: Unknown resource: {uri}")
UNKNOWN_PROMPT = (0, "Unknown prompt: {name}")
RESOURCE_TEMPLATES: list[dict[str, Any]] = []  # it lists none (and no resources)
# the capabilities FastMCP 3.4.11 announces for the seed
CAPABILITIES: dict[str, Any] = {
    "experimental": {},
    "logging": {},
    "prompts": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "tools": {"listChanged": True},
    "extensions": {"io.modelcontextprotocol/ui": {}},
}

MAX_OUTPUT_BYTES = 8192
MAX_ARGV_COUNT = 4096
MAX_ARGV_BYTES = 262144
MAX_SCRIPT_BYTES = 1024 * 1024
MAX_STDIN_BYTES = 4 * 1024 * 1024
MAX_SYNTAX_OUTPUT_BYTES = 65536
PURPOSE_MAX_CHARS = 200
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
# Linux pid_max is at most 2**22: a handle from this range can never be mistaken for a pid
_HANDLE_MIN = 10_000_000
_HANDLE_MAX = 2**31 - 1
_MAX_YIELD_MS = MAX_WAIT_MS
_MAX_ARG_STRLEN = 131072  # Linux: one argv string (with its NUL) may not be longer
_FOREVER_S = 1e9  # a timeout this long (or inf) waits like no timeout at all
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
_SESSION_ID = re.compile(r"^ses-[0-9]+$")
_DEFAULT_SUMMARY = {"bash": "bash", "run": "run command", "script": "script"}
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


# -- what FastMCP validates: the seed's signatures, parsed by pydantic in lax mode --------------
# The names and annotations are the seed's own: pydantic's error text names the function
# ("call[bash]") and the parameter, exactly as the original's answer does.


def bash(
    command: str,
    purpose: Any = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def run(
    argv: list[str],
    purpose: Any = None,
    stdin: Optional[str] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def script(
    script: str,
    purpose: Any = None,
    stdin: Optional[str] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def get(pid: int, timeout: Optional[float] = 0, bytes: int = 200) -> dict[str, Any]:
    return dict(locals())


_SIGNATURES: dict[str, Callable[..., dict[str, Any]]] = {
    "bash": bash,
    "run": run,
    "script": script,
    "get": get,
}


@cache
def _adapter(name: str) -> Any:
    try:
        from pydantic import TypeAdapter
    except ImportError:  # pragma: no cover - the base install has no pydantic
        raise ConfigError(
            "profiles: ai-device-bash parses arguments as its original (FastMCP/pydantic) "
            "does and needs pydantic: install conch[mcp]"
        ) from None
    return TypeAdapter(cast(Any, _SIGNATURES[name]))


def _validator(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def validate(args: dict[str, Any]) -> dict[str, Any]:
        from pydantic import ValidationError

        try:
            coerced: dict[str, Any] = _adapter(name).validate_python(args)
        except ValidationError as e:
            errors = e.errors()
            loc = errors[0]["loc"] if errors else ()
            field = str(loc[0]) if loc else ""
            raise ConchError("invalid_argument", str(e), field=field) from None
        return coerced

    return validate


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
    total = None
    if e.output_path is not None:
        with contextlib.suppress(OSError):
            total = os.path.getsize(e.output_path)
    return _result(
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


def _job_preview(job: Job, budget: int, *, prefer_tail: bool = False) -> tuple[str, bool, int]:
    size = job.log.size()
    text, truncated = preview(job.log.read, size, budget, prefer_tail=prefer_tail)
    return text, truncated, size


def _empty_log(job: Job) -> None:
    """The seed empties the output file when the output cap is hit."""
    with contextlib.suppress(OSError):
        os.truncate(job.log.path, 0)


def _exit_code(job: Job) -> int:
    code = job.exit_code
    if job.signal is not None and (code is None or job.state == "cancelled"):
        # like asyncio's returncode: a signal is its negative number
        with contextlib.suppress(KeyError):
            code = -signal_mod.Signals[job.signal].value
    return -1 if code is None else code


def _job_result(
    job: Job, tool_mode: str, budget: int, timeout: float | None, handle: int | None, cap: int
) -> dict[str, Any]:
    """What bash/run/script answer once the wait is over (``cap``: the output file cap)."""
    if job.state == "output_limit":
        _empty_log(job)
        return _result(
            "OUTPUT_LIMIT_EXCEEDED",
            success=False,
            message=f"命令输出超过 {cap} 字节上限，输出文件已清空",
            exit_code=-1,
            tool_mode=tool_mode,
            output_path=job.log.path,
            total_bytes=0,
            duration_ms=job.duration_ms,
        )
    output, truncated, size = _job_preview(job, budget)
    common: dict[str, Any] = {
        "tool_mode": tool_mode,
        "output": output,
        "output_path": job.log.path,
        "truncated": truncated,
        "total_bytes": size,
        "duration_ms": job.duration_ms,
    }
    if not job.terminal:
        return _result(
            "BACKGROUND",
            success=True,
            message=f"命令执行超时（{timeout}秒），已转入后台继续运行",
            exit_code=None,
            background_pid=handle,
            **common,
        )
    if job.state == "timed_out":
        return _result(
            "TIMEOUT",
            success=False,
            message=f"命令执行超时（{timeout}秒），进程已终止",
            exit_code=-1,
            **common,
        )
    code = _exit_code(job)
    if job.state == "exited" and code == 0:
        return _result("OK", success=True, message="命令执行成功", exit_code=0, **common)
    return _result(
        "COMMAND_ERROR",
        success=False,
        message=f"命令执行完成，退出码 {code}",
        exit_code=code,
        **common,
    )


# -- the seed's own checks, in its order, with its messages ------------------------------------


def _normalize_purpose(purpose: Any) -> str | None:
    if purpose is None:
        return None
    if not isinstance(purpose, str):
        raise _Fail("INVALID_PURPOSE", "purpose 必须是字符串")
    text = purpose.strip()
    if not text:
        raise _Fail("INVALID_PURPOSE", "purpose 不能为空")
    if len(text) > PURPOSE_MAX_CHARS:
        raise _Fail("INVALID_PURPOSE", f"purpose 不能超过 {PURPOSE_MAX_CHARS} 个字符")
    return text


def _purpose_summary(purpose: Any, default: str) -> str:
    try:
        return _normalize_purpose(purpose) or default
    except _Fail:
        return default


def _shell_env(ctx: CallContext) -> dict[str, str]:
    raw = (ctx.meta or {}).get("shell_env")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Fail("INVALID_META", "meta.shell_env 必须是对象（key-value map）")
    env: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not _ENV_NAME.fullmatch(k):
            raise _Fail("INVALID_META", f"meta.shell_env 包含非法环境变量名: {k!r}")
        if v is None:
            raise _Fail("INVALID_META", f"meta.shell_env[{k!r}] 不能为 null")
        env[k] = str(v)
    env.pop(CALLER_SESSION_VAR, None)  # the seed sets it from the caller context alone
    return env


def _caller_session_id(ctx: CallContext) -> str:
    """The seed's projection: only from a trusted transport, ``assistant.session_id`` trimmed
    and matching ``^ses-[0-9]+$``; else empty."""
    if not ctx.trusted or not ctx.meta:
        return ""
    assistant = ctx.meta.get("assistant")
    sid = assistant.get("session_id") if isinstance(assistant, Mapping) else None
    if not isinstance(sid, str):
        return ""
    sid = sid.strip()
    return sid if _SESSION_ID.fullmatch(sid) else ""


def _check_argv(argv: list[str]) -> None:
    if not argv:
        raise _Fail("INVALID_ARGV", "argv 必须是非空字符串数组")
    if not argv[0]:
        raise _Fail("INVALID_ARGV", "argv[0] 必须是非空字符串")
    if any("\x00" in a for a in argv):
        raise _Fail("INVALID_ARGV", "argv 元素不能包含空字节")
    if len(argv) > MAX_ARGV_COUNT:
        raise _Fail("ARGV_TOO_LARGE", f"argv 参数数量不能超过 {MAX_ARGV_COUNT}")
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in argv) > MAX_ARGV_BYTES:
        raise _Fail("ARGV_TOO_LARGE", f"argv UTF-8 总字节数不能超过 {MAX_ARGV_BYTES}")


def _check_script(text: str) -> None:
    if not text:
        raise _Fail("INVALID_SCRIPT", "script 必须是非空字符串")
    if "\x00" in text:
        raise _Fail("INVALID_SCRIPT", "script 不能包含空字节")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCRIPT_BYTES:
        raise _Fail("SCRIPT_TOO_LARGE", f"script UTF-8 字节数不能超过 {MAX_SCRIPT_BYTES}")


def _check_stdin(stdin: str | None) -> None:
    if stdin is not None and len(stdin.encode("utf-8", "surrogatepass")) > MAX_STDIN_BYTES:
        raise _Fail("STDIN_TOO_LARGE", f"stdin UTF-8 字节数不能超过 {MAX_STDIN_BYTES}")


def _output_file(rt: Engine, content: bytes = b"") -> str:
    """An output file for a call that failed before it had a job (the seed makes one for every
    call its executor sees); named like the job logs, so the log retention removes it."""
    path, fd = rt.data.new_file(rt.data.logs, "j_" + secrets.token_hex(5), "log")
    try:
        if content:
            os.write(fd, content)
    finally:
        os.close(fd)
    return path


# -- handlers --------------------------------------------------------------------------------------


async def _wait_end(rt: Engine, job: Job, limit_s: float | None) -> None:
    """Wait for the job to end (forever when limit_s is None); a cancelled call kills it."""
    try:
        while not job.terminal:
            step = 3600.0 if limit_s is None else min(limit_s, 3600.0)
            if step <= 0:
                return
            t0 = time.monotonic()
            await job.wait_until(lambda: job.terminal, step)
            if limit_s is not None:
                limit_s -= time.monotonic() - t0
    except asyncio.CancelledError:
        if not job.terminal:
            with contextlib.suppress(Exception):
                await asyncio.shield(rt.signal_job(job.job_id, "kill", wait_ms=2000))
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


async def _run(rt: Engine, args: dict[str, Any], ctx: CallContext, tool_mode: str) -> dict:
    _normalize_purpose(args.get("purpose"))
    what: dict[str, Any] = {}
    if tool_mode == "run":
        _check_argv(args["argv"])
        _check_stdin(args.get("stdin"))
    elif tool_mode == "script":
        _check_script(args["script"])
        _check_stdin(args.get("stdin"))
    shell_env = _shell_env(ctx)

    # from here on the seed's executor has made the call's output file
    nbytes = args.get("bytes")
    if nbytes is not None and nbytes < 0:
        raise _Fail("INVALID_BYTES", "bytes 不能小于 0", output_path=_output_file(rt))
    timeout = args.get("timeout")
    if timeout is not None and timeout < 0:
        raise _Fail("INVALID_TIMEOUT", "timeout 不能小于 0", output_path=_output_file(rt))
    budget = MAX_OUTPUT_BYTES if nbytes is None else min(nbytes, MAX_OUTPUT_BYTES)
    run_cwd, shown_cwd = _resolve_cwd(rt, args.get("cwd"))
    if not os.path.isdir(run_cwd):
        raise _Fail("CWD_NOT_FOUND", f"工作目录不存在: {shown_cwd}", output_path=_output_file(rt))
    text: str | None = args.get("command") if tool_mode == "bash" else args.get("script")
    if (text is not None and "\x00" in text) or any("\x00" in v for v in shell_env.values()):
        raise _Fail("EXECUTION_ERROR", "embedded null byte", output_path=_output_file(rt))
    shell = rt.bash or "/bin/sh"
    big = text is not None and len(text.encode("utf-8", "surrogatepass")) >= _MAX_ARG_STRLEN
    if tool_mode == "bash" and big:
        # the seed passes the command as one argument: the kernel refuses one this long
        message = f"无法启动命令: [Errno 7] Argument list too long: {shell!r}"
        raise _Fail("EXECUTION_ERROR", message, output_path=_output_file(rt))
    if tool_mode == "run":
        what["argv"] = args["argv"]
    elif text is not None and not text.strip():
        what["argv"] = [shell, "-c", text]  # blank: runs, and does nothing
    else:
        what["command" if tool_mode == "bash" else "script"] = text
    if tool_mode != "bash":
        what["stdin"] = args.get("stdin")

    # None, 0 and nan wait for the end (the seed's `timeout > 0` test); so does an endless one
    wait_s = timeout if timeout is not None and 0 < timeout < _FOREVER_S else None
    kill = args.get("timeout_behavior") == "kill" and wait_s is not None
    wait_ms = None if wait_s is None else max(1, round(wait_s * 1000))
    started = time.monotonic()
    try:
        snap = await rt.exec_job(
            **what,
            cwd=run_cwd,
            # the seed's bash inherits the server's PWD, which never names the job's directory,
            # so it starts from the physical path: a symlinked cwd prints resolved (`pwd`)
            env=_physical_pwd(run_cwd),
            # background: the job outlives the wait with no deadline, like the seed's
            timeout_ms=wait_ms if kill and wait_ms else 0,
            yield_ms=_MAX_YIELD_MS if wait_ms is None else min(wait_ms, _MAX_YIELD_MS),
            max_output_bytes=0,
            shell_env=shell_env,
            caller_session_id=_caller_session_id(ctx),
        )
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
        output, truncated, size = _job_preview(job, budget)
        return _result(
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
        handles = ctx.profile_state(_Handles)
        handles.prune(lambda jid: _alive(rt, jid))
        handle = handles.add(job.job_id, tool_mode)
    return _job_result(job, tool_mode, budget, timeout, handle, rt.config.max_log_bytes)


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


def _exec_failure(rt: Engine, e: ConchError, budget: int, started: float, program: str) -> _Fail:
    if e.code == "syntax_error":
        # bash's own text (the core keeps its bytes in ``value``)
        raw = (e.value or e.message).encode("utf-8", "surrogateescape")
        kept = raw[:MAX_SYNTAX_OUTPUT_BYTES]
        return _Fail(
            "SCRIPT_SYNTAX_ERROR",
            "脚本语法检查失败，未执行脚本",
            output_path=_output_file(rt, kept),
            output=sanitize(kept[:budget].decode("utf-8", "replace")),
            truncated=len(raw) > MAX_SYNTAX_OUTPUT_BYTES or len(kept) > budget,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
    if e.code == "cwd_not_found":
        message = f"工作目录不存在: {e.message.rsplit(': ', 1)[-1]}"
        return _Fail("CWD_NOT_FOUND", message, output_path=_output_file(rt))
    if e.code == "spawn_failed":
        message = f"无法启动命令: {_os_error(e, program)}"
        return _Fail("EXECUTION_ERROR", message, output_path=_output_file(rt))
    return _Fail("EXECUTION_ERROR", f"无法启动命令: {e.message}", output_path=_output_file(rt))


async def _get(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    pid = args["pid"]
    timeout = args.get("timeout")
    nbytes = args["bytes"]
    if nbytes < 0:
        return _failure(_Fail("INVALID_BYTES", "bytes 不能小于 0", None), None)
    if timeout is not None and timeout < 0:
        return _failure(_Fail("INVALID_TIMEOUT", "timeout 不能小于 0", None), None)
    entry = ctx.profile_state(_Handles).get(pid)
    job = None
    if entry is not None:
        with contextlib.suppress(ConchError):
            job = rt.job(entry[0])
    if entry is None or job is None:
        return _failure(_Fail("NOT_RUNNING", f"目标进程不在运行中: {pid}", None), None)
    if timeout is not None and timeout > 0 and not job.terminal:
        await _wait_end_get(job, timeout)
    budget = min(nbytes, MAX_OUTPUT_BYTES)
    tool_mode = entry[1]
    if job.state == "output_limit":
        _empty_log(job)
    output, truncated, size = _job_preview(job, budget, prefer_tail=True)
    if not job.terminal:
        code, message, exit_code = "RUNNING", f"目标进程仍在运行: {pid}", None
    else:
        exit_code = -1 if job.state in ("output_limit", "timed_out") else _exit_code(job)
        if exit_code == 0 and job.state == "exited":
            code, message = "OK", "命令执行成功"
        else:
            code, message = "COMMAND_ERROR", f"命令执行完成，退出码 {exit_code}"
    return _result(
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


async def _wait_end_get(job: Job, timeout: float) -> None:
    limit = None if timeout >= _FOREVER_S else timeout
    while not job.terminal:
        step = 3600.0 if limit is None else min(limit, 3600.0)
        if step <= 0:
            return
        t0 = time.monotonic()
        await job.wait_until(lambda: job.terminal, step)
        if limit is not None:
            limit -= time.monotonic() - t0


# -- error_result: pydantic's rejections, a closed runtime -----------------------------------------


def _error_result(tool_mode: str | None) -> Callable[[ConchError, Mapping[str, Any]], Any]:
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
        return _result(
            code, success=False, message=message, exit_code=exit_code, tool_mode=tool_mode
        ), True

    return shape


def _text(result: dict[str, Any], is_error: bool) -> str:
    """FastMCP's text block: the result as compact JSON; a rejected call is just the error."""
    if is_error:
        return str(result.get("message", ""))
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def _exec_handler(
    tool_mode: str,
) -> Callable[[Engine, dict[str, Any], CallContext], Awaitable[dict[str, Any]]]:
    async def handler(rt: Engine, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        try:
            return await _run(rt, args, ctx, tool_mode)
        except _Fail as e:
            return _failure(e, tool_mode)

    return handler


# -- tools/list: the entries ai-device-bash 0.2.0 publishes, verbatim ----------------------------


def _nullable(t: str, default: Any) -> dict[str, Any]:
    return {"anyOf": [{"type": t}, {"type": "null"}], "default": default}


_PURPOSE_SCHEMA = {"default": None, "type": "string"}
_BEHAVIOR_SCHEMA = {"default": "background", "enum": ["background", "kill"], "type": "string"}


def _exec_schema(first: str, first_schema: dict[str, Any], *, stdin: bool) -> dict[str, Any]:
    props: dict[str, Any] = {first: first_schema, "purpose": _PURPOSE_SCHEMA}
    if stdin:
        props["stdin"] = _nullable("string", None)
    props.update(
        {
            "cwd": _nullable("string", None),
            "timeout": _nullable("number", 60),
            "bytes": _nullable("integer", None),
            "timeout_behavior": _BEHAVIOR_SCHEMA,
        }
    )
    return {
        "additionalProperties": False,
        "properties": props,
        "required": [first],
        "type": "object",
    }


GET_INPUT: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "pid": {"type": "integer"},
        "timeout": _nullable("number", 0),
        "bytes": {"default": 200, "type": "integer"},
    },
    "required": ["pid"],
    "type": "object",
}

_DESCRIPTIONS = {
    "bash": (
        "Execute a bash command and return the output.\n\n"
        "``purpose`` is an optional short user-facing description of why the command\n"
        "is run. Provide it for most calls; it does not change or authorize the\n"
        "execution. Do not repeat the command or include sensitive payloads.\n\n"
        "Executes on the machine running this server. Long-running commands can\n"
        "continue in the background and be polled with ``get``."
    ),
    "run": (
        "Run a program with structured arguments without shell parsing.\n\n"
        "``purpose`` is an optional short user-facing description of why the program\n"
        "is run. Provide it for most calls; it does not change or authorize the\n"
        "execution. Do not repeat the argv or include sensitive payloads.\n\n"
        "Each item in ``argv`` is passed as one process argument. Shell expansions,\n"
        "pipelines, redirects, and command substitutions are not interpreted. Use\n"
        "``stdin`` for text input. Execution on the machine running this server preserves "
        "argv boundaries."
    ),
    "script": (
        "Execute a Bash script from a managed temporary file.\n\n"
        "``purpose`` is an optional short user-facing description of why the script\n"
        "is run. Provide it for most calls; it does not change or authorize the\n"
        "execution. Do not repeat the script or include sensitive payloads.\n\n"
        "The script is syntax-checked with ``bash -n`` before execution. Use\n"
        "``stdin`` for text input to the executed script. Execution on the machine running "
        "this server\nuses separate script and stdin files."
    ),
    "get": (
        "Get the status and bounded output preview for a tracked background process.\n\n"
        "Use this after an execution tool returns a ``BACKGROUND`` pid to check\n"
        "whether the process is still running and to read its output head and tail. A\n"
        "positive ``timeout`` waits for completion for at most that many seconds.\n"
        "The PID belongs to a task tracked by this server instance."
    ),
}
_FASTMCP_META: dict[str, Any] = {"fastmcp": {"tags": []}}


def _listing(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "description": _DESCRIPTIONS[name]}
    entry["inputSchema"] = schema
    if name != "get":
        entry["annotations"] = {"summary_key": "purpose"}
    entry["_meta"] = _FASTMCP_META
    return entry


def _describer(name: str, schema: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    entry = _listing(name, schema)
    return lambda config: copy.deepcopy(entry)


def _summary(tool_mode: str) -> Callable[[Mapping[str, Any]], str]:
    default = _DEFAULT_SUMMARY[tool_mode]
    return lambda args: _purpose_summary(args.get("purpose"), default)


def _get_summary(args: Mapping[str, Any]) -> str:
    return f"get {args.get('pid')}"


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's tools, in the seed's order."""
    for name in _SIGNATURES:
        _adapter(name)  # fail at startup, not per call, when pydantic is missing
    specs = (
        ("bash", _exec_schema("command", {"type": "string"}, stdin=False)),
        (
            "run",
            _exec_schema("argv", {"items": {"type": "string"}, "type": "array"}, stdin=True),
        ),
        ("script", _exec_schema("script", {"type": "string"}, stdin=True)),
    )
    out = [
        Tool(
            name,
            name,
            _DESCRIPTIONS[name],
            schema,
            {},
            _exec_handler(name),
            destructive=True,
            error_result=_error_result(name),
            summary=_summary(name),
            validator=_validator(name),
            render_text=_text,
            structured=False,
            describer=_describer(name, schema),
        )
        for name, schema in specs
    ]
    out.append(
        Tool(
            "get",
            "get",
            _DESCRIPTIONS["get"],
            GET_INPUT,
            {},
            _get,
            read_only=True,
            error_result=_error_result(None),
            summary=_get_summary,
            validator=_validator("get"),
            render_text=_text,
            structured=False,
            describer=_describer("get", GET_INPUT),
        )
    )
    return tuple(out)


# each tool shapes its own errors (they name the tool's mode) and words its own summary, so those
# stay per tool (Tool.error_result, Tool.summary), as do its text-only results
PROFILE = Profile("ai-device-bash", tools)
