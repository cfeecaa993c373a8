"""Calling a tool: validate, run, shape the result or the error envelope — once, for every
front end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conch.core import Engine, JobLabel, JobView
from conch.errors import ConchError, RuntimeClosedError
from conch.tools.context import ToolContext, check_purpose
from conch.tools.registry import ToolRegistry
from conch.tools.render import render
from conch.tools.tool import Tool
from conch.tools.validate import check_text, encodable, validate
from conch.tools.views import last_line

log = logging.getLogger("conch.tools")
PROGRESS_INTERVAL_S = 1.0


@dataclass
class ToolOutcome:
    result: dict[str, Any]
    is_error: bool
    meta: dict[str, Any] | None = None
    # the full result when `result` is its lean form (the text block is rendered from it)
    full: dict[str, Any] | None = None


async def call_tool_full(
    rt: Engine,
    registry: ToolRegistry,
    name: str,
    arguments: Mapping[str, Any] | None,
    context: ToolContext | None = None,
) -> ToolOutcome:
    """Call tool ``name`` of ``registry`` on the engine: the one call path of every front end
    (MCP, HTTP invoke, CLI, embedded). The tool gets the registry's profile state and what the
    call runs (the dashboard's label) in its context."""
    ctx = (ToolContext() if context is None else context.for_call()).with_state(registry.state)
    tool = registry.get(name)
    if tool is None:
        return ToolOutcome(ConchError("not_found", f"unknown tool {name!r}").envelope(), True)
    args = dict(arguments or {})
    try:
        check_text(args)
        check_text((ctx.meta or {}).get("shell_env"), "_meta.shell_env")
        if (
            tool.wire.validator is None  # a profile with its own validator words this itself
            and "host" in args
            and "host" not in tool.input_schema.get("properties", {})
        ):
            raise ConchError(
                "invalid_argument",
                "`host` is not supported: Conch runs commands on this machine only",
                field="host",
                value="is not a known argument",
            )
        if tool.wire.validator is not None:
            try:
                coerced = tool.wire.validator(args)
            except ConchError as e:
                # the original's SDK rejected the call before the tool ran: no summary
                return _error(e, registry, tool, args, summary=False)
            if coerced is not None:
                args = coerced  # as the original's SDK coerced them (pydantic lax mode)
        else:
            validate(tool.input_schema, args)
        meta = {"summary": tool.wire.summary(args)} if tool.wire.summary else None
        if tool.wire.summary_arg:
            summary = check_purpose(args.get(tool.wire.summary_arg))
            if summary is not None:
                meta = {"summary": summary}
        ctx.label = describe_call(args)
        # (a path Conch reports, a shell's cwd say, may hold bytes that are not UTF-8)
        result = encodable(await _run_with_progress(rt, tool, args, ctx))
        judge = registry.profile_of(tool).result_is_error
        is_error = judge(result) if judge is not None else False
        if tool.wire.lean is not None and rt.config.result_detail == "lean":
            return ToolOutcome(tool.wire.lean(result, rt.default_cwd), is_error, meta, result)
        return ToolOutcome(result, is_error, meta)
    except ConchError as e:
        return _error(e, registry, tool, args)
    except RuntimeClosedError:
        closed = ConchError("closed", "the Conch runtime is shutting down")
        return _error(closed, registry, tool, args)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("tool %s failed", name)
        return _error(
            ConchError("internal", f"internal error in {name}; see the server log"),
            registry,
            tool,
            args,
        )


def describe_call(args: Mapping[str, Any]) -> JobLabel | None:
    """What a call runs (its ``command``, ``argv`` or ``script``) and its ``purpose``, for the
    job it creates; None when it runs nothing. Every profile names these arguments alike."""
    command, argv, script = args.get("command"), args.get("argv"), args.get("script")
    purpose = args.get("purpose")
    label = JobLabel(
        command=command if isinstance(command, str) else None,
        argv=tuple(argv)
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        else None,
        script=script if isinstance(script, str) else None,
        purpose=purpose.strip() or None if isinstance(purpose, str) else None,
    )
    if label.command is None and label.argv is None and label.script is None:
        return None
    return label


def _error(
    e: ConchError,
    registry: ToolRegistry,
    tool: Tool,
    args: Mapping[str, Any],
    *,
    summary: bool = True,
) -> ToolOutcome:
    """A failed call in its profile's words (the tool's own, where it has them)."""
    shape = registry.error_result_of(tool)
    if shape is None:
        return ToolOutcome(encodable(e.envelope()), True)
    result, is_error = shape(e, args)
    result = encodable(result)
    meta = {"summary": tool.wire.summary(args)} if tool.wire.summary and summary else None
    return ToolOutcome(result, is_error, meta)


async def _run_with_progress(
    rt: Engine, tool: Tool, args: dict[str, Any], ctx: ToolContext
) -> dict[str, Any]:
    if ctx.progress is None or not tool.progress:
        return await tool.handler(rt, args, ctx)
    job_hint = args.get("job_id") or args.get("exec_id")
    task = asyncio.ensure_future(tool.handler(rt, args, ctx))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S)
            if done:
                return task.result()
            many = args.get("job_ids")
            if isinstance(many, list) and job_hint is None:
                msg = _progress_of_many(rt, many)
            else:
                job = _progress_job(rt, ctx, job_hint)
                msg = f"{job.job_id} {job.state} · {job.duration_ms} ms" if job else "running"
                if job is not None:
                    last = last_line(job)
                    if last:
                        msg += f" · {last}"
            with contextlib.suppress(Exception):
                await ctx.progress(msg)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _progress_of_many(rt: Engine, job_ids: list[Any]) -> str:
    """A read waiting on several jobs: how many still run, and the latest line of the first
    that printed one."""
    jobs = []
    for job_id in job_ids:
        with contextlib.suppress(ConchError, RuntimeClosedError, TypeError):
            jobs.append(rt.job(job_id))
    running = sum(1 for j in jobs if not j.terminal)
    msg = f"{running} of {len(jobs)} jobs running"
    for job in jobs:
        last = last_line(job)
        if last:
            return f"{msg} · {job.job_id}: {last}"
    return msg


def _progress_job(rt: Engine, ctx: ToolContext, job_id: str | None) -> JobView | None:
    """The job this call waits on: the one it names, else the one it started (the engine
    reports it through ``ctx.job_started``; another call's job is never mistaken for it)."""
    if ctx.started is not None:
        return ctx.started
    if job_id:
        with contextlib.suppress(ConchError, RuntimeClosedError):
            return rt.job(job_id)
    return None


def text_block(registry: ToolRegistry, name: str, outcome: ToolOutcome, fmt: str = "text") -> str:
    """The text block of a call's result, as a model reads it: the tool's (or its profile's)
    own wording where it has one (the seed and dialect profiles), else Conch's rendering."""
    tool = registry.get(name)
    own = (tool.wire.render_text or registry.profile_of(tool).render_text) if tool else None
    if own is not None:
        return own(outcome.result, outcome.is_error)
    return render(name, outcome.result, is_error=outcome.is_error, fmt=fmt, full=outcome.full)
