"""`changes` and undo through real MCP clients: the official SDK over stdio and over
Streamable HTTP, against `conch serve` subprocesses whose jobs change real files."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from frontend_servers import kill_group, start_http
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@contextlib.asynccontextmanager
async def served(transport: str, tmp_path: Path, ws: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        args = ["-m", "conch", "serve", "--data-dir", str(tmp_path / "data")]
        params = StdioServerParameters(
            command=sys.executable, args=[*args, "--default-cwd", str(ws)], env={**os.environ}
        )
        async with Client(params, mode="legacy") as c:
            yield c
        return
    srv = start_http(tmp_path, "--default-cwd", str(ws))
    try:
        async with Client(streamable_http_client(srv.url + "/mcp"), mode="legacy") as c:
            yield c
    finally:
        kill_group(srv.proc)


def structured(r: Any) -> dict[str, Any]:
    assert r.structured_content is not None, r
    out: dict[str, Any] = r.structured_content
    return out


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_changes_undo_and_a_conflict_over_mcp(transport: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("first\n")
    async with served(transport, tmp_path, ws) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "changes" in names and "info" not in names and len(names) <= 8, names
        ran = structured(await c.call_tool("exec", {"command": "echo second >> notes.txt"}))
        assert ran["changes"] == {"modified": 1}, ran  # (counts at 0 left out)

        r = await c.call_tool("changes", {"job_id": ran["job_id"]})
        got = structured(r)
        assert r.is_error is False and got["modified"] == 1, got
        assert got["files"][0]["path"] == "notes.txt" and "+second" in got["diff"]
        text = r.content[0].text  # type: ignore[union-attr]
        assert text.splitlines()[1] == "M notes.txt", text

        (ws / "notes.txt").write_text("a person's edit\n")
        r = await c.call_tool("changes", {"job_id": ran["job_id"], "undo": True})
        assert r.is_error is True and structured(r)["error"]["code"] == "conflict"
        assert "notes.txt" in r.content[0].text  # type: ignore[union-attr]
        assert (ws / "notes.txt").read_text() == "a person's edit\n"

        r = await c.call_tool(
            "changes", {"job_id": ran["job_id"], "undo": True, "force": ["notes.txt"]}
        )
        assert r.is_error is False, r
        assert (ws / "notes.txt").read_text() == "first\n"

        r = await c.call_tool("changes", {"job_id": ran["job_id"], "undo": "yes"})
        assert r.is_error is True and structured(r)["error"]["code"] == "invalid_argument"
        r = await c.call_tool("list", {"info": True})
        assert structured(r)["info"]["changes"]["state"] == "on", structured(r)
