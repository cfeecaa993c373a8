"""MCP Tasks (the 2026-07-28 extension ``io.modelcontextprotocol/tasks``) over Conch jobs.

A client that declares the extension on a request may get ``exec`` (and a ``read`` or
``write`` that waits) back as a task instead of a result: the call runs for up to
``SETTLE_S``; if it has not finished by then, the answer is a ``CreateTaskResult``
(``resultType: "task"``) whose task id is the job id, and the work goes on in the background.

* ``tasks/get``: the task with the job's state and latest output line in ``statusMessage``;
  once finished, ``completed`` with the final result inlined (a ``CallToolResult``: for
  ``exec`` the job's final snapshot, its output read from the start) or ``cancelled``.
* ``tasks/result``: waits for the end and returns that final ``CallToolResult`` (also for a
  cancelled task: the snapshot says how the job ended).
* ``tasks/cancel``: ``signal terminate`` on the job; ``tasks/update``: acknowledged (Conch
  never asks for task input).
* ``notifications/tasks``: sent on ``subscriptions/listen`` streams that asked for the task's
  id (``notifications.taskIds``) when the task finishes (``TaskListenHandler``).

Clients that do not declare the extension, and every handshake-era client, get today's yield
behaviour unchanged: the interceptor passes their calls straight through.

Served through the SDK's public extension surface (``mcp.server.extension``): an
``Extension`` with ``MethodBinding``s and a ``tools/call`` interceptor, installed on the
low-level server by ``install``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_matches, event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from conch.errors import ConchError
from conch.mcp.secrets import url_elicitation_supported
from conch.tools.views import last_line

if TYPE_CHECKING:
    from conch.config import Config
    from conch.core import JobView
    from conch.mcp.secrets import SecretPrompter
    from conch.tools.host import Host

log = logging.getLogger("conch.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
SETTLE_S = 1.0  # a call that finishes within this is answered with its result, no task
POLL_INTERVAL_MS = 1000
WAIT_TOOLS = ("exec", "read", "write")  # the conch profile's tools that wait on a job


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] = Field(default_factory=dict)


class TaskStatusNotification(BaseModel):
    """``notifications/tasks`` (params: the task as ``tasks/get`` shows it)."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The request comes from a 2026-07-28 client that declared the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and TASKS_EXTENSION in caps.extensions)


def _require(ctx: ServerRequestContext[Any, Any]) -> None:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found")
    if not declared(ctx):
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


def _not_found(task_id: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: Task not found ({task_id})")


class TaskHost(Protocol):
    """What the extension needs of the MCP server it serves (``ConchMCP``)."""

    rt: Host
    config: Config
    secrets: SecretPrompter | None

    @property
    def tools(self) -> list[Any]: ...

    @property
    def run_tool(self) -> Callable[..., Awaitable[types.CallToolResult]]:
        """ConchMCP.run_tool(ctx, name, arguments, meta, *, progress=True)."""
        ...

    async def host_gave_up(
        self, ctx: ServerRequestContext[Any, Any], started: float, job: JobView | None
    ) -> bool: ...


@dataclass
class TaskRecord:
    task_id: str
    tool: str
    created_at: datetime = field(default_factory=_now)
    updated_at: datetime = field(default_factory=_now)
    seen_version: int = -1
    work: asyncio.Future[types.CallToolResult] | None = None
    cancel_requested: bool = False
    url_elicitation: bool = False  # the client can be asked for a secret (--secret-prompt)
    input_request: tuple[str, dict[str, Any]] | None = None  # outstanding (key, request)


class ConchTasks(Extension):
    """The tasks extension for one ``ConchMCP``."""

    identifier = TASKS_EXTENSION

    def __init__(self, mcp: TaskHost) -> None:
        self._mcp = mcp
        self._tasks: dict[str, TaskRecord] = {}
        self._watchers: set[Callable[[str], None]] = set()
        self._work: set[asyncio.Future[Any]] = set()

    # -- extension surface -----------------------------------------------------------------------

    def methods(self) -> Sequence[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get, modern),
            MethodBinding("tasks/result", TaskIdParams, self._result, modern),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, modern),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, modern),
        )

    async def intercept_tool_call(
        self,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        args = dict(params.arguments or {})
        if not declared(ctx) or not self._eligible(params.name, args):
            return await call_next(ctx)
        meta = dict(params.meta) if params.meta else None
        if meta:
            meta.pop("progressToken", None)
            meta.pop("progress_token", None)
        record: list[TaskRecord] = []
        received = time.monotonic()
        if params.name == "exec":
            work = asyncio.ensure_future(self._exec_work(ctx, args, meta, record))
        else:
            job_id = self._mcp.rt.view.job(args["job_id"]).job_id
            work = asyncio.ensure_future(self._mcp.run_tool(ctx, params.name, args, meta))
        self._track(work)
        try:
            done, _ = await asyncio.wait({work}, timeout=SETTLE_S)
            while not done and params.name == "exec" and not record:  # exec still spawning
                done, _ = await asyncio.wait({work}, timeout=0.05)
        except BaseException:
            # the caller gave up before a task existed: like a cancelled call (exec: the job
            # stops with it, unless that may be the host's own timeout; read and write only
            # stop waiting)
            work.cancel()
            if record:
                self._forget(record[0])
                decide = self._stop_unless_host_gave_up(ctx, received, record[0].task_id)
                stopping = asyncio.ensure_future(decide)
                self._track(stopping)
                await asyncio.shield(stopping)
            raise
        if done:
            if record:
                self._forget(record[0])  # answered directly: no task was created
            return work.result()
        if params.name != "exec":
            record.append(self._register(job_id, params.name))
            record[0].work = work
        rec = record[0]
        rec.url_elicitation = url_elicitation_supported(ctx)
        work.add_done_callback(lambda _w: self._finished(rec))
        return {"resultType": "task", **self._view(rec, detailed=False)}

    def _eligible(self, name: str, args: Mapping[str, Any]) -> bool:
        if name not in WAIT_TOOLS or not any(t.name == name for t in self._mcp.tools):
            return False
        if name == "exec":  # `yield_ms: 0` asks for the job id at once: that stays as it is
            return args.get("ready") is None and args.get("yield_ms") != 0
        if not isinstance(args.get("job_id"), str):
            return False
        try:
            job = self._mcp.rt.view.job(args["job_id"])
        except ConchError:
            return False  # the tool itself reports not_found
        if job.terminal:
            return False
        live = self._tasks.get(job.job_id)
        if live is not None and live.work is not None and not live.work.done():
            return False  # one task per job at a time: this call runs as it always has
        if name == "read":
            return isinstance(args.get("wait_ms"), int) and args["wait_ms"] > 0
        return args.get("yield_ms", 1000) != 0

    # -- the work of a task --------------------------------------------------------------------

    async def _exec_work(
        self,
        ctx: ServerRequestContext[Any, Any],
        args: dict[str, Any],
        meta: dict[str, Any] | None,
        record: list[TaskRecord],
    ) -> types.CallToolResult:
        first = await self._mcp.run_tool(ctx, "exec", {**args, "yield_ms": 0}, meta)
        snap = first.structured_content or {}
        if first.is_error or "job_id" not in snap:
            return first
        job = self._mcp.rt.view.job(snap["job_id"])
        if not job.terminal:
            rec = self._register(job.job_id, "exec")
            rec.work = asyncio.current_task()
            record.append(rec)
        while not job.terminal:
            await job.wait_change(job.version, 60.0)
        budget = args.get("max_output_bytes", self._mcp.config.default_max_output_bytes)
        final = {"job_id": job.job_id, "cursor": 0, "max_bytes": max(1, budget)}
        return await self._mcp.run_tool(ctx, "read", final, meta, progress=False)

    def _register(self, task_id: str, tool: str) -> TaskRecord:
        for known, rec in list(self._tasks.items()):  # tasks go with their evicted jobs
            if (rec.work is None or rec.work.done()) and self._job(rec) is None:
                del self._tasks[known]
        # a finished task on the same job is replaced
        rec = self._tasks[task_id] = TaskRecord(task_id=task_id, tool=tool)
        return rec

    def _forget(self, rec: TaskRecord) -> None:
        if self._tasks.get(rec.task_id) is rec:
            del self._tasks[rec.task_id]

    def _track(self, work: asyncio.Future[Any]) -> None:
        self._work.add(work)
        work.add_done_callback(self._work.discard)

    def _finished(self, rec: TaskRecord) -> None:
        rec.updated_at = _now()
        if self._tasks.get(rec.task_id) is rec:
            for watcher in list(self._watchers):
                watcher(rec.task_id)

    async def _stop_unless_host_gave_up(
        self, ctx: ServerRequestContext[Any, Any], received: float, task_id: str
    ) -> None:
        job = self._job_of(task_id)
        if not await self._mcp.host_gave_up(ctx, received, job):
            await self._stop(task_id)

    async def _stop(self, task_id: str) -> None:
        with contextlib.suppress(ConchError):
            await self._mcp.rt.signal(task_id, "terminate", wait_ms=0)

    async def aclose(self) -> None:
        for work in list(self._work):
            work.cancel()
        for work in list(self._work):
            with contextlib.suppress(BaseException):
                await work

    # -- views ---------------------------------------------------------------------------------

    def _job(self, rec: TaskRecord) -> JobView | None:
        return self._job_of(rec.task_id)

    def _job_of(self, task_id: str) -> JobView | None:
        try:
            return self._mcp.rt.view.job(task_id)
        except ConchError:
            return None

    def _lookup(self, task_id: str) -> TaskRecord:
        rec = self._tasks.get(task_id)
        if rec is None:
            raise _not_found(task_id)
        if self._job(rec) is None:  # the job was evicted: so is its task
            del self._tasks[task_id]
            raise _not_found(task_id)
        return rec

    def _view(self, rec: TaskRecord, *, detailed: bool = True) -> dict[str, Any]:
        """The task as ``tasks/get`` and ``notifications/tasks`` show it."""
        job = self._job(rec)
        work = rec.work
        if job is not None and job.version != rec.seen_version:
            rec.seen_version = job.version
            rec.updated_at = _now()
        out: dict[str, Any] = {
            "taskId": rec.task_id,
            "status": "working",
            "createdAt": _iso(rec.created_at),
            "lastUpdatedAt": _iso(rec.updated_at),
            "ttlMs": None,  # kept as long as its job (retention_s after the job ends)
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        message = ""
        if job is not None:
            message = f"{job.state} · {job.duration_ms} ms"
            line = last_line(job)
            if line:
                message += f" · {line}"
            if job.input_state()[0]:
                message += " · awaiting input"
        out["statusMessage"] = message
        if not detailed or work is None or not work.done():
            if detailed and rec.input_request is not None and not rec.cancel_requested:
                key, request = rec.input_request
                out["status"] = "input_required"
                out["statusMessage"] = message + " · a secret is asked for"
                out["inputRequests"] = {key: request}
            return out
        if rec.cancel_requested or (
            rec.tool == "exec" and job is not None and job.state == "cancelled"
        ):
            out["status"] = "cancelled"
            return out
        error = work.exception() if not work.cancelled() else None
        if work.cancelled() or error is not None:
            out["status"] = "failed"
            code = error.error.code if isinstance(error, MCPError) else types.INTERNAL_ERROR
            out["error"] = {"code": code, "message": "the task's work did not complete"}
            return out
        out["status"] = "completed"
        out["result"] = work.result().model_dump(by_alias=True, mode="json", exclude_none=True)
        return out

    # -- methods -------------------------------------------------------------------------------

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        _require(ctx)
        rec = self._lookup(params.task_id)
        await self._ask_for_input(rec)
        return self._view(rec)

    async def _ask_for_input(self, rec: TaskRecord) -> None:
        """With ``--secret-prompt elicit``: a task whose job waits for a secret is
        ``input_required`` with the URL elicitation of a one-time page."""
        prompter = self._mcp.secrets
        job = self._job(rec)
        if prompter is None or not rec.url_elicitation or job is None or job.terminal:
            rec.input_request = None
            return
        rec.input_request = await prompter.task_input(job)

    async def _result(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        _require(ctx)
        rec = self._lookup(params.task_id)
        assert rec.work is not None
        await asyncio.wait({rec.work})
        if rec.work.cancelled() or rec.work.exception() is not None:
            raise MCPError(types.INTERNAL_ERROR, "the task's work did not complete")
        return rec.work.result()

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        _require(ctx)
        rec = self._lookup(params.task_id)
        if rec.work is not None and not rec.work.done():
            rec.cancel_requested = True
            await self._stop(rec.task_id)
        return {}

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> HandlerResult:
        _require(ctx)
        rec = self._lookup(params.task_id)
        prompter = self._mcp.secrets
        for key, response in params.input_responses.items():
            action = response.get("action") if isinstance(response, dict) else None
            if prompter is not None and isinstance(action, str):
                prompter.task_answer(key, action)
                if action != "accept" and rec.input_request and rec.input_request[0] == key:
                    rec.input_request = None
        return {}  # a secret itself never comes this way: the page writes it to the terminal

    # -- status notifications --------------------------------------------------------------------

    def watch(self, fn: Callable[[str], None]) -> Callable[[], None]:
        self._watchers.add(fn)
        return lambda: self._watchers.discard(fn)

    def view_if_finished(self, task_id: str) -> dict[str, Any] | None:
        rec = self._tasks.get(task_id)
        if rec is None or rec.work is None or not rec.work.done():
            return None
        return self._view(rec)


class TaskListenHandler:
    """``subscriptions/listen`` with the tasks extension's ``taskIds`` filter.

    A listen request without ``taskIds`` is the SDK's ``ListenHandler``'s, unchanged. One with
    ``taskIds`` (from a client that declared the extension; -32021 otherwise) gets the same
    acknowledgement and resource events plus one ``notifications/tasks`` per listed task when
    it finishes (at once for one already finished)."""

    def __init__(self, sdk: ListenHandler, bus: SubscriptionBus, tasks: ConchTasks) -> None:
        self._sdk = sdk
        self._bus = bus
        self._tasks = tasks
        self._streams: set[Any] = set()

    def close(self) -> None:
        """End every listen stream (the SDK's and these) gracefully."""
        self._sdk.close()
        for stream in list(self._streams):
            stream.close()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        wanted = (params.notifications.model_extra or {}).get("taskIds")
        if not wanted:
            return await self._sdk(ctx, params)
        _require(ctx)
        if not isinstance(wanted, list) or not all(isinstance(t, str) for t in wanted):
            raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of ids")
        task_ids = set(wanted[:1024])
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        requested = params.notifications
        honored = types.SubscriptionFilter(
            tools_list_changed=True if requested.tools_list_changed else None,
            prompts_list_changed=True if requested.prompts_list_changed else None,
            resources_list_changed=True if requested.resources_list_changed else None,
            resource_subscriptions=list(requested.resource_subscriptions)
            if requested.resource_subscriptions
            else None,
            taskIds=sorted(task_ids),  # type: ignore[call-arg]
        )
        honored_uris = frozenset(honored.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[Any](1024)

        def on_event(event: Any) -> None:
            if event_matches(honored, honored_uris, event):
                with contextlib.suppress(anyio.ClosedResourceError, anyio.WouldBlock):
                    send.send_nowait(event)

        def on_task(task_id: str) -> None:
            if task_id in task_ids:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.WouldBlock):
                    send.send_nowait(task_id)

        unsubscribe = self._bus.subscribe(on_event)
        unwatch = self._tasks.watch(on_task)
        self._streams.add(send)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            for task_id in sorted(task_ids):  # already finished: say so at once
                if self._tasks.view_if_finished(task_id) is not None:
                    on_task(task_id)
            sent: set[str] = set()
            async for item in recv:
                if isinstance(item, str):
                    view = self._tasks.view_if_finished(item)
                    if view is None or item in sent:
                        continue
                    sent.add(item)
                    await ctx.session.send_notification(
                        TaskStatusNotification(params={**view, "_meta": meta}),  # type: ignore[arg-type]
                        related_request_id=subscription_id,
                    )
                else:
                    await ctx.session.send_notification(
                        event_to_notification(item, meta), related_request_id=subscription_id
                    )
        finally:
            unsubscribe()
            unwatch()
            self._streams.discard(send)
            send.close()
            recv.close()
        return types.SubscriptionsListenResult(_meta=meta)


def install(server: Server[Any], extension: Extension, call_tool: Any) -> None:
    """Apply an extension to a low-level server through the public extension surface: its
    methods, its capability advertisement, and its ``tools/call`` interceptor."""
    for binding in extension.methods():
        server.add_request_handler(binding.method, binding.params_type, binding.handler)
    server.extensions[extension.identifier] = extension.settings()
    server.add_request_handler(
        "tools/call",
        types.CallToolRequestParams,
        compose_tool_call_handler([extension], call_tool),
    )
