"""The MCP server over stdio, driven by the official SDK client in both protocol eras."""

from __future__ import annotations

import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from frontend_servers import wait_gone
from mcp import Client, MCPError, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ["legacy", "auto"]


def client(serve_args: list[str], mode: str, *extra: str, **kw: Any) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=[*serve_args, *extra], env={**os.environ}
    )
    return Client(params, mode=mode, **kw)


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_is_listed_with_schemas_and_annotations(serve_args, mode):
    async with client(serve_args, mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert {
        "exec",
        "read",
        "write",
        "signal",
        "list",
        "shell_open",
        "search",
        "changes",
    } == set(tools)
    for t in tools.values():
        assert t.input_schema["type"] == "object"
        assert t.input_schema.get("additionalProperties") is False
        assert t.output_schema and t.output_schema["type"] == "object"
        assert t.annotations is not None
    for name in ("read", "list", "search"):
        assert tools[name].annotations.read_only_hint is True
    assert tools["exec"].annotations.read_only_hint is False


@pytest.mark.parametrize("mode", MODES)
async def test_exec_returns_structured_content_and_a_readable_text_block(serve_args, mode):
    async with client(serve_args, mode) as c:
        r = await c.call_tool("exec", {"command": "echo hello; exit 3"})
    assert r.is_error is False
    s = r.structured_content
    # the lean shape (docs/spec.md §6): nothing at its default
    assert s == {"job_id": s["job_id"], "state": "exited", "exit_code": 3, "output": "hello\n"}
    text = r.content[0].text
    assert text.startswith(f"[{s['job_id']} exited 3 · ")
    assert text.endswith("hello\n")


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_are_is_error_with_the_envelope(serve_args, mode):
    async with client(serve_args, mode) as c:
        bad = await c.call_tool("exec", {"command": "true", "bogus": 1})
        missing = await c.call_tool("read", {"job_id": "j_0000000000"})
        host = await c.call_tool("exec", {"command": "true", "host": "example.com"})
    assert bad.is_error is True
    assert bad.structured_content["error"]["code"] == "invalid_argument"
    assert bad.content[0].text.startswith("[error invalid_argument]")
    assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"
    assert host.is_error and host.structured_content["error"]["code"] == "invalid_argument"


@pytest.mark.parametrize("mode", MODES)
async def test_purpose_is_echoed_as_meta_summary(serve_args, mode):
    async with client(serve_args, mode) as c:
        r = await c.call_tool("exec", {"command": "true", "purpose": "  check things  "})
    assert r.meta is not None and r.meta["summary"] == "check things"


@pytest.mark.parametrize("mode", MODES)
async def test_request_meta_shell_env_reaches_the_child_and_stdio_is_trusted(serve_args, mode):
    meta = {"shell_env": {"CONCH_T_SECRET": "s3cret"}, "assistant": {"session_id": "ses-42"}}
    async with client(serve_args, mode) as c:
        r = await c.call_tool(
            "exec", {"command": 'echo "$CONCH_T_SECRET/$AI_ASSISTANT_CALLER_SESSION_ID"'}, meta=meta
        )
    assert r.structured_content["output"] == "s3cret/ses-42\n"


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_carry_the_latest_output_line(serve_args, mode):
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client(serve_args, mode) as c:
        r = await c.call_tool(
            "exec",
            {"command": "echo first; sleep 1.2; echo second; sleep 1.2"},
            progress_callback=on_progress,
        )
    assert r.structured_content["state"] == "exited"
    assert len(seen) >= 2
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)
    assert any(m and m.endswith("first") for _, m in seen)
    assert any(m and m.endswith("second") for _, m in seen)


async def test_a_read_of_several_jobs_reports_progress_of_them_all(serve_args):
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with client(serve_args, MODES[0]) as c:
        a = await c.call_tool("exec", {"command": "sleep 30", "yield_ms": 0})
        b = await c.call_tool(
            "exec", {"command": "echo building; sleep 2.5; echo built", "yield_ms": 0}
        )
        ids = [a.structured_content["job_id"], b.structured_content["job_id"]]
        r = await c.call_tool(
            "read",
            {"job_ids": ids, "until": {"pattern": "built"}, "wait_ms": 20000},
            progress_callback=on_progress,
        )
        await c.call_tool("signal", {"job_id": ids[0], "signal": "kill"})
    assert r.structured_content["job_id"] == ids[1] and "built" in r.structured_content["output"]
    assert any(m == f"2 of 2 jobs running · {ids[1]}: building" for m in seen), seen


@pytest.mark.parametrize("mode", MODES)
async def test_cancelled_exec_kills_the_job_it_started(serve_args, mode, tmp_path: Path):
    """A caller's cancel (a person's Esc) stops the job; a timeout's does not (below)."""
    pidfile = tmp_path / "pid"
    async with client(serve_args, mode) as c:
        with anyio.move_on_after(1.0):
            await c.call_tool("exec", {"command": f"echo $$ > {pidfile}; exec sleep 60"})
        pid = int(pidfile.read_text())
        gone = await anyio.to_thread.run_sync(wait_gone, pid, 5)
        assert gone, "the cancelled exec's process is still alive"
        jobs = (await c.call_tool("list", {})).structured_content["jobs"]
    assert [j["state"] for j in jobs] == ["cancelled"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_exec_the_client_timed_out_keeps_running(serve_args, mode, tmp_path: Path):
    """Issue 20.2: the SDK's own timeout cancels with `timed out after 1.0s`: the host gave up
    waiting, the job runs on and a later read finds it."""
    async with client(serve_args, mode) as c:
        with pytest.raises(MCPError):
            await c.call_tool(
                "exec", {"command": "sleep 2; echo survived"}, read_timeout_seconds=1.0
            )
        jobs = (await c.call_tool("list", {})).structured_content["jobs"]
        assert [j["state"] for j in jobs] == ["running"], jobs
        r = await c.call_tool(
            "read", {"job_id": jobs[0]["job_id"], "wait_ms": 10000, "until": "exit"}
        )
        assert r.structured_content["output"] == "survived\n", r.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_cancelled_read_only_stops_waiting(serve_args, mode):
    async with client(serve_args, mode) as c:
        r = await c.call_tool("exec", {"command": "sleep 60", "yield_ms": 0})
        job_id = r.structured_content["job_id"]
        with pytest.raises(MCPError):
            await c.call_tool(
                "read",
                {"job_id": job_id, "wait_ms": 60000, "until": "exit"},
                read_timeout_seconds=0.5,
            )
        again = await c.call_tool("read", {"job_id": job_id})
        assert again.structured_content["state"] == "running"
        stopped = await c.call_tool("signal", {"job_id": job_id, "signal": "kill"})
        assert stopped.structured_content["state"] == "cancelled"


@pytest.mark.parametrize("mode", MODES)
async def test_instructions_state_shell_cwd_and_limits(serve_args, mode, tmp_path: Path):
    async with client(serve_args, mode, "--default-cwd", str(tmp_path), "--max-running", "7") as c:
        text = c.instructions or ""
    assert "bash" in text or "/bin/sh" in text
    assert str(tmp_path) in text
    assert "7 running jobs" in text


@pytest.mark.parametrize("mode", MODES)
async def test_text_format_json_switch(serve_args, mode):
    async with client(serve_args, mode, "--text-format", "json") as c:
        r = await c.call_tool("exec", {"command": "echo hi"})
    assert json.loads(r.content[0].text) == r.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_resources_overview_and_job_log(serve_args, mode):
    async with client(serve_args, mode) as c:
        r = await c.call_tool(
            "exec", {"command": "printf 'line-%s\\n' $(seq 1 300)", "name": "counter"}
        )
        job_id = r.structured_content["job_id"]
        listed = {res.uri for res in (await c.list_resources()).resources}
        templates = (await c.list_resource_templates()).resource_templates
        overview = (await c.read_resource("conch://jobs")).contents[0]
        logres = (await c.read_resource(f"conch://jobs/{job_id}/log")).contents[0]
        with pytest.raises(MCPError):
            await c.read_resource("conch://jobs/j_nope/log")
    assert {"conch://jobs", f"conch://jobs/{job_id}/log"} <= listed
    assert templates[0].uri_template == "conch://jobs/{job_id}/log"
    assert isinstance(overview, types.TextResourceContents)
    assert overview.mime_type == "text/markdown"
    assert f"`{job_id}` (counter) — exited 0" in overview.text
    assert "line-300" in overview.text and "line-1\n" not in overview.text  # last 500 chars only
    assert isinstance(logres, types.TextResourceContents)
    assert logres.text.startswith("line-1\n") and logres.text.endswith("line-300\n")


async def test_legacy_subscription_gets_debounced_updates(serve_args):
    updates: list[tuple[float, str]] = []

    async def on_message(msg: Any) -> None:
        if isinstance(msg, types.ResourceUpdatedNotification):
            updates.append((time.monotonic(), msg.params.uri))

    async with client(serve_args, "legacy", message_handler=on_message) as c:
        assert c.server_capabilities.resources.subscribe is True
        await c.subscribe_resource("conch://jobs")
        await c.call_tool("exec", {"command": "for i in $(seq 1 40); do echo $i; sleep 0.02; done"})
        with anyio.fail_after(5):
            while not updates:
                await anyio.sleep(0.05)
        await anyio.sleep(0.3)
    uris = {u for _, u in updates}
    assert uris == {"conch://jobs"}  # only what was subscribed
    times = [t for t, _ in updates]
    # 40 output lines in ~1 s, but at most ~10 notifications per second
    assert len(times) <= 15
    # spaced by the server: a loaded client may read two at once, not most of them
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert not gaps or statistics.median(gaps) >= 0.08, gaps


async def test_modern_listen_gets_updates_for_the_job_log(serve_args):
    async with client(serve_args, "auto") as c:
        assert c.protocol_version == "2026-07-28"
        r = await c.call_tool("exec", {"command": "sleep 0.5; echo done", "yield_ms": 0})
        uri = f"conch://jobs/{r.structured_content['job_id']}/log"
        async with c.listen(resource_subscriptions=[uri]) as sub:
            with anyio.fail_after(5):
                event = await sub.__anext__()
        assert event.uri == uri
        text = ""
        with anyio.fail_after(5):
            while "done" not in text:
                text = (await c.read_resource(uri)).contents[0].text
                await anyio.sleep(0.1)


# -- process lifecycle, with a raw JSON-RPC client ---------------------------------------------


def _raw_server(serve_args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, *serve_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _send(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def _recv(proc: subprocess.Popen[bytes], want_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "server closed stdout"
        msg = json.loads(line)  # every stdout line is protocol
        assert msg.get("jsonrpc") == "2.0"
        if msg.get("id") == want_id:
            return msg


def _start_background_job(proc: subprocess.Popen[bytes]) -> int:
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
    )
    _recv(proc, 1)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "exec",
                "arguments": {
                    "command": "echo noise-on-stdout; trap '' TERM; sleep 60",
                    "yield_ms": 300,
                },
            },
        },
    )
    result = _recv(proc, 2)["result"]
    assert result["structuredContent"]["state"] == "running"
    assert "noise-on-stdout" in result["structuredContent"]["output"]
    return int(result["structuredContent"]["pid"])


@pytest.mark.parametrize("how", ["eof", "sigterm", "sigint"])
def test_server_exit_kills_every_job(serve_args, how):
    proc = _raw_server([*serve_args, "--result-detail", "full"])  # results carry the pid
    try:
        pid = _start_background_job(proc)
        assert wait_gone(pid, 0.1) is False
        t0 = time.monotonic()
        if how == "eof":
            assert proc.stdin is not None
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        rc = proc.wait(10)
        assert time.monotonic() - t0 < 5
        assert rc == 0
        assert wait_gone(pid, 1), "a job survived the server"
        assert proc.stdout is not None
        rest = proc.stdout.read()
        assert b"noise-on-stdout" not in rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for s in (proc.stdin, proc.stdout, proc.stderr):
            if s:
                s.close()


async def test_tfbash_profile_adds_its_overview_resource(serve_args):
    uri = "window://io.github.a2c-smcp.tfbash/shell-overview"
    async with client(serve_args, "legacy", "--profile", "conch,tfbash") as c:
        listed = {r.uri for r in (await c.list_resources()).resources}
        text = (await c.read_resource(uri)).contents[0].text
    assert uri in listed
    assert text.startswith("# Shell Overview") and text.endswith("No active Shells.")
