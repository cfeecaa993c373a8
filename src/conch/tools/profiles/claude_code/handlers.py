"""``Bash``, ``TaskOutput`` and ``TaskStop`` on the engine.

Bash runs each command the way Claude Code 2.1.197 does (seen in its process list): a fresh
non-interactive, non-login bash running ``eval '<command>' < /dev/null && pwd -P >| <file>``
(here with stderr on stdout's pipe, as the original's single output file merges them),
so the working directory (and only it) carries over, and only from a command that succeeded;
one that ends outside the workspace (Conch's default cwd) is put back there and says so. A
command still running at its timeout moves to the background as a task, unless it starts
with ``sleep`` (then it is stopped: ``Exit code 143``). Every wait ends before a known MCP
host's own timeout (``ctx.host``); a cancel that is the host's timeout leaves the job running,
a person's stops a foreground command."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import time
from typing import Any

import conch.tools.profiles.claude_code.results as R
from conch.config import MAX_WAIT_MS
from conch.core import Engine, ExecRequest, JobView, SignalRequest
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles.claude_code.tasks import Tasks

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
TASK_OUTPUT_TIMEOUT_MS = 30_000
# how much of a log is read at most for a result (its head or tail); the rest stays in the file
_READ_LIMIT = 4 << 20
_FIRST_WORD = re.compile(r"^\s*([^\s;&|()<>]+)")


def _timeout_ms(value: Any) -> int:
    """Bash's timeout: absent or 0 is the default, more than the maximum is the maximum."""
    if value is None or value <= 0:
        return DEFAULT_TIMEOUT_MS
    return int(min(value, MAX_TIMEOUT_MS))


def _text(job: JobView, tail: bool = False) -> tuple[str, int]:
    """(the job's output as text, its size in bytes): its head, or its tail, up to 4 MiB."""
    size = job.log.size()
    start, end = (max(0, size - _READ_LIMIT), size) if tail else (0, min(size, _READ_LIMIT))
    return job.log.read(start, end).decode("utf-8", "replace"), size


def _host_cuts_errors(ctx: ToolContext) -> bool:
    """Claude Code cuts every error text over 10000 characters to its head and tail, an MCP
    tool's too: the profile leaves that to it (else the text would be cut twice)."""
    return ctx.host is not None and ctx.host.name == "Claude Code"


def _exit_code(job: JobView) -> int:
    # a command killed by a signal: the original shows exit code 1 (kill -9 $$)
    return job.exit_code if job.exit_code is not None else 1


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _cwd(rt: Engine, tasks: Tasks) -> str:
    if tasks.cwd is not None and os.path.isdir(tasks.cwd):
        return tasks.cwd
    tasks.cwd = None
    return rt.default_cwd


def _new_cwd(rt: Engine, tasks: Tasks, cwd_file: str) -> str | None:
    """Take the directory a successful command ended in; the note when it was put back."""
    try:
        with open(cwd_file, encoding="utf-8", errors="surrogateescape") as f:
            ended = f.read().strip("\n")
    except OSError:
        return None
    if not ended or not os.path.isdir(ended):
        return None  # nothing written (a sandbox hides Conch's data dir): the cwd stays
    root = os.path.realpath(rt.default_cwd)
    if _inside(os.path.realpath(ended), root):
        tasks.cwd = ended
        return None
    tasks.cwd = None
    return f"Shell cwd was reset to {rt.default_cwd}"


async def _stop(rt: Engine, job: JobView) -> None:
    """TERM the job's tree, KILL after the grace; return once it is gone."""
    if job.terminal:
        return
    wait_ms = min(rt.config.kill_grace_ms + 1000, MAX_WAIT_MS)
    with contextlib.suppress(ConchError):
        await rt.signal(SignalRequest(job.job_id, "terminate", wait_ms=wait_ms))


async def _wait(rt: Engine, ctx: ToolContext, job: JobView, seconds: float, stop: bool) -> None:
    """Wait up to ``seconds`` for the job to end. Cancelled: a foreground job (``stop``) is
    stopped unless the cancel was the host's own timeout."""
    deadline = time.monotonic() + seconds
    try:
        while not job.terminal:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await job.wait_until(lambda: job.terminal, min(left, 3600.0))
    except asyncio.CancelledError:
        if stop and not job.terminal:
            keep = False
            if ctx.host_gave_up is not None:
                with contextlib.suppress(Exception):
                    keep = await ctx.host_gave_up()
            if not keep:
                await asyncio.shield(_stop(rt, job))
        raise


async def _start(
    rt: Engine, ctx: ToolContext, command: str, cwd: str, yield_ms: int, cwd_file: str | None
) -> JobView:
    # one pipe for both streams, as the original's one output file: merged in the order written
    line = f"eval {shlex.quote(command)} < /dev/null 2>&1"
    if cwd_file is not None:
        line += f" && {{ pwd -P >| {shlex.quote(cwd_file)} || true; }} 2>/dev/null"
    req = ExecRequest(
        command=line, cwd=cwd, timeout_ms=0, yield_ms=yield_ms, max_output_bytes=0, digest=False
    )
    snap = await rt.exec(req, ctx.engine_context(warm=True))
    return rt.job(snap["job_id"])


async def bash(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    command: str = args["command"]
    tasks = ctx.profile_state(Tasks)
    cwd = _cwd(rt, tasks)
    description = args.get("description")
    if args.get("run_in_background"):
        job = await _start(rt, ctx, command, cwd, 0, None)
        task = tasks.add(job.job_id, command, description)
        return R.background(task.task_id, job.log.path)
    timeout_ms = _timeout_ms(args.get("timeout"))
    wait_ms = ctx.within_horizon(timeout_ms, rt.config)
    cwd_file = rt.output_file()
    try:
        started = time.monotonic()
        job = await _start(rt, ctx, command, cwd, min(wait_ms, MAX_WAIT_MS), cwd_file)
        left = wait_ms / 1000 - (time.monotonic() - started)
        if not job.terminal and left > 0:
            await _wait(rt, ctx, job, left, stop=True)
        if not job.terminal:
            first = _FIRST_WORD.match(command)
            if wait_ms >= timeout_ms and first is not None and first.group(1) == "sleep":
                await _stop(rt, job)
                cut = not _host_cuts_errors(ctx)
                return R.timed_out(timeout_ms, _text(job)[0], cut=cut)
            # the original moves it to the background; so does a wait the host would outlive
            task = tasks.add(job.job_id, command, description)
            return R.background(task.task_id, job.log.path)
        output, size = _text(job)
        if job.state != "exited" or job.exit_code != 0:
            return R.exit_error(_exit_code(job), output, cut=not _host_cuts_errors(ctx))
        return R.success(output, size, job.log.path, _new_cwd(rt, tasks, cwd_file))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(cwd_file)


def _task_job(rt: Engine, tasks: Tasks, task_id: str) -> JobView | None:
    task = tasks.get(task_id)
    if task is None:
        return None
    try:
        return rt.job(task.job_id)
    except ConchError:  # evicted by retention
        tasks.forget(task_id)
        return None


def _status(job: JobView) -> str:
    if not job.terminal:
        return "running"
    return "completed" if job.state == "exited" and job.exit_code == 0 else "failed"


async def task_output(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    task_id: str = args["task_id"]
    tasks = ctx.profile_state(Tasks)
    job = _task_job(rt, tasks, task_id)
    if job is None:
        return R.no_task(task_id)
    block = args.get("block", True)
    if block and not job.terminal:
        wait_ms = args.get("timeout", TASK_OUTPUT_TIMEOUT_MS)
        wait_ms = ctx.within_horizon(wait_ms, rt.config)
        await _wait(rt, ctx, job, wait_ms / 1000, stop=False)
    if not job.terminal:
        if not block:
            return R.task_status("not_ready", task_id, "running", None, "", job.log.path)
        output = _text(job, tail=True)[0]
        return R.task_status("timeout", task_id, "running", None, output, job.log.path)
    # a finished task's result is handed over once (the original then forgets it)
    tasks.forget(task_id)
    output = _text(job, tail=True)[0]
    return R.task_status("success", task_id, _status(job), _exit_code(job), output, job.log.path)


async def task_stop(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    task_id = args.get("task_id") or args.get("shell_id")
    if not task_id:
        return R.tool_use_error("Missing required parameter: task_id")
    tasks = ctx.profile_state(Tasks)
    task = tasks.get(task_id)
    job = _task_job(rt, tasks, task_id)
    if task is None or job is None:
        return R.no_task(task_id)
    if job.terminal:
        return R.tool_use_error(f"Task {task_id} is not running (status: {_status(job)})")
    await _stop(rt, job)
    tasks.forget(task_id)
    return R.stopped(task_id, task.command)
