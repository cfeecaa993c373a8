"""docs/spec.md §7: the dialect profiles as plain tool definitions and a dispatcher, for a harness
that calls a model API directly (conch.dialects)."""

from __future__ import annotations

import json
import re

import pytest

import conch
from conch import Config, ConfigError

pytestmark = pytest.mark.anyio


def cfg(tmp_path, **kw) -> Config:
    return Config(data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path), **kw)


async def test_openai_definitions_are_codexs_function_tools(tmp_path):
    async with conch.dialects.openai_tools(cfg(tmp_path)) as d:
        assert [t["name"] for t in d.definitions] == ["exec_command", "write_stdin"]
        for t in d.definitions:
            assert t["type"] == "function" and t["strict"] is False
            assert t["parameters"]["type"] == "object" and t["description"]
        json.dumps(d.definitions)  # plain JSON, ready for the request's `tools`
        item = {
            "type": "function_call",
            "name": "exec_command",
            "call_id": "call_1",
            "arguments": json.dumps({"cmd": "echo hi; exit 3"}),
        }
        out = await d.function_call_output(item)
        assert out["type"] == "function_call_output" and out["call_id"] == "call_1"
        assert re.search(r"Process exited with code 3\n", out["output"]), out
        assert out["output"].endswith("Output:\nhi\n"), out


async def test_anthropic_definitions_are_claude_codes_tools(tmp_path):
    async with conch.dialects.anthropic_tools(cfg(tmp_path)) as d:
        assert [t["name"] for t in d.definitions] == ["Bash", "TaskOutput", "TaskStop"]
        for t in d.definitions:
            assert set(t) == {"name", "description", "input_schema"}
        ok = await d.tool_result(
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "echo hi"}}
        )
        assert ok == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi"}
        bad = await d.tool_result(
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "Bash",
                "input": {"command": "echo oops; exit 3"},
            }
        )
        assert bad["is_error"] is True and bad["content"] == "Exit code 3\noops"


async def test_calls_the_tools_cannot_take_are_error_outputs_not_exceptions(tmp_path):
    async with conch.dialects.openai_tools(cfg(tmp_path)) as d:
        unknown = await d.call("Bash", {"command": "true"})
        assert unknown.is_error and "exec_command" in unknown.text
        broken = await d.call("exec_command", "{not json")
        assert broken.is_error and "parse" in broken.text
        listed = await d.call("exec_command", "[1, 2]")
        assert listed.is_error and "object" in listed.text


async def test_a_runtime_given_must_serve_the_profile_and_stays_open(tmp_path):
    async with conch.Runtime(cfg(tmp_path)) as rt:
        with pytest.raises(ConfigError, match="claude-code"):
            conch.dialects.anthropic_tools(runtime=rt)
    async with conch.Runtime(cfg(tmp_path, profiles=["conch", "claude-code"])) as rt:
        async with conch.dialects.anthropic_tools(runtime=rt) as d:
            r = await d.call("Bash", {"command": "echo shared"})
            assert r == conch.dialects.ToolOutput("shared", False)
        assert not rt.closed  # the dialect did not own it
        assert (await rt.exec(command="echo still"))["output"] == "still\n"
