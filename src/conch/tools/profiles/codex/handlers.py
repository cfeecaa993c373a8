"""``exec_command`` and ``write_stdin`` on the engine.

``exec_command`` runs ``<shell> -lc <cmd>`` (``-c`` with ``login: false``) as a one-shot job
(``tty``: on a terminal; else pipes, stdout and stderr merged in order, stdin at EOF) with no
deadline, as Codex does, and waits for its exit or ``yield_time_ms``. A command still running
gets a session id; ``write_stdin`` types into it (a terminal only) and returns what it printed
since the last chunk. Each wait ends before the calling host's own timeout (tools/hosts.py),
and a host's cancel of its own timeout leaves the job running (the engine's exec path)."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import time
from typing import Any

from conch.core import Engine, ExecRequest, JobLabel, JobView, WriteRequest
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles.codex.results import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    Chunk,
    CodexError,
    chunk_text,
    text_result,
)
from conch.tools.profiles.codex.sessions import Sessions
from conch.tools.profiles.codex.truncate import decode

# Codex's yields (ms): exec_command's, clamped; a write's; an empty poll's, clamped
EXEC_YIELD_DEFAULT, YIELD_MIN, YIELD_MAX = 10_000, 250, 30_000
WRITE_YIELD_DEFAULT = 250
POLL_MIN, POLL_MAX = 5_000, 300_000
AFTER_WRITE_S = 0.1  # Codex lets the process react to a write before it starts collecting
# what Codex sets for every command it runs (but CODEX_CI: Conch is not Codex)
CODEX_ENV = {
    "NO_COLOR": "1",
    "TERM": "dumb",
    "LANG": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "COLORTERM": "",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
}
STDIN_CLOSED = (
    "stdin is closed for this session; rerun exec_command with tty=true to keep stdin open"
)
# Conch's terminals print \n as \n (core/process/terminal.py); Codex's print \r\n, as a
# terminal does by default: the command's own terminal gets that back before the shell starts
TTY_SHIM = 'stty onlcr 2>/dev/null; exec "$@"'
# the exit status Codex reports for a process a signal ended (it has no signal line): on a
# terminal 1, on pipes 128 + the signal's number (measured: `kill -TERM $$` gives 143)
TTY_SIGNAL_EXIT_CODE = 1


def _count(args: dict[str, Any], name: str, default: int) -> int:
    """A non-negative whole number argument (JSON numbers; Codex reads them as integers)."""
    value = args.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConchError("invalid_argument", f"{name}: expected a non-negative integer", field=name)
    return value


def user_shell() -> str:
    """The user's login shell (Codex's default), else bash, else sh."""
    try:
        shell = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        shell = ""
    if shell and os.path.basename(shell) not in ("nologin", "false") and os.access(shell, os.X_OK):
        return shell
    return shutil.which("bash") or "/bin/sh"


def _exit_code(job: JobView, tty: bool) -> int | None:
    if job.exit_code is not None or job.signal is None:
        return job.exit_code
    if tty:
        return TTY_SIGNAL_EXIT_CODE
    try:
        return 128 + signal.Signals[job.signal].value
    except KeyError:
        return TTY_SIGNAL_EXIT_CODE


def _chunk(
    job: JobView, tty: bool, start: int, started: float, session_id: int | None
) -> tuple[Chunk, int]:
    """What the job printed from ``start`` up to now, and where that ends in its log. Read
    after its state was taken, so a finished job's chunk holds its last byte."""
    end = job.log.size()
    chunk = Chunk(
        decode(job.log.read(start, end)),
        start,
        time.monotonic() - started,
        _exit_code(job, tty) if session_id is None else None,
        session_id,
        job.job_id,
    )
    return chunk, end


async def exec_command(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    started = time.monotonic()
    yield_ms = min(max(_count(args, "yield_time_ms", EXEC_YIELD_DEFAULT), YIELD_MIN), YIELD_MAX)
    max_tokens = _count(args, "max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
    tty = bool(args.get("tty", False))
    shell = args.get("shell") or user_shell()
    flag = "-lc" if args.get("login", True) else "-c"
    cmd: str = args["cmd"]
    ctx.label = JobLabel(command=cmd)
    argv = [shell, flag, cmd]
    if tty:
        argv = ["/bin/sh", "-c", TTY_SHIM, "sh", *argv]
    req = ExecRequest(
        digest=False,  # the seed's own result shape has no digest
        argv=argv,
        pty=tty,
        cwd=args.get("workdir") or None,
        env=CODEX_ENV,
        timeout_ms=0,  # Codex gives a command no deadline: it runs until it ends or is stopped
        yield_ms=ctx.within_horizon(yield_ms, rt.config),
        max_output_bytes=0,  # the chunk is read from the log below
    )
    snap = await rt.exec(req, ctx.engine_context())
    job = rt.job(snap["job_id"])
    session_id = None
    if not job.terminal:
        session_id = ctx.profile_state(Sessions).open(job.job_id, tty, 0)
    chunk, end = _chunk(job, tty, 0, started, session_id)
    if session_id is not None:
        ctx.profile_state(Sessions).advance(session_id, end)
    return text_result(chunk_text(chunk, max_tokens))


async def write_stdin(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    sid = args["session_id"]
    if isinstance(sid, float) and sid.is_integer():
        sid = int(sid)
    if not isinstance(sid, int) or isinstance(sid, bool):
        raise ConchError("invalid_argument", "session_id: expected an integer", field="session_id")
    chars = args.get("chars", "")
    yield_ms = max(_count(args, "yield_time_ms", WRITE_YIELD_DEFAULT), YIELD_MIN)
    max_tokens = _count(args, "max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
    sessions = ctx.profile_state(Sessions)
    session = sessions.get(sid)
    try:
        job = rt.job(session.job_id) if session is not None else None
    except ConchError:  # evicted under the session (it can only have ended)
        job = None
    if session is None or job is None:
        sessions.close(sid)
        raise CodexError(f"write_stdin failed: Unknown process id {sid}")
    if chars:
        if not session.tty:
            raise CodexError(f"write_stdin failed: {STDIN_CLOSED}")
        if not job.terminal:
            try:
                await rt.write(WriteRequest(job.job_id, text=chars, yield_ms=0))
            except ConchError as e:
                if e.code != "not_running":  # it ended as we wrote: report its exit
                    raise
        await asyncio.sleep(AFTER_WRITE_S)
        wait_ms = min(yield_ms, YIELD_MAX)
    else:
        wait_ms = min(max(yield_ms, POLL_MIN), POLL_MAX)
    started = time.monotonic()
    await job.wait_until(lambda: job.terminal, ctx.within_horizon(wait_ms, rt.config) / 1000)
    done = job.terminal
    chunk, end = _chunk(job, session.tty, session.cursor, started, None if done else sid)
    if done:
        sessions.close(sid)
    else:
        sessions.advance(sid, end)
    return text_result(chunk_text(chunk, max_tokens))
