"""The HTTP service over real sockets: Streamable HTTP and SSE MCP, /invoke, /health,
/manifest and the dashboard, against a `conch serve --http` subprocess."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from frontend_servers import HttpServer, wait_gone
from mcp import Client
from mcp.client.sse import sse_client

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ["legacy", "auto"]


def request(
    srv: HttpServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def invoke(
    srv: HttpServer, method: str, params: Any, headers: dict[str, str] | None = None, **extra: Any
) -> tuple[int, dict[str, str], Any]:
    body = json.dumps({"method": method, "params": params, **extra}).encode()
    status, hdrs, data = request(
        srv, "POST", "/invoke", body, {"Content-Type": "application/json", **(headers or {})}
    )
    return status, hdrs, json.loads(data)


@pytest.mark.parametrize("mode", MODES)
async def test_streamable_http_mcp_lists_tools_and_runs_exec(http_server, mode):
    async with Client(http_server.url + "/mcp", mode=mode) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        r = await c.call_tool("exec", {"command": "echo over-http"})
        err = await c.call_tool("exec", {})
    assert "exec" in tools and "search" in tools
    assert r.is_error is False and r.structured_content["output"] == "over-http\n"
    assert err.is_error is True and err.structured_content["error"]["code"] == "invalid_argument"


@pytest.mark.parametrize("mode", MODES)
async def test_http_progress_and_cancellation(http_server, mode, tmp_path: Path):
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    pidfile = tmp_path / "pid"
    async with Client(http_server.url + "/mcp", mode=mode) as c:
        await c.call_tool(
            "exec", {"command": "echo tick; sleep 1.5"}, progress_callback=on_progress
        )
        assert any(m and m.endswith("tick") for m in seen)
        with anyio.move_on_after(1.0):  # a caller's cancel (not a timeout's): the job goes
            await c.call_tool("exec", {"command": f"echo $$ > {pidfile}; exec sleep 60"})
        pid = int(pidfile.read_text())
        assert await anyio.to_thread.run_sync(wait_gone, pid, 5)


async def test_http_legacy_subscription_and_modern_listen(http_server):
    updates: list[str] = []

    async def on_message(msg: Any) -> None:
        if isinstance(msg, types.ResourceUpdatedNotification):
            updates.append(msg.params.uri)

    async with Client(http_server.url + "/mcp", mode="legacy", message_handler=on_message) as c:
        await c.subscribe_resource("conch://jobs")
        await c.call_tool("exec", {"command": "echo a"})
        with anyio.fail_after(5):
            while not updates:
                await anyio.sleep(0.05)
    assert updates[0] == "conch://jobs"

    async with Client(http_server.url + "/mcp", mode="auto") as c:
        async with c.listen(resource_subscriptions=["conch://jobs"]) as sub:
            await c.call_tool("exec", {"command": "echo b"})
            with anyio.fail_after(5):
                event = await sub.__anext__()
        assert event.uri == "conch://jobs"


async def test_legacy_sse_transport(http_server):
    async with Client(sse_client(http_server.url + "/sse"), mode="legacy") as c:
        r = await c.call_tool("exec", {"command": "echo via-sse"})
        text = (await c.read_resource("conch://jobs")).contents[0].text
    assert r.structured_content["output"] == "via-sse\n"
    assert r.structured_content["job_id"] in text


def test_invoke_returns_the_structured_result_and_jobs_persist(http_server):
    status, hdrs, result = invoke(
        http_server, "exec", {"command": "sleep 0.3; echo later", "yield_ms": 0}
    )
    assert status == 200 and hdrs["x-conch-is-error"] == "false"
    assert result["state"] == "running"
    status, _, done = invoke(
        http_server, "read", {"job_id": result["job_id"], "wait_ms": 5000, "until": "exit"}
    )
    assert done["state"] == "exited" and "later" in done["output"]
    _, _, listed = invoke(http_server, "list", {})
    assert [j["job_id"] for j in listed["jobs"]] == [result["job_id"]]


def test_invoke_errors_are_http_200_with_the_envelope(http_server):
    for method, params in [("nope", {}), ("exec", {"bogus": True}), ("exec", None)]:
        status, hdrs, result = invoke(http_server, method, params)
        assert status == 200
        assert hdrs["x-conch-is-error"] == "true"
        assert set(result) == {"error"}
        assert result["error"]["code"] in ("not_found", "invalid_argument")


def test_invoke_rejects_bad_bodies_with_400(http_server):
    for body in (b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe"):
        status, _, _ = request(
            http_server, "POST", "/invoke", body, {"Content-Type": "application/json"}
        )
        assert status == 400


def test_health_and_manifest(http_server):
    status, _, body = request(http_server, "GET", "/health")
    health = json.loads(body)
    assert status == 200
    assert health["status"] == "ok" and health["service"] == "conch"
    assert {"version", "active_jobs", "retained_jobs"} <= set(health)
    status, _, body = request(http_server, "GET", "/manifest")
    manifest = json.loads(body)
    assert manifest["execution"] == "http" and manifest["service_id"] == "conch"
    methods = {m["name"]: m for m in manifest["methods"]}
    assert methods["exec"]["input_schema"]["type"] == "object"
    assert methods["read"]["output_schema"]["type"] == "object"


def test_dashboard_lists_jobs_and_streams_their_logs(http_server):
    status, hdrs, page = request(http_server, "GET", "/")
    assert status == 200 and b"<title>Conch</title>" in page
    assert "script-src 'nonce-" in hdrs["content-security-policy"]
    _, _, job = invoke(
        http_server, "exec", {"command": "echo one; sleep 0.5; echo two", "yield_ms": 0}
    )
    _, _, body = request(http_server, "GET", "/api/jobs")
    jobs = json.loads(body)["jobs"]
    assert jobs[0]["job_id"] == job["job_id"]
    text, cursor = "", None
    for _ in range(100):
        q = "" if cursor is None else f"?cursor={cursor}"
        _, _, body = request(http_server, "GET", f"/api/jobs/{job['job_id']}/log{q}")
        chunk = json.loads(body)
        text += chunk["text"]
        cursor = chunk["next_cursor"]
        if chunk["state"] != "running" and not chunk["more"]:
            break
        time.sleep(0.05)
    assert text == "one\ntwo\n"
    status, _, _ = request(http_server, "GET", "/api/jobs/j_nope/log")
    assert status == 404


def test_sigterm_stops_the_service_and_every_job(tmp_path: Path):
    import os
    import signal

    from frontend_servers import kill_group, start_http

    srv = start_http(tmp_path, "--result-detail", "full")  # results carry the pid
    try:
        _, _, job = invoke(srv, "exec", {"command": "trap '' TERM; sleep 60", "yield_ms": 100})
        assert job["state"] == "running"
        sse = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        sse.request("GET", "/sse")  # an open stream must not hold the shutdown up
        assert sse.getresponse().status == 200
        t0 = time.monotonic()
        os.kill(srv.proc.pid, signal.SIGTERM)
        # uvicorn re-raises the signal after its clean shutdown
        assert srv.proc.wait(10) == 0  # a clean stop, not death by the signal
        assert time.monotonic() - t0 < 6
        assert wait_gone(job["pid"], 2), "a job survived the HTTP service"
        sse.close()
    finally:
        kill_group(srv.proc)
