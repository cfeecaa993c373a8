"""The README launcher (`bin/conch serve`) as an MCP host starts it: from the user's project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

LAUNCHER = Path(__file__).resolve().parents[2] / "bin" / "conch"


async def test_bin_conch_serve_runs_commands_where_it_was_started(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    params = StdioServerParameters(
        command=str(LAUNCHER),
        args=["serve", "--data-dir", str(tmp_path / "data")],
        env={**os.environ},
        cwd=str(project),
    )
    async with Client(params, mode="legacy") as c:
        r = (await c.call_tool("exec", {"command": "pwd"})).structured_content
        info = (await c.call_tool("info", {})).structured_content
    assert r["output"] == f"{project}\n"
    assert info["default_cwd"] == str(project)
