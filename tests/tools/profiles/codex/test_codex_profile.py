"""Profile ``codex`` (docs/spec.md §7, dialect profiles): Codex's ``exec_command`` / ``write_stdin``
on real processes through the runtime, and over a real MCP stdio session."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Server, open_session, shared_env

import conch
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import ToolContext
from conch.tools.hosts import HostFacts
from conch.tools.profiles.codex import openai_tools

pytestmark = pytest.mark.anyio

# the schemas Codex CLI 0.171.0 sends the model (reference/hosts.md), descriptions aside
CODEX_PROPERTIES = {
    "exec_command": {
        "cmd": {"type": "string"},
        "justification": {"type": "string"},
        "login": {"type": "boolean"},
        "max_output_tokens": {"type": "number"},
        "prefix_rule": {"type": "array", "items": {"type": "string"}},
        "sandbox_permissions": {"type": "string", "enum": ["use_default", "require_escalated"]},
        "shell": {"type": "string"},
        "tty": {"type": "boolean"},
        "workdir": {"type": "string"},
        "yield_time_ms": {"type": "number"},
    },
    "write_stdin": {
        "chars": {"type": "string"},
        "max_output_tokens": {"type": "number"},
        "session_id": {"type": "number"},
        "yield_time_ms": {"type": "number"},
    },
}
CODEX_REQUIRED = {"exec_command": ["cmd"], "write_stdin": ["session_id"]}
HEADER = re.compile(
    r"\AChunk ID: [0-9a-f]{6}\nWall time: [0-9]+\.[0-9]{4} seconds\n"
    r"(Process exited with code -?[0-9]+|Process running with session ID [0-9]+)\n"
    r"Original token count: [0-9]+\nOutput:\n"
)


@pytest.fixture
def rt_settings(tmp_path: Path) -> dict[str, Any]:
    work = tmp_path / "work"
    work.mkdir()
    return {"default_cwd": str(work), "profiles": ["codex", "conch"], "result_detail": "lean"}


async def call(
    rt: conch.Runtime, name: str, args: dict[str, Any], ctx: ToolContext | None = None
) -> ToolOutcome:
    return await call_tool_full(rt.engine, rt.registry, name, args, ctx)


async def text(rt: conch.Runtime, name: str, args: dict[str, Any]) -> str:
    outcome = await call(rt, name, args)
    assert not outcome.is_error, outcome.result
    out = str(outcome.result["text"])
    assert HEADER.match(out), out
    return out


def output(result: str) -> str:
    return result.split("Output:\n", 1)[1]


def session_of(result: str) -> int:
    m = re.search(r"Process running with session ID ([0-9]+)\n", result)
    assert m is not None, result
    return int(m.group(1))


def exit_code(result: str) -> int | None:
    m = re.search(r"Process exited with code (-?[0-9]+)\n", result)
    return int(m.group(1)) if m else None


def wall(result: str) -> float:
    m = re.search(r"Wall time: ([0-9.]+) seconds", result)
    assert m is not None
    return float(m.group(1))


# --- the descriptors -----------------------------------------------------------------------------


def test_the_schemas_are_codexs_with_conchs_descriptions():
    for tool in openai_tools():
        assert list(tool) == ["type", "name", "description", "strict", "parameters"]
        assert (tool["type"], tool["strict"]) == ("function", False)
        params = tool["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert params["required"] == CODEX_REQUIRED[tool["name"]]
        bare = {k: {f: v for f, v in p.items() if f != "description"}
                for k, p in params["properties"].items()}  # fmt: skip
        assert bare == CODEX_PROPERTIES[tool["name"]]
        assert all(p["description"] for p in params["properties"].values())
    assert [t["name"] for t in openai_tools()] == ["exec_command", "write_stdin"]


def test_descriptions_carry_the_defaults_and_limits_codex_strips():
    exec_props, write_props = (t["parameters"]["properties"] for t in openai_tools())
    assert all(n in exec_props["yield_time_ms"]["description"] for n in ("10000", "250", "30000"))
    assert "10000" in exec_props["max_output_tokens"]["description"]
    poll = write_props["yield_time_ms"]["description"]
    assert all(n in poll for n in ("250", "30000", "5000", "300000"))


async def test_served_tools_are_text_only_with_no_output_schema(rt):
    listed = {t["name"]: t for t in rt.tools()}
    for name in ("exec_command", "write_stdin"):
        assert "outputSchema" not in listed[name]
        assert listed[name]["inputSchema"]["properties"].keys() == CODEX_PROPERTIES[name].keys()
    assert "exec" in listed  # combined with the conch profile


# --- exec_command --------------------------------------------------------------------------------


async def test_a_quick_command_reports_its_exit_and_output(rt):
    r = await text(rt, "exec_command", {"cmd": "echo hi"})
    assert exit_code(r) == 0 and output(r) == "hi\n"
    assert "Original token count: 1\n" in r


async def test_a_non_zero_exit_is_a_normal_result(rt):
    r = await text(rt, "exec_command", {"cmd": "echo oops >&2; exit 3"})
    assert exit_code(r) == 3 and output(r) == "oops\n"


async def test_a_command_killed_by_a_signal_exits_as_codex_shows_it(rt):
    assert exit_code(await text(rt, "exec_command", {"cmd": "kill -TERM $$"})) == 143
    r = await text(rt, "exec_command", {"cmd": "kill -TERM $$", "tty": True})
    assert exit_code(r) == 1


async def test_login_shell_by_default_and_plain_with_login_false(rt, tmp_path):
    shell = tmp_path / "show-args"
    shell.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    shell.chmod(0o755)
    r = await text(rt, "exec_command", {"cmd": "x y", "shell": str(shell)})
    assert output(r) == "-lc|x y|"
    r = await text(rt, "exec_command", {"cmd": "x", "shell": str(shell), "login": False})
    assert output(r) == "-c|x|"


async def test_workdir_sets_the_directory(rt, tmp_path):
    (tmp_path / "work" / "sub").mkdir()
    r = await text(rt, "exec_command", {"cmd": "pwd -P", "workdir": "sub"})
    assert output(r) == os.path.realpath(tmp_path / "work" / "sub") + "\n"


async def test_sandbox_arguments_are_accepted_and_change_nothing(rt):
    r = await text(
        rt,
        "exec_command",
        {
            "cmd": "echo ok",
            "sandbox_permissions": "require_escalated",
            "justification": "why",
            "prefix_rule": ["echo"],
        },
    )
    assert output(r) == "ok\n"


async def test_a_pipe_command_reads_eof_on_stdin(rt):
    r = await text(rt, "exec_command", {"cmd": "cat; echo after"})
    assert exit_code(r) == 0 and output(r) == "after\n"


async def test_a_tty_command_gets_a_terminal_with_crlf_line_ends(rt):
    r = await text(rt, "exec_command", {"cmd": "tty; echo on-a-tty", "tty": True})
    assert re.fullmatch(r"/dev/pts/[0-9]+\r\non-a-tty\r\n", output(r)), r


# --- yields and sessions -------------------------------------------------------------------------


async def test_a_running_command_yields_a_session_and_a_poll_waits_for_its_exit(rt):
    r = await text(
        rt, "exec_command", {"cmd": "echo first; sleep 2; echo done", "yield_time_ms": 1000}
    )
    sid = session_of(r)
    assert 1000 <= sid < 100000 and output(r) == "first\n"
    started = time.monotonic()
    r = await text(rt, "write_stdin", {"session_id": sid, "chars": "", "yield_time_ms": 1000})
    assert exit_code(r) == 0 and output(r) == "done\n"  # only what came since the last chunk
    assert time.monotonic() - started < 4  # it returned at the exit, well before 5 s
    gone = await call(rt, "write_stdin", {"session_id": sid})
    assert gone.is_error and gone.result["text"] == f"write_stdin failed: Unknown process id {sid}"


async def test_an_unknown_session_is_an_error_in_codexs_words(rt):
    r = await call(rt, "write_stdin", {"session_id": 987654})
    assert r.is_error and r.result["text"] == "write_stdin failed: Unknown process id 987654"


async def test_a_tiny_yield_is_raised_to_250_ms(rt):
    r = await text(rt, "exec_command", {"cmd": "sleep 2", "yield_time_ms": 100})
    assert 0.24 <= wall(r) < 0.7
    await call(rt, "write_stdin", {"session_id": session_of(r), "chars": ""})


async def test_an_empty_poll_waits_at_least_5_seconds(rt):
    r = await text(rt, "exec_command", {"cmd": "sleep 30", "yield_time_ms": 250})
    sid = session_of(r)
    r = await text(rt, "write_stdin", {"session_id": sid, "chars": "", "yield_time_ms": 300})
    assert 4.9 <= wall(r) < 6.5 and session_of(r) == sid


async def test_writing_to_a_pipe_command_says_stdin_is_closed(rt):
    r = await text(rt, "exec_command", {"cmd": "sleep 1; echo end", "yield_time_ms": 250})
    sid = session_of(r)
    w = await call(rt, "write_stdin", {"session_id": sid, "chars": "hello\n"})
    assert w.is_error and w.result["text"] == (
        "write_stdin failed: stdin is closed for this session; rerun exec_command with "
        "tty=true to keep stdin open"
    )
    r = await text(rt, "write_stdin", {"session_id": sid, "chars": ""})  # the session lives on
    assert exit_code(r) == 0 and output(r) == "end\n"


async def test_typed_keys_reach_the_terminal_as_raw_bytes(rt):
    r = await text(rt, "exec_command", {"cmd": "cat", "tty": True, "yield_time_ms": 500})
    sid = session_of(r)
    r = await text(rt, "write_stdin", {"session_id": sid, "chars": "typed line\n"})
    assert session_of(r) == sid and output(r) == "typed line\r\ntyped line\r\n"
    r = await text(rt, "write_stdin", {"session_id": sid, "chars": "\u0003"})
    assert exit_code(r) == 1 and output(r) == "^C"


async def test_waits_end_before_the_hosts_timeout_and_the_job_survives(rt):
    host = HostFacts("a host with a 3 s timeout", 3000, 1 << 20)
    started = time.monotonic()
    r = await call(rt, "exec_command", {"cmd": "sleep 4; echo survived", "yield_time_ms": 30000},
                   ToolContext(host=host))  # fmt: skip
    assert time.monotonic() - started < 2.9
    sid = session_of(r.result["text"])
    r = await call(rt, "write_stdin", {"session_id": sid, "chars": "", "yield_time_ms": 300000},
                   ToolContext(host=host))  # fmt: skip
    assert "Process running" in r.result["text"]  # the poll, too, ended before 3 s
    r = await call(rt, "write_stdin", {"session_id": sid, "chars": ""}, ToolContext(host=host))
    assert output(r.result["text"]) == "survived\n"


# --- truncation ----------------------------------------------------------------------------------


async def test_long_output_is_cut_as_codex_cuts_it_and_says_where_the_rest_is(rt):
    r = await text(rt, "exec_command", {"cmd": "seq 1 100000", "max_output_tokens": 200})
    assert "Original token count: 147224\n" in r
    body = output(r)
    assert body.startswith(
        "Warning: truncated output (original token count: 147224)\nTotal output lines: 100000\n"
    )
    assert "…147024 tokens truncated…" in body and body.endswith("99999\n100000\n")
    m = re.search(r"bytes ([0-9]+)-([0-9]+) of job (j_[0-9a-f]+)'s log", body)
    assert m is not None, body[:400]
    start, end, job_id = int(m.group(1)), int(m.group(2)), m.group(3)
    head = body.split("\n\n", 1)[1].split("…")[0]
    assert start == len(head.encode())  # the cut starts where the head ends
    # the left-out bytes are in the log: Conch's read gives them back
    full = "".join(f"{i}\n" for i in range(1, 100001)).encode()
    assert end - start == len(full) - len(head.encode()) - len(body.rsplit("…", 1)[1].encode())
    window = (await call(rt, "read", {"job_id": job_id, "cursor": start, "max_bytes": 64})).result
    assert window["output"] == full[start : start + 64].decode()


async def test_output_within_budget_is_whole(rt):
    r = await text(rt, "exec_command", {"cmd": "seq 1 1000"})
    assert output(r) == "".join(f"{i}\n" for i in range(1, 1001))


async def test_bad_arguments_are_a_clear_text_error(rt):
    for args in ({}, {"cmd": 5}, {"cmd": "x", "bogus": 1}, {"cmd": "x", "yield_time_ms": -1},
                 {"cmd": "x", "yield_time_ms": 1.5}):  # fmt: skip
        r = await call(rt, "exec_command", args)
        assert r.is_error and r.result["text"].startswith("failed to parse function arguments: ")


# --- over MCP stdio ------------------------------------------------------------------------------


async def test_over_stdio_results_are_text_only(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = Server.conch("codex", str(cwd), shared_env(tmp_path))
    async with open_session(server, tmp_path / "stderr.log") as s:
        listed = await s.client.session.list_tools()
        assert [t.name for t in listed.tools] == ["exec_command", "write_stdin"]
        r = await s.client.session.call_tool("exec_command", {"cmd": "echo hi"})
        assert r.structured_content is None and not r.is_error
        (block,) = r.content
        assert HEADER.match(block.text) and block.text.endswith("Output:\nhi\n")
        r = await s.client.session.call_tool("write_stdin", {"session_id": 5})
        assert r.is_error and r.content[0].text == "write_stdin failed: Unknown process id 5"
        assert json.dumps(r.model_dump(mode="json"))  # a plain, serializable result
