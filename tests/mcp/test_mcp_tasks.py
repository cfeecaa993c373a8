"""MCP Tasks (2026-07-28 extension `io.modelcontextprotocol/tasks`) against `conch serve` over
stdio and Streamable HTTP, with the SDK's own client extension surface (tasks_client.py):
long calls become tasks for clients that declare the extension, and nothing changes for the
others."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from frontend_servers import HttpServer, kill_group, start_http, wait_gone
from mcp import Client, MCPError, StdioServerParameters
from tasks_client import CreateTaskResult, TasksExtension, cancel_task, get_task, task_result

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
TRANSPORTS = ["stdio", "http"]


@pytest.fixture
def http_srv(tmp_path: Path):
    srv = start_http(tmp_path)
    try:
        yield srv
    finally:
        kill_group(srv.proc)


@asynccontextmanager
async def connect(
    transport: str, serve_args: list[str], srv: HttpServer | None, **kw: Any
) -> AsyncIterator[Client]:
    if transport == "stdio":
        target: Any = StdioServerParameters(
            command=sys.executable, args=serve_args, env={**os.environ}
        )
    else:
        assert srv is not None
        target = srv.url + "/mcp"
    async with Client(target, **kw) as c:
        yield c


@pytest.fixture
def server_for(request, tmp_path: Path):
    """(transport) -> HttpServer or None, starting the HTTP service only when asked for."""
    started: list[HttpServer] = []

    def get(transport: str) -> HttpServer | None:
        if transport != "http":
            return None
        srv = start_http(tmp_path)
        started.append(srv)
        return srv

    yield get
    for srv in started:
        kill_group(srv.proc)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_five_second_exec_runs_as_a_task_and_its_result_is_the_final_snapshot(
    transport, serve_args, server_for
):
    ext = TasksExtension(poll_s=0.25)
    async with connect(transport, serve_args, server_for(transport), extensions=[ext]) as c:
        assert c.protocol_version == "2026-07-28"
        assert "io.modelcontextprotocol/tasks" in (c.server_capabilities.extensions or {})
        t0 = time.monotonic()
        r = await c.call_tool(
            "exec", {"command": "echo started-1; sleep 5; echo finished-2", "purpose": "a task"}
        )
        elapsed = time.monotonic() - t0
        assert elapsed >= 4.5
        [created] = ext.created
        assert created.task_id.startswith("j_") and created.status == "working"
        working = [p for p in ext.polls if p.status == "working"]
        assert working and any("started-1" in (p.status_message or "") for p in working)
        assert ext.polls[-1].status == "completed"
        snap = r.structured_content
        assert snap["job_id"] == created.task_id and snap["state"] == "exited"
        assert snap["exit_code"] == 0 and snap["output"] == "started-1\nfinished-2\n"
        assert r.is_error is False and "finished-2" in r.content[0].text
        # tasks/result: the same final snapshot; tasks/get still answers
        again = await task_result(c.session, created.task_id)
        assert again.structured_content["output"] == "started-1\nfinished-2\n"
        assert (await get_task(c.session, created.task_id)).status == "completed"
        # the job is an ordinary job as well
        listed = await c.call_tool("list", {})
        assert created.task_id in {j["job_id"] for j in listed.structured_content["jobs"]}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tasks_cancel_terminates_the_job(transport, serve_args, server_for, monkeypatch):
    monkeypatch.setenv("CONCH_RESULT_DETAIL", "full")  # the snapshot carries the pid
    ext = TasksExtension()
    async with connect(transport, serve_args, server_for(transport), extensions=[ext]) as c:
        created = await c.session.call_tool("exec", {"command": "sleep 60"}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult) and created.status == "working"
        job = (await c.call_tool("read", {"job_id": created.task_id})).structured_content
        await cancel_task(c.session, created.task_id)
        final = await task_result(c.session, created.task_id)
        assert final.structured_content["state"] == "cancelled"
        assert final.structured_content["signal"] == "SIGTERM"
        view = await get_task(c.session, created.task_id)
        assert view.status == "cancelled" and view.result is None
        assert wait_gone(job["pid"], 3)
        with pytest.raises(MCPError) as e:
            await get_task(c.session, "j_0000000000")
        assert e.value.error.code == -32602


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_quick_call_is_answered_with_its_result_not_a_task(
    transport, serve_args, server_for
):
    ext = TasksExtension()
    async with connect(transport, serve_args, server_for(transport), extensions=[ext]) as c:
        r = await c.call_tool("exec", {"command": "echo quick"})
        assert r.structured_content["output"] == "quick\n" and ext.created == []
        bad = await c.call_tool("exec", {"command": "x", "bogus": 1})
        assert bad.is_error and ext.created == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_waiting_read_runs_as_a_task_on_the_same_job_id(transport, serve_args, server_for):
    ext = TasksExtension(poll_s=0.2)
    async with connect(transport, serve_args, server_for(transport), extensions=[ext]) as c:
        first = await c.call_tool("exec", {"command": "sleep 2.5; echo late", "yield_ms": 0})
        job_id = first.structured_content["job_id"]
        r = await c.call_tool("read", {"job_id": job_id, "wait_ms": 20000, "until": "exit"})
        assert [t.task_id for t in ext.created] == [job_id]
        assert (
            r.structured_content["state"] == "exited" and "late" in r.structured_content["output"]
        )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_clients_without_the_extension_keep_the_yield_behaviour(
    transport, serve_args, server_for
):
    srv = server_for(transport)
    for kw in ({"mode": "legacy", "extensions": [TasksExtension()]}, {"mode": "auto"}):
        async with connect(transport, serve_args, srv, **kw) as c:
            r = await c.call_tool("exec", {"command": "sleep 2; echo x", "yield_ms": 300})
            snap = r.structured_content
            assert snap["state"] == "running" and snap["job_id"].startswith("j_")
            with pytest.raises(MCPError) as e:
                await get_task(c.session, snap["job_id"])
            # handshake era: no such method; 2026 era without the extension: -32021
            assert e.value.error.code == (-32601 if kw["mode"] == "legacy" else -32021)
            await c.call_tool("signal", {"job_id": snap["job_id"], "signal": "kill"})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_listening_for_task_ids_brings_a_status_notification_when_the_job_ends(
    transport, serve_args, server_for
):
    import anyio
    import mcp_types as types

    ext = TasksExtension()
    async with connect(transport, serve_args, server_for(transport), extensions=[ext]) as c:
        done = await c.session.call_tool(
            "exec", {"command": "sleep 1.5; echo n-1"}, allow_claimed=True
        )
        stopped = await c.session.call_tool("exec", {"command": "sleep 60"}, allow_claimed=True)
        assert isinstance(done, CreateTaskResult) and isinstance(stopped, CreateTaskResult)
        ids = [done.task_id, stopped.task_id]
        listen = types.SubscriptionsListenRequest(
            params=types.SubscriptionsListenRequestParams(
                notifications=types.SubscriptionFilter(taskIds=ids)  # type: ignore[call-arg]
            )
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(c.session.send_request, listen, types.SubscriptionsListenResult)
            with anyio.fail_after(15):
                while len(ext.notified) < 1:
                    await anyio.sleep(0.05)
                await cancel_task(c.session, stopped.task_id)
                while len(ext.notified) < 2:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        by_id = {n.task_id: n for n in ext.notified}
        assert by_id[done.task_id].status == "completed"
        assert by_id[done.task_id].result["structuredContent"]["output"] == "n-1\n"
        assert by_id[stopped.task_id].status == "cancelled"


async def test_listening_for_tasks_without_declaring_the_extension_is_refused(serve_args):
    import mcp_types as types

    async with connect("stdio", serve_args, None) as c:
        listen = types.SubscriptionsListenRequest(
            params=types.SubscriptionsListenRequestParams(
                notifications=types.SubscriptionFilter(taskIds=["j_x"])  # type: ignore[call-arg]
            )
        )
        with pytest.raises(MCPError) as e:
            await c.session.send_request(listen, types.SubscriptionsListenResult)
        assert e.value.error.code == -32021


async def test_one_task_per_job_a_read_beside_a_live_task_runs_as_usual(serve_args):
    ext = TasksExtension()
    async with connect("stdio", serve_args, None, extensions=[ext]) as c:
        created = await c.session.call_tool(
            "exec", {"command": "sleep 3; echo end-3"}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult)
        r = await c.session.call_tool(
            "read", {"job_id": created.task_id, "wait_ms": 1500}, allow_claimed=True
        )
        assert r.structured_content["state"] == "running"  # a plain result, not a new task
        final = await task_result(c.session, created.task_id)
        assert final.structured_content["output"] == "end-3\n"
        assert (await get_task(c.session, created.task_id)).status == "completed"
