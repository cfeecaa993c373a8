"""What a model sees over MCP stdio (docs/spec.md §6 "Lean results"): bytes beyond the command's own
output in the structured view (compact JSON of structuredContent, what Claude Code and VS Code
show) and in the text view, for small calls; `--result-detail full` restores every field."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

SMALL = ("echo hi", "ls /nonexistent-lean-view", "exit 2", "seq 1 200", "echo out; echo err >&2")


def client(serve_args: list[str], *extra: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=[*serve_args, *extra], env={**os.environ}
    )
    return Client(params, mode="legacy")


def own_output(cmd: str) -> str:
    out = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return out.stdout.decode()


async def test_small_calls_cost_at_most_80_bytes_structured_and_40_as_text(serve_args):
    async with client(serve_args) as c:
        for cmd in SMALL:
            r = await c.call_tool("exec", {"command": cmd})
            own = own_output(cmd)
            structured = json.dumps(
                r.structured_content, ensure_ascii=False, separators=(",", ":")
            ).encode()
            escaped = len(json.dumps(own, ensure_ascii=False).encode()) - 2
            assert len(structured) - escaped <= 80, r.structured_content
            text = r.content[0].text.encode()
            assert len(text) - len(own.encode()) <= 40, text
        r = await c.call_tool("exec", {"command": "echo hi"})
    s = r.structured_content
    assert s == {"job_id": s["job_id"], "state": "exited", "exit_code": 0, "output": "hi\n"}


async def test_full_detail_restores_every_field_over_stdio(serve_args):
    async with client(serve_args, "--result-detail", "full") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("exec", {"command": "echo hi"})
    props = tools["exec"].output_schema["anyOf"][0]["properties"]
    # (secret_page only where a prompt is offered to a person: --secret-prompt elicit;
    # detached where a host stopped waiting for a job; note where a wait ended early;
    # changes where the job changed files)
    assert set(r.structured_content) == set(props) - {
        "secret_page",
        "detached",
        "note",
        "shell_opened",
        "changes",
    }
    assert r.structured_content["ok"] is True and r.structured_content["pid"] > 0
    # the published schema says what an absent field means
    assert props["truncated"]["default"] is False and props["lingering_pids"]["default"] == []
    assert "default" in tools["exec"].description
