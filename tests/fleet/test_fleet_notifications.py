"""What a caller watches of a job reaches it from the job's node as it does locally: MCP
progress, resource updates of `conch://jobs/{id}/log` (both protocol eras) and
`notifications/tasks`, through `conch serve --fleet ray` over stdio on the 3-node cluster."""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from fleet_cluster import LocalCluster
from mcp import Client, StdioServerParameters
from tasks_client import CreateTaskResult, TasksExtension, cancel_task

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
FLEET_ID = re.compile(r"^j_[0-9a-f]{10}\.[0-9a-f]{8,}$")


def fleet_client(cluster: LocalCluster, tmp_path: Any, mode: str = "auto", **kw: Any) -> Client:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "conch", "serve", "--fleet", "ray", "--ray-address", cluster.address),
            *("--data-dir", str(tmp_path / "data")),
        ],
        env=env,
    )
    return Client(params, mode=mode, **kw)


async def node_of(c: Client, key: str, value: str) -> dict[str, Any]:
    info = (await c.call_tool("info", {})).structured_content
    (node,) = [n for n in info["nodes"] if n["labels"].get(key) == value]
    return node


async def test_progress_of_a_job_on_a_node_reaches_the_caller(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with fleet_client(cluster, tmp_path) as c:
        node = await node_of(c, "zone", "a")
        r = await c.call_tool(
            "exec",
            {"command": "echo first; sleep 1.2; echo second; sleep 1.2", "node": "zone=a"},
            progress_callback=on_progress,
        )
    s = r.structured_content
    assert s["state"] == "exited" and s["node"] == node["node"]
    assert len(seen) >= 2
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)
    assert any(m and m.endswith("first") for _, m in seen)
    assert any(m and m.endswith("second") for _, m in seen)
    # the messages name the job as the caller knows it: its fleet id
    assert all(m and m.startswith(s["job_id"] + " running") for _, m in seen), seen


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_log_subscription_gets_updates_from_the_jobs_node(
    cluster: LocalCluster, tmp_path: Any, mode: str
) -> None:
    updates: list[str] = []

    async def on_message(msg: Any) -> None:
        if isinstance(msg, types.ResourceUpdatedNotification):
            updates.append(str(msg.params.uri))

    async with fleet_client(cluster, tmp_path, mode, message_handler=on_message) as c:
        r = await c.call_tool(
            "exec", {"command": "sleep 0.5; echo done", "yield_ms": 0, "node": "zone=b"}
        )
        job_id = r.structured_content["job_id"]
        assert FLEET_ID.match(job_id)
        uri = f"conch://jobs/{job_id}/log"
        if mode == "legacy":
            await c.subscribe_resource(uri)
            with anyio.fail_after(10):
                while uri not in updates:
                    await anyio.sleep(0.02)
        else:
            async with c.listen(resource_subscriptions=[uri]) as sub:
                with anyio.fail_after(10):
                    event = await sub.__anext__()
            assert event.uri == uri
        text = ""
        with anyio.fail_after(10):
            while "done" not in text:
                text = (await c.read_resource(uri)).contents[0].text
                await anyio.sleep(0.05)
    assert set(updates) <= {uri}  # only what was subscribed


async def test_a_task_on_a_node_notifies_its_end(cluster: LocalCluster, tmp_path: Any) -> None:
    ext = TasksExtension()
    async with fleet_client(cluster, tmp_path, extensions=[ext]) as c:
        node = await node_of(c, "zone", "b")
        done = await c.session.call_tool(
            "exec", {"command": "sleep 1.5; echo n-1", "node": "zone=b"}, allow_claimed=True
        )
        stopped = await c.session.call_tool(
            "exec", {"command": "sleep 60", "node": "role=head"}, allow_claimed=True
        )
        assert isinstance(done, CreateTaskResult) and isinstance(stopped, CreateTaskResult)
        assert done.task_id.endswith("." + node["tag"])  # the task is the job, by its fleet id
        ids = [done.task_id, stopped.task_id]
        listen = types.SubscriptionsListenRequest(
            params=types.SubscriptionsListenRequestParams(
                notifications=types.SubscriptionFilter(taskIds=ids)  # type: ignore[call-arg]
            )
        )
        t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(c.session.send_request, listen, types.SubscriptionsListenResult)
            with anyio.fail_after(20):
                while len(ext.notified) < 1:
                    await anyio.sleep(0.02)
                await cancel_task(c.session, stopped.task_id)
                while len(ext.notified) < 2:
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        by_id = {n.task_id: n for n in ext.notified}
        assert by_id[done.task_id].status == "completed"
        result = by_id[done.task_id].result
        assert result is not None
        assert result["structuredContent"]["output"] == "n-1\n"
        assert result["structuredContent"]["node"] == node["node"]
        assert by_id[stopped.task_id].status == "cancelled"
        assert time.monotonic() - t0 < 15
