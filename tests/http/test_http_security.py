"""docs/spec.md §9 attacks on the HTTP service: forged Host/Origin, missing or wrong tokens,
oversized bodies, caller-context projection, non-loopback binds and secrets in logs."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from frontend_servers import HttpServer, kill_group, start_http
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

import conch

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
TOKEN = "tok-Zq8cV1-secret"
CALLER = "caller-Wm3k-secret"
# every route, with a request that would succeed if it were allowed
ROUTES = [
    ("GET", "/", None),
    ("GET", "/health", None),
    ("GET", "/manifest", None),
    ("GET", "/api/jobs", None),
    ("POST", "/invoke", b'{"method": "info", "params": {}}'),
    ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'),
    ("GET", "/sse", None),
    ("POST", "/messages/?session_id=00000000000000000000000000000000", b"{}"),
]


def request(
    srv: HttpServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        hdrs = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        }
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        if resp.getheader("content-type", "").startswith("text/event-stream"):
            return resp.status, b""  # a live stream: the status is what matters
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--caller-context-token", CALLER, token=TOKEN)
    try:
        yield srv
    finally:
        kill_group(srv.proc)


@pytest.fixture
def caller_server(tmp_path: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path, env={"CONCH_CALLER_CONTEXT_TOKEN": CALLER})
    try:
        yield srv
    finally:
        kill_group(srv.proc)


def test_forged_host_is_refused_on_every_route(http_server):
    for method, path, body in ROUTES:
        for host in ("evil.example", "evil.example:7785", "127.0.0.1.evil.example", ""):
            status, _ = request(http_server, method, path, body, {"Host": host})
            assert status == 421, (path, host, status)


def test_foreign_origin_is_refused_on_every_route(http_server):
    origins = (
        "http://evil.example",
        f"http://localhost:{http_server.port + 1}",
        "null",
        f"https://127.0.0.1:{http_server.port}",
    )
    for method, path, body in ROUTES:
        for origin in origins:
            status, _ = request(http_server, method, path, body, {"Origin": origin})
            assert status == 403, (path, origin, status)


def test_loopback_names_and_same_origin_are_accepted(http_server):
    for host in (f"127.0.0.1:{http_server.port}", f"localhost:{http_server.port}", "localhost"):
        assert request(http_server, "GET", "/health", headers={"Host": host})[0] == 200
    origin = f"http://127.0.0.1:{http_server.port}"
    assert request(http_server, "GET", "/api/jobs", headers={"Origin": origin})[0] == 200


def test_token_is_required_on_every_route(token_server):
    wrong = iter(["Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer ", "Bearer x"])
    for i, (method, path, body) in enumerate(ROUTES):
        assert request(token_server, method, path, body)[0] == 401, path
        if i < 5:  # five wrong tries (the throttle's limit), each on another route
            auth = next(wrong)
            status, _ = request(token_server, method, path, body, {"Authorization": auth})
            assert status == 401, (path, auth, status)


def test_right_token_opens_every_route(token_server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for method, path, body in ROUTES[:5]:
        status, _ = request(token_server, method, path, body, auth)
        assert status == 200, path
    status, _ = request(token_server, "GET", "/sse", None, auth)
    assert status == 200


@pytest.mark.anyio
async def test_mcp_clients_work_with_the_token(token_server):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers) as hc:
        transport = streamable_http_client(token_server.url + "/mcp", http_client=hc)
        async with Client(transport, mode="legacy") as c:
            r = await c.call_tool("exec", {"command": "echo ok"})
    assert r.structured_content["output"] == "ok\n"
    async with Client(sse_client(token_server.url + "/sse", headers=headers), mode="legacy") as c:
        r = await c.call_tool("exec", {"command": "echo sse-ok"})
    assert r.structured_content["output"] == "sse-ok\n"


def test_oversized_bodies_get_413_on_every_route(token_server):
    big = b"x" * (4 * 1024 * 1024 + 1)
    for _, path, _ in ROUTES:
        status, _ = request(token_server, "POST", path, big, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 413, path


def test_chunked_oversized_body_gets_413(http_server):
    conn = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=10)
    try:
        chunk = b"x" * (1024 * 1024)
        conn.request(
            "POST",
            "/invoke",
            body=iter([chunk] * 5),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        assert conn.getresponse().status == 413
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may hang up before reading the rest; it refused it either way
    finally:
        conn.close()


def _exec_session(srv: HttpServer, headers: dict[str, str], meta: dict[str, object]) -> str:
    body = json.dumps(
        {
            "method": "exec",
            "params": {"command": 'echo "[$AI_ASSISTANT_CALLER_SESSION_ID]"', "_meta": meta},
        }
    ).encode()
    status, data = request(srv, "POST", "/invoke", body, headers)
    assert status == 200
    return json.loads(data)["output"].strip()


def test_caller_context_projects_only_with_the_right_header(caller_server):
    meta = {"assistant": {"session_id": "ses-77"}}
    right = {"X-AI-Assistant-Caller-Context": CALLER}
    assert _exec_session(caller_server, right, meta) == "[ses-77]"
    assert _exec_session(caller_server, {}, meta) == "[]"
    assert _exec_session(caller_server, {"X-AI-Assistant-Caller-Context": "guess"}, meta) == "[]"
    # shell_env can never set it, trusted or not
    sneaky = {"shell_env": {"AI_ASSISTANT_CALLER_SESSION_ID": "ses-1"}}
    assert _exec_session(caller_server, {}, sneaky) == "[]"
    assert _exec_session(caller_server, right, sneaky) == "[]"
    # a malformed session id is never projected
    assert _exec_session(caller_server, right, {"assistant": {"session_id": "x; rm"}}) == "[]"


@pytest.mark.anyio
async def test_caller_context_over_mcp_http(caller_server):
    meta = {"assistant": {"session_id": "ses-9"}}
    cmd = {"command": 'echo "[$AI_ASSISTANT_CALLER_SESSION_ID]"'}
    hc = httpx2.AsyncClient(headers={"X-AI-Assistant-Caller-Context": CALLER})
    transport = streamable_http_client(caller_server.url + "/mcp", http_client=hc)
    async with hc, Client(transport, mode="legacy") as c:
        trusted = await c.call_tool("exec", cmd, meta=meta)
    async with Client(caller_server.url + "/mcp", mode="auto") as c:
        untrusted = await c.call_tool("exec", cmd, meta=meta)
    assert trusted.structured_content["output"] == "[ses-9]\n"
    assert untrusted.structured_content["output"] == "[]\n"


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "CONCH_AUTH_TOKEN"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "conch",
            "serve",
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 2
    assert "auth_token" in r.stderr


def test_secrets_commands_and_env_values_never_reach_the_log(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--caller-context-token", CALLER, token=TOKEN)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}", "X-AI-Assistant-Caller-Context": CALLER}
        body = json.dumps(
            {
                "method": "exec",
                "params": {
                    "command": "echo cmd-marker-Q1 >&2; exit 4",
                    "env": {"V": "env-marker-Q2"},
                    "_meta": {"shell_env": {"S": "shellenv-marker-Q3"}},
                },
            }
        ).encode()
        assert request(srv, "POST", "/invoke", body, auth)[0] == 200
        bad = json.dumps({"method": "exec", "params": {"command": "x", "bogus": "arg-marker-Q4"}})
        assert request(srv, "POST", "/invoke", bad.encode(), auth)[0] == 200
        assert request(srv, "GET", "/health", None, {"Authorization": "Bearer wrong-Q5"})[0] == 401
        script = json.dumps({"method": "exec", "params": {"script": "if then fi # script-Q6"}})
        assert request(srv, "POST", "/invoke", script.encode(), auth)[0] == 200
    finally:
        kill_group(srv.proc)
    log = srv.stderr()
    for secret in (
        TOKEN,
        CALLER,
        "cmd-marker-Q1",
        "env-marker-Q2",
        "shellenv-marker-Q3",
        "arg-marker-Q4",
        "wrong-Q5",
        "script-Q6",
    ):
        assert secret not in log, secret


def test_hostile_invoke_bodies_get_clear_errors_never_a_500(http_server):
    """Issue 18.10: deep nesting, lone surrogates (valid JSON escapes) and out-of-range
    budgets are refused as invalid_argument, and the server goes on serving."""
    deep = b'{"method": "exec", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    also_deep = b'{"method": "exec", "params": {"env": ' + b'{"a": ' * 70 + b"1" + b"}" * 71 + b"}"
    for body in (deep, also_deep):
        status, raw = request(http_server, "POST", "/invoke", body)
        assert status == 400 and b"nests deeper than 64" in raw, (status, raw[:200])
    cases = [
        {"command": "echo \\ud800"},
        {"command": "cat", "stdin": "a\\udfff"},
        {"command": "true", "env": {"X": "\\udbff\\udc00x\\ud800"}},
        {"argv": ["echo", "\\ud83d"]},
        {"command": "echo hi", "max_output_bytes": 0},
    ]
    for params in cases:
        text = json.dumps(params).replace("\\\\u", "\\u")  # keep the escapes as JSON escapes
        body = b'{"method": "exec", "params": ' + text.encode() + b"}"
        status, raw = request(http_server, "POST", "/invoke", body)
        out = json.loads(raw)
        assert out["error"]["code"] == "invalid_argument", (params, status, out)
    status, raw = request(
        http_server,
        "POST",
        "/invoke",
        b'{"method": "exec", "params": {"command": "echo \\ud83d\\ude00"}}',
    )  # a pair is a character
    assert json.loads(raw)["output"].startswith("\U0001f600")


@pytest.mark.anyio
async def test_a_startup_command_that_ends_the_shell_says_how(tmp_path):
    async with conch.Runtime(conch.Config(data_dir=str(tmp_path / "d"))) as rt:
        r = await rt.call_tool("shell_open", {"startup_command": "echo bye; exit 3"})
        assert r["error"]["code"] == "spawn_failed"
        assert "exit status 3" in r["error"]["message"] and "-1" not in r["error"]["message"]
