"""Baseline for bench_mcp.py: a bare SDK `MCPServer` over stdio with one trivial tool (`noop`)
and one tool that spawns a process per call (`spawn`)."""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bare", log_level="WARNING")


@mcp.tool()
async def noop() -> str:
    return "ok"


@mcp.tool()
async def spawn(argv: list[str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    return out.decode()


if __name__ == "__main__":
    mcp.run("stdio")
