"""A 2026-era Streamable HTTP `tools/call` against the app in process (no socket): the SDK
checks the call's Mcp-Param headers against the tool's input schema, which Conch hands it
directly; without that the SDK ran (and serialized) the whole `tools/list` for every call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conch import Config
from conch.http.app import ConchHTTP
from conch.mcp.server import ConchMCP

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def test_a_tools_call_does_not_list_the_tools_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[int] = []
    list_tools = ConchMCP.list_tools

    async def counted(self: ConchMCP, ctx: Any, params: Any) -> Any:
        listed.append(1)
        return await list_tools(self, ctx, params)

    monkeypatch.setattr(ConchMCP, "list_tools", counted)
    web = ConchHTTP(Config(data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path)))
    transport = httpx2.ASGITransport(app=web.app())
    async with (
        web.lifespan(None),  # type: ignore[arg-type]
        httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
        Client(
            streamable_http_client("http://127.0.0.1/mcp", http_client=http), mode="2026-07-28"
        ) as c,
    ):
        await c.list_tools()
        assert listed == [1]
        for i in range(3):
            r = await c.call_tool("exec", {"command": f"echo {i}"})
            assert r.structured_content is not None
            assert r.structured_content["output"] == f"{i}\n"
        assert listed == [1]  # the caller's own listing only
