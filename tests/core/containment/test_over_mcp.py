"""The containment arguments and settings through a real `conch serve` over stdio (SDK client).

Level exercised: ``cgroup`` (this host) with the bwrap sandbox.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def client(tmp_path: Path, *flags: str) -> Client:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    args = ["-m", "conch", "serve", "--data-dir", str(tmp_path / "data")]
    args += ["--default-cwd", str(ws), *flags]
    return Client(StdioServerParameters(command=sys.executable, args=args, env={**os.environ}))


@pytest.mark.needs("bwrap")
async def test_a_sandboxed_server_refuses_loosening_and_reports_limit_over_mcp(tmp_path):
    async with client(tmp_path, "--sandbox", "workspace-write", "--network", "off") as c:
        info = (await c.call_tool("info", {})).structured_content
        assert info["containment"] == "cgroup" and info["sandbox"]["mode"] == "workspace-write"
        r = await c.call_tool("exec", {"command": "touch /etc/conch-x; touch ok"})
        assert "Read-only file system" in r.structured_content["output"]
        loose = await c.call_tool("exec", {"command": "true", "sandbox": "off"})
        assert loose.is_error and loose.structured_content["error"]["code"] == "invalid_argument"
        loose = await c.call_tool("exec", {"command": "true", "network": "on"})
        assert loose.is_error and loose.structured_content["error"]["code"] == "invalid_argument"
        hog = "python3 -c 'x = bytearray(300 << 20); x[::4096] = b\"1\" * len(x[::4096])'"
        r = await c.call_tool("exec", {"command": hog, "memory_max": 48 << 20})
        assert r.structured_content["state"] == "limit"
        assert r.structured_content["limit"] == "memory_max"
    assert (tmp_path / "ws" / "ok").exists()


async def test_a_missing_bwrap_is_sandbox_unavailable_over_mcp(tmp_path):
    flags = ("--bwrap", str(tmp_path / "no-bwrap"), "--sandbox-backend", "bwrap")
    async with client(tmp_path, *flags) as c:
        r = await c.call_tool("exec", {"command": "touch ran", "sandbox": "read-only"})
        assert r.is_error
        assert r.structured_content["error"]["code"] == "sandbox_unavailable"
    assert not (tmp_path / "ws" / "ran").exists()


async def test_the_server_instructions_state_the_sandbox(tmp_path):
    flags = ("--sandbox", "read-only", "--network", "off", "--pids-max", "64")
    async with client(tmp_path, *flags) as c:
        text = c.instructions or ""
    assert "read-only to jobs except a temp dir of their own" in text
    assert "no network" in text and "at most 64 processes" in text
