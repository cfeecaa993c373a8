"""The client half of the MCP Tasks extension, built on the SDK's public ``ClientExtension``:
a result claim for ``resultType: "task"`` whose resolver polls ``tasks/get`` until the task
ends and returns its ``CallToolResult``, plus typed ``tasks/*`` requests for tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class CreateTaskResult(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskView(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class TaskResult(types.Request[TaskIdParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class UpdateTaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class TaskNotificationParams(types.NotificationParams):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    result: dict[str, Any] | None = None


class TasksExtension(ClientExtension):
    """Declares the extension; resolves task results by polling (and records what it saw)."""

    identifier = TASKS

    def __init__(self, poll_s: float = 0.2, elicit: Any = None) -> None:
        """``elicit(None, ElicitRequestURLParams) -> ElicitResult`` answers a task's
        ``input_required`` elicitations (like the client's elicitation callback)."""
        self.poll_s = poll_s
        self.elicit = elicit
        self.answered: set[str] = set()
        self.created: list[CreateTaskResult] = []
        self.polls: list[TaskView] = []
        self.notified: list[TaskNotificationParams] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve),)

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return (
            NotificationBinding(
                method="notifications/tasks",
                params_type=TaskNotificationParams,
                handler=self._on_status,
            ),
        )

    async def _on_status(self, params: TaskNotificationParams) -> None:
        self.notified.append(params)

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        while True:
            view = await get_task(ctx.session, created.task_id)
            self.polls.append(view)
            if view.status in TERMINAL:
                break
            if view.status == "input_required" and self.elicit is not None:
                await self._answer(ctx.session, view)
            await anyio.sleep(self.poll_s)
        if view.result is None:
            raise RuntimeError(f"task {view.task_id} ended {view.status} without a result")
        return types.CallToolResult.model_validate(view.result)

    async def _answer(self, session: Any, view: TaskView) -> None:
        for key, request in (view.input_requests or {}).items():
            if key in self.answered:  # the same request shows on every poll until it is met
                continue
            self.answered.add(key)
            assert request["method"] == "elicitation/create"
            params = types.ElicitRequestURLParams.model_validate(request["params"])
            answer = await self.elicit(None, params)
            update = UpdateTaskParams(
                task_id=view.task_id,
                input_responses={key: answer.model_dump(by_alias=True, exclude_none=True)},
            )
            await session.send_request(UpdateTask(params=update), types.EmptyResult)


async def get_task(session: Any, task_id: str) -> TaskView:
    return await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), TaskView)


async def task_result(session: Any, task_id: str) -> types.CallToolResult:
    return await session.send_request(
        TaskResult(params=TaskIdParams(task_id=task_id)), types.CallToolResult
    )


async def cancel_task(session: Any, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), types.EmptyResult)
