"""Calling a tool: validate, run, shape the result or the error envelope — once, for every
front end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conch.errors import ConchError, RuntimeClosedError
from conch.tools.catalogue import Tool, catalogue
from conch.tools.context import CallContext, check_purpose
from conch.tools.schema import validate

if TYPE_CHECKING:
    from conch.core.runtime import Runtime

log = logging.getLogger("conch.tools")
PROGRESS_INTERVAL_S = 1.0


@dataclass
class ToolOutcome:
    result: dict[str, Any]
    is_error: bool
    meta: dict[str, Any] | None = None


def find_tool(rt: Runtime, name: str) -> Tool | None:
    for t in catalogue(rt.config.profiles):
        if t.name == name:
            return t
    return None


async def call_tool_full(
    rt: Runtime, name: str, arguments: Mapping[str, Any] | None, context: CallContext | None = None
) -> ToolOutcome:
    ctx = context or CallContext()
    tool = find_tool(rt, name)
    if tool is None:
        return _error(ConchError("not_found", f"unknown tool {name!r}"))
    args = dict(arguments or {})
    try:
        if tool.validator is not None:  # a profile with its own validator words `host` itself
            try:
                coerced = tool.validator(args)
            except ConchError as e:
                # the original's SDK rejected the call before the tool ran: no summary
                return _shape(e, tool, args, None)
            if coerced is not None:
                args = coerced
        else:
            if "host" in args and "host" not in tool.input_schema.get("properties", {}):
                raise ConchError(
                    "invalid_argument",
                    "`host` is not supported: Conch runs commands on this machine only",
                )
            validate(tool.input_schema, args)
        meta = {"summary": tool.summary(args)} if tool.summary else None
        if tool.summary_arg:
            summary = check_purpose(args.get(tool.summary_arg))
            if summary is not None:
                meta = {"summary": summary}
        result = await _run_with_progress(rt, tool, args, ctx)
        is_error = tool.result_is_error(result) if tool.result_is_error else False
        return ToolOutcome(result, is_error, meta)
    except ConchError as e:
        return _error(e, tool, args)
    except RuntimeClosedError:
        return _error(ConchError("closed", "the Conch runtime is shutting down"), tool, args)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("tool %s failed", name)
        return _error(
            ConchError("internal", f"internal error in {name}; see the server log"), tool, args
        )


async def call_tool(
    rt: Runtime, name: str, arguments: Mapping[str, Any] | None, context: CallContext | None = None
) -> dict[str, Any]:
    return (await call_tool_full(rt, name, arguments, context)).result


def _error(
    e: ConchError, tool: Tool | None = None, args: Mapping[str, Any] | None = None
) -> ToolOutcome:
    if tool is not None and tool.error_result is not None:
        meta = {"summary": tool.summary(args or {})} if tool.summary else None
        return _shape(e, tool, args or {}, meta)
    return ToolOutcome(e.envelope(), True)


def _shape(
    e: ConchError, tool: Tool, args: Mapping[str, Any], meta: dict[str, Any] | None
) -> ToolOutcome:
    if tool.error_result is None:
        return ToolOutcome(e.envelope(), True)
    result, is_error = tool.error_result(e, args)
    return ToolOutcome(result, is_error, meta)


async def _run_with_progress(
    rt: Runtime, tool: Tool, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    if ctx.progress is None or not tool.progress:
        return await tool.handler(rt, args, ctx)
    job_hint = args.get("job_id") or args.get("exec_id")
    before = {j.job_id for j in rt.jobs}
    task = asyncio.ensure_future(tool.handler(rt, args, ctx))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S)
            if done:
                return task.result()
            job = _find_job(rt, job_hint, before)
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


def _find_job(rt: Runtime, job_id: str | None, before: set[str]) -> Any:
    if job_id:
        with contextlib.suppress(ConchError):
            return rt.jobs.get(job_id)
        return None
    fresh = [j for j in rt.jobs if j.job_id not in before]
    return fresh[-1] if fresh else None


def last_line(job: Any, limit: int = 200) -> str:
    from conch.core.output.normalize import normalize

    size = job.log.size()
    text = normalize(job.log.read(max(0, size - 4096), size))
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:limit]
    return ""
