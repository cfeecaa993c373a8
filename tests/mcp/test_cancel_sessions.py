"""Cancellations are matched to their own session: over Streamable HTTP every client numbers
its requests from 0, so a bare request id names a request of every session, and one client's
`notifications/cancelled` (with its reason) must never decide another client's job. Several
real MCP sessions speak raw JSON-RPC to one `conch serve --http`, as in the red-team repro."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

TIMEOUT = "McpError: MCP error -32001: Request timed out"  # Claude Code's own timeout
PERSON = "AbortError: user-cancel"  # Claude Code's Esc / Ctrl-C
RID = 7


class Session:
    """One MCP client over Streamable HTTP: its own session id, requests numbered from 0."""

    def __init__(self, url: str, name: str) -> None:
        self.url = url + "/mcp"
        self.name = name
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self.next_id = 100

    async def post(self, msg: dict[str, Any]) -> tuple[dict[str, str], str]:
        """(response headers, lower-case names; body) of one POST, off the event loop."""
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        req = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")

        def send() -> tuple[dict[str, str], str]:
            with urllib.request.urlopen(req, timeout=60) as r:
                assert r.status in (200, 202), r.status
                return {k.lower(): v for k, v in r.getheaders()}, r.read().decode()

        return await asyncio.to_thread(send)

    async def start(self) -> Session:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": self.name, "version": "1"},
        }
        headers, _ = await self.post({"id": 0, "method": "initialize", "params": hello})
        self.headers["mcp-session-id"] = headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-06-18"
        await self.post({"method": "notifications/initialized"})
        return self

    async def call(self, name: str, arguments: dict[str, Any], rid: int | None = None) -> Any:
        """The tool's result (structuredContent, and the text block as `_text`)."""
        if rid is None:
            self.next_id += 1
            rid = self.next_id
        params = {"name": name, "arguments": arguments}
        for msg in _messages(
            *await self.post({"id": rid, "method": "tools/call", "params": params})
        ):
            if msg.get("id") == rid:
                result = msg.get("result") or {}
                return {**(result.get("structuredContent") or {}), "_text": _text(result)}
        return None

    async def cancel(self, rid: int, reason: str) -> None:
        params = {"requestId": rid, "reason": reason}
        await self.post({"method": "notifications/cancelled", "params": params})


def _messages(headers: dict[str, str], body: str) -> list[dict[str, Any]]:
    if headers.get("content-type", "").startswith("text/event-stream"):
        return [
            json.loads(line[5:])
            for line in body.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    return [json.loads(body)] if body else []


def _text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


async def _victims_job(victim: Session, others: list[Session], own: str, other: str) -> Any:
    """The victim's exec (request RID) is cancelled by its own host with reason ``own``
    while every other session keeps cancelling *its* request RID with ``other`` (the race of
    the repro: a reason recorded between the victim's and its call's reading it); the
    victim's job id."""
    call = asyncio.ensure_future(
        victim.call("exec", {"command": "sleep 20; echo never", "yield_ms": 15000}, rid=RID)
    )
    job_id = None
    for _ in range(100):
        jobs = (await others[0].call("list", {}))["jobs"]
        if jobs:
            job_id = jobs[0]["job_id"]
            break
        await asyncio.sleep(0.05)
    assert job_id is not None, "the victim's exec never started"
    flooding = True

    async def flood(o: Session) -> None:
        while flooding:
            await o.cancel(RID, other)

    floods = [asyncio.ensure_future(flood(o)) for o in others for _ in range(2)]
    await asyncio.sleep(0.3)
    await victim.cancel(RID, own)
    await asyncio.sleep(1.0)  # (a call waits up to 0.5 s for its own reason)
    flooding = False
    await asyncio.gather(*floods)
    call.cancel()
    return job_id


async def test_a_host_timeout_cancel_keeps_the_job_whatever_other_sessions_cancel(http_server):
    url = http_server.url
    victim = await Session(url, "claude-code").start()
    others = [await Session(url, "some-other-client").start() for _ in range(2)]
    job_id = await _victims_job(victim, others, TIMEOUT, PERSON)
    seen = await others[0].call("read", {"job_id": job_id})
    assert seen["state"] == "running", seen  # another client's Esc did not stop it
    assert "detached" not in seen, seen  # nor is another client told of it
    mine = await victim.call("list", {})
    assert job_id in mine["detached"] and "signal" in mine["detached"], mine
    assert mine["_text"].startswith(f"[{job_id} kept running"), mine["_text"]
    assert "detached" not in await victim.call("list", {})  # said once
    stopped = await victim.call("signal", {"job_id": job_id, "signal": "kill"})
    assert stopped["state"] == "cancelled", stopped


async def test_a_persons_cancel_stops_the_job_whatever_other_sessions_cancel(http_server):
    url = http_server.url
    victim = await Session(url, "claude-code").start()
    others = [await Session(url, "some-other-client").start() for _ in range(2)]
    job_id = await _victims_job(victim, others, PERSON, TIMEOUT)
    seen = await victim.call("read", {"job_id": job_id, "wait_ms": 5000, "until": "exit"})
    assert seen["state"] == "cancelled" and "never" not in seen["output"], seen
    assert "detached" not in seen, seen
