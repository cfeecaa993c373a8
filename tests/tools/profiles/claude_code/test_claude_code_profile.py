"""Profile ``claude-code`` (docs/spec.md §7, dialect profiles): Claude Code's ``Bash`` /
``TaskOutput`` / ``TaskStop`` on real processes through the runtime, and over a real MCP stdio
session. What the real Claude Code shows for its own tools is checked against the profile by
tests/hosts/claude/test_claude_dialect.py; these tests pin the profile's own behaviour."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from harness import Server, open_session, shared_env

import conch
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import ToolContext
from conch.tools.hosts import HostFacts, facts_for
from conch.tools.profiles.claude_code import anthropic_tools
from conch.tools.profiles.claude_code import results as R

pytestmark = pytest.mark.anyio

# the schemas Claude Code 2.1.197 sends the model (reference/hosts.md), descriptions aside
ORIGINAL = {
    "Bash": (
        {
            "command": {"type": "string"},
            "timeout": {"type": "number"},
            "description": {"type": "string"},
            "run_in_background": {"type": "boolean"},
            "dangerouslyDisableSandbox": {"type": "boolean"},
        },
        ["command"],
    ),
    "TaskOutput": (
        {
            "task_id": {"type": "string"},
            "block": {"default": True, "type": "boolean"},
            "timeout": {"default": 30000, "type": "number", "minimum": 0, "maximum": 600000},
        },
        ["task_id", "block", "timeout"],
    ),
    "TaskStop": ({"task_id": {"type": "string"}, "shell_id": {"type": "string"}}, None),
}
BACKGROUND = re.compile(
    r"\ACommand running in background with ID: (b[0-9a-z]{8})\. Output is being written to: "
    r"(/\S+)\. You will be notified when it completes\. To check interim output, use Read on "
    r"that file path\.\Z"
)


@pytest.fixture
def rt_settings(tmp_path: Path) -> dict[str, Any]:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    return {
        "default_cwd": str(work),
        "profiles": ["claude-code", "conch"],
        "kill_grace_ms": 300,
        "result_detail": "lean",
    }


async def call(
    rt: conch.Runtime, name: str, args: dict[str, Any], ctx: ToolContext | None = None
) -> ToolOutcome:
    outcome = await call_tool_full(rt.engine, rt.registry, name, args, ctx)
    assert set(outcome.result) == {"text", "is_error"}
    assert outcome.is_error is outcome.result["is_error"]
    return outcome


async def text(rt: conch.Runtime, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    outcome = await call(rt, name, args)
    return outcome.result["text"], outcome.is_error


async def background(rt: conch.Runtime, command: str, **args: Any) -> tuple[str, str]:
    shown, is_error = await text(
        rt, "Bash", {"command": command, "run_in_background": True, **args}
    )
    match = BACKGROUND.match(shown)
    assert match and not is_error, shown
    return match.group(1), match.group(2)


def gone(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


# ---- the tools as listed ---------------------------------------------------------------------


async def test_three_tools_with_the_originals_schemas(rt):
    listed = {t["name"]: t for t in rt.tools()}
    assert [n for n in listed if n in ORIGINAL] == ["Bash", "TaskOutput", "TaskStop"]
    for name, (props, required) in ORIGINAL.items():
        schema = listed[name]["inputSchema"]
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["additionalProperties"] is False
        assert schema.get("required") == required
        mine = {
            k: {a: b for a, b in v.items() if a != "description"}
            for k, v in schema["properties"].items()
        }
        assert mine == props
        # the defaults and limits are in the words too (hosts may strip schema limits)
        assert listed[name]["description"]
    bash = listed["Bash"]["description"]
    assert "120000" in bash and "600000" in bash and "30000" in bash
    assert "30000" in listed["TaskOutput"]["description"]
    assert "600000" in listed["TaskOutput"]["description"]


async def test_anthropic_tools_are_the_messages_api_definitions(rt):
    defs = anthropic_tools()
    assert [d["name"] for d in defs] == ["Bash", "TaskOutput", "TaskStop"]
    listed = {t["name"]: t for t in rt.tools()}
    for d in defs:
        assert set(d) == {"name", "description", "input_schema"}
        assert d["input_schema"] == listed[d["name"]]["inputSchema"]
        assert d["description"] == listed[d["name"]]["description"]
    defs[0]["input_schema"]["properties"].clear()  # a copy: the profile's own is untouched
    assert anthropic_tools()[0]["input_schema"]["properties"]


# ---- Bash --------------------------------------------------------------------------------


async def test_output_exit_codes_and_merged_streams(rt):
    assert await text(rt, "Bash", {"command": "echo hi"}) == ("hi", False)
    assert await text(rt, "Bash", {"command": "ls /nonexistent; exit 3"}) == (
        "Exit code 3\nls: cannot access '/nonexistent': No such file or directory",
        True,
    )
    merged = "echo err1 >&2; echo out1; echo err2 >&2; echo out2"
    assert await text(rt, "Bash", {"command": merged}) == ("err1\nout1\nerr2\nout2", False)
    assert await text(rt, "Bash", {"command": "true"}) == (R.NO_OUTPUT, False)
    assert await text(rt, "Bash", {"command": "exit 1"}) == ("Exit code 1", True)
    trimmed = "printf '\\n \\n  a  \\nb  \\n\\n'"
    assert await text(rt, "Bash", {"command": trimmed}) == ("  a  \nb", False)
    # ANSI and CR stay as the command wrote them (the original changes nothing)
    raw = "printf 'x\\r\\ny\\033[31mred\\033[0m\\n'"
    assert await text(rt, "Bash", {"command": raw}) == ("x\r\ny\x1b[31mred\x1b[0m", False)
    # a command killed by a signal: the original says exit code 1
    assert await text(rt, "Bash", {"command": "kill -9 $$"}) == ("Exit code 1", True)


async def test_a_fresh_shell_each_call_but_the_cwd_is_kept(rt, tmp_path):
    work = str(tmp_path / "work")
    assert await text(rt, "Bash", {"command": "export FOO=1; cd sub && pwd"}) == (
        f"{work}/sub",
        False,
    )
    assert await text(rt, "Bash", {"command": "echo FOO=$FOO; pwd"}) == (f"FOO=\n{work}/sub", False)
    # a failing command does not move it
    assert (await text(rt, "Bash", {"command": "cd .. ; false"}))[1] is True
    assert await text(rt, "Bash", {"command": "pwd"}) == (f"{work}/sub", False)
    # leaving the workspace puts it back, and says so
    assert await text(rt, "Bash", {"command": "cd /tmp && pwd"}) == (
        f"/tmp\nShell cwd was reset to {work}",
        False,
    )
    assert await text(rt, "Bash", {"command": "pwd"}) == (work, False)
    # a deleted cwd falls back to the workspace
    await text(rt, "Bash", {"command": "mkdir -p gone && cd gone"})
    os.rmdir(tmp_path / "work" / "gone")
    assert await text(rt, "Bash", {"command": "pwd"}) == (work, False)
    # a syntax error is bash's own, from eval, as in the original
    shown, is_error = await text(rt, "Bash", {"command": "if then"})
    assert is_error and shown.startswith("Exit code 2\n") and "syntax error" in shown


async def test_a_sleep_is_stopped_at_its_timeout(rt):
    started = time.monotonic()
    assert await text(rt, "Bash", {"command": "sleep 30", "timeout": 1000}) == (
        "Exit code 143\nCommand timed out after 1s",
        True,
    )
    assert time.monotonic() - started < 5
    shown = await text(
        rt, "Bash", {"command": "sleep 0.1; echo partial; sleep 30", "timeout": 1500}
    )
    assert shown == ("Exit code 143\nCommand timed out after 1s\npartial", True)
    assert [j for j in rt.engine.retained() if not j.terminal] == []


async def test_another_command_moves_to_the_background_at_its_timeout(rt):
    started = time.monotonic()
    task_id, path = await background(
        rt, "echo early; sleep 2; echo late", timeout=800, run_in_background=False
    )
    assert time.monotonic() - started < 3
    # a real file under Conch's data dir, holding what the job wrote so far
    assert path.startswith(str(rt.engine.data.root))
    assert Path(path).read_text() == "early\n"
    shown, _ = await text(rt, "TaskOutput", {"task_id": task_id, "timeout": 10000})
    assert shown.endswith(
        "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<output>\nearly\nlate\n</output>"
    )
    assert Path(path).read_text() == "early\nlate\n"


async def test_a_large_output_is_saved_with_a_preview(rt):
    shown, is_error = await text(rt, "Bash", {"command": "seq 1 100000"})
    full = "".join(f"{n}\n" for n in range(1, 100001))
    head, preview = shown.split("\n\nPreview (first 2KB):\n")
    match = re.fullmatch(
        r"<persisted-output>\nOutput too large \(575\.1KB\)\. Full output saved to: (\S+)", head
    )
    assert match and not is_error
    assert Path(match.group(1)).read_text() == full
    assert preview == full[:1999] + "\n...\n</persisted-output>"
    # 30000 bytes stay inline, 30001 do not
    inline, _ = await text(rt, "Bash", {"command": "head -c 30000 /dev/zero | tr '\\0' a"})
    assert inline == "a" * 30000
    saved, _ = await text(rt, "Bash", {"command": "head -c 30001 /dev/zero | tr '\\0' a"})
    assert saved.startswith("<persisted-output>\nOutput too large (29.3KB).")
    assert saved.endswith("a" * 2000 + "\n...\n</persisted-output>")


async def test_a_long_error_is_cut_unless_the_host_cuts_it(rt):
    command = {"command": "seq 1 3000; exit 1"}
    shown, _ = await text(rt, "Bash", command)
    full = "Exit code 1\n" + "\n".join(str(n) for n in range(1, 3001))
    assert shown == f"{full[:5000]}\n\n... [3904 characters truncated] ...\n\n{full[-5000:]}"
    claude = ToolContext(host=facts_for("claude-code"))
    assert (await call(rt, "Bash", command, claude)).result["text"] == full
    # over 30000 characters of output, the first 30000
    long = (await call(rt, "Bash", {"command": "seq 1 100000; exit 2"}, claude)).result["text"]
    assert long == "Exit code 2\n" + "".join(f"{n}\n" for n in range(1, 100001))[:30000]


# ---- background tasks ----------------------------------------------------------------------


async def test_background_task_output_and_its_statuses(rt):
    task_id, path = await background(rt, "echo early; sleep 1.5; printf 'late  \\n\\n'")
    assert re.fullmatch(r"b[0-9a-z]{8}", task_id)
    tags = f"\n\n<task_id>{task_id}</task_id>\n\n<task_type>local_bash</task_type>\n\n"
    assert await text(rt, "TaskOutput", {"task_id": task_id, "block": False}) == (
        f"<retrieval_status>not_ready</retrieval_status>{tags}<status>running</status>",
        False,
    )
    await asyncio.sleep(0.3)
    assert await text(rt, "TaskOutput", {"task_id": task_id, "timeout": 200}) == (
        f"<retrieval_status>timeout</retrieval_status>{tags}<status>running</status>"
        "\n\n<output>\nearly\n</output>",
        False,
    )
    assert await text(rt, "TaskOutput", {"task_id": task_id, "timeout": 10000}) == (
        f"<retrieval_status>success</retrieval_status>{tags}<status>completed</status>"
        "\n\n<exit_code>0</exit_code>\n\n<output>\nearly\nlate\n</output>",
        False,
    )
    # handed over once: then forgotten (its file stays)
    assert await text(rt, "TaskOutput", {"task_id": task_id}) == (
        f"<tool_use_error>No task found with ID: {task_id}</tool_use_error>",
        True,
    )
    assert Path(path).read_text() == "early\nlate  \n\n"
    failing, _ = await background(rt, "echo bad; exit 4")
    shown, _ = await text(rt, "TaskOutput", {"task_id": failing})
    assert shown.endswith(
        "<status>failed</status>\n\n<exit_code>4</exit_code>\n\n<output>\nbad\n</output>"
    )
    quiet, _ = await background(rt, "true")
    shown, _ = await text(rt, "TaskOutput", {"task_id": quiet})
    assert shown.endswith("<status>completed</status>\n\n<exit_code>0</exit_code>")


async def test_a_long_task_output_shows_its_tail(rt):
    task_id, path = await background(rt, "seq 1 100000")
    shown, _ = await text(rt, "TaskOutput", {"task_id": task_id})
    header = f"[Truncated. Full output: {path}]\n\n"
    full = "".join(f"{n}\n" for n in range(1, 100001))
    assert shown.endswith(f"<output>\n{header}{full[-(32000 - len(header)) :].rstrip()}\n</output>")


async def test_task_stop_kills_the_tree_and_forgets_the_task(rt):
    command = "sleep 30 & sleep 30; echo never"
    task_id, _ = await background(rt, command)
    await asyncio.sleep(0.3)
    [job] = [j for j in rt.engine.retained() if not j.terminal]
    pids = [
        p.pid for p in psutil.Process(os.getpid()).children(recursive=True) if p.name() == "sleep"
    ]
    assert len(pids) == 2
    assert await text(rt, "TaskStop", {"task_id": task_id}) == (
        f'{{"message":"Successfully stopped task: {task_id} ({command})",'
        f'"task_id":"{task_id}","task_type":"local_bash","command":"{command}"}}',
        False,
    )
    assert job.terminal and gone(pids)
    missing = f"<tool_use_error>No task found with ID: {task_id}</tool_use_error>"
    assert await text(rt, "TaskOutput", {"task_id": task_id}) == (missing, True)
    assert await text(rt, "TaskStop", {"task_id": task_id}) == (missing, True)
    # shell_id is the deprecated name of task_id
    other, _ = await background(rt, "sleep 30")
    shown, is_error = await text(rt, "TaskStop", {"shell_id": other})
    assert not is_error and f'"task_id":"{other}"' in shown
    assert await text(rt, "TaskStop", {}) == (
        "<tool_use_error>Missing required parameter: task_id</tool_use_error>",
        True,
    )
    done, _ = await background(rt, "exit 0")
    await asyncio.sleep(0.5)
    assert await text(rt, "TaskStop", {"task_id": done}) == (
        f"<tool_use_error>Task {done} is not running (status: completed)</tool_use_error>",
        True,
    )


async def test_arguments_are_checked_in_the_originals_words(rt):
    def failure(tool: str, *issues: str) -> tuple[str, bool]:
        plural = "issue" if len(issues) == 1 else "issues"
        body = "\n".join(issues)
        return (
            f"<tool_use_error>InputValidationError: {tool} failed due to the following "
            f"{plural}:\n{body}</tool_use_error>",
            True,
        )

    assert await text(rt, "Bash", {}) == failure(
        "Bash", "The required parameter `command` is missing"
    )
    assert await text(rt, "Bash", {"command": "echo hi", "bogus": 1}) == failure(
        "Bash", "An unexpected parameter `bogus` was provided"
    )
    assert await text(rt, "TaskOutput", {"task_id": 5}) == failure(
        "TaskOutput",
        "The parameter `task_id` type is expected as `string` but provided as `number`",
    )
    assert await text(rt, "Bash", {"command": 1, "x": 2}) == failure(
        "Bash",
        "The parameter `command` type is expected as `string` but provided as `number`",
        "An unexpected parameter `x` was provided",
    )
    # Bash's timeout takes a numeric string, as the original's does; 0 is the default
    assert await text(rt, "Bash", {"command": "echo hi", "timeout": "5000"}) == ("hi", False)
    assert await text(rt, "Bash", {"command": "echo hi", "timeout": 0}) == ("hi", False)
    assert await text(rt, "Bash", {"command": "echo hi", "timeout": 700000}) == ("hi", False)
    # the sandbox switch is accepted and changes nothing
    assert await text(rt, "Bash", {"command": "echo hi", "dangerouslyDisableSandbox": True}) == (
        "hi",
        False,
    )


# ---- host timeouts and cancels ---------------------------------------------------------------


async def test_no_wait_outlives_a_hosts_timeout(rt):
    # a host that gives up after 5 s: every wait ends by its horizon (4 s), before that
    host = ToolContext(host=HostFacts("a short host", 5000, 1 << 20))
    started = time.monotonic()
    outcome = await call(rt, "Bash", {"command": "sleep 9; echo survived", "timeout": 60000}, host)
    assert 3.5 < time.monotonic() - started < 5
    match = BACKGROUND.match(outcome.result["text"])
    assert match, outcome.result
    started = time.monotonic()
    waited = await call(rt, "TaskOutput", {"task_id": match.group(1), "timeout": 60000}, host)
    assert 3.5 < time.monotonic() - started < 5
    assert "<retrieval_status>timeout</retrieval_status>" in waited.result["text"]
    shown, _ = await text(rt, "TaskOutput", {"task_id": match.group(1), "timeout": 10000})
    assert shown.endswith("<output>\nsurvived\n</output>")


async def _cancelled_after(rt: conch.Runtime, ctx: ToolContext, seconds: float) -> Any:
    task = asyncio.ensure_future(call(rt, "Bash", {"command": "sleep 5; echo x"}, ctx))
    await asyncio.sleep(seconds)
    [job] = [j for j in rt.engine.retained() if not j.terminal]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return job


async def test_a_persons_cancel_stops_the_command(rt):
    async def person() -> bool:
        return False

    job = await _cancelled_after(rt, ToolContext(host_gave_up=person), 0.5)
    await job.wait_until(lambda: job.terminal, 5)
    assert job.state == "cancelled"


async def test_the_hosts_timeout_cancel_leaves_the_job_running(rt):
    async def host_timeout() -> bool:
        return True

    job = await _cancelled_after(rt, ToolContext(host_gave_up=host_timeout), 0.5)
    await asyncio.sleep(0.3)
    assert not job.terminal
    await job.wait_until(lambda: job.terminal, 10)
    assert job.state == "exited" and job.exit_code == 0


# ---- over MCP stdio ------------------------------------------------------------------------


async def test_over_mcp_stdio_the_results_are_text_only(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    server = Server.conch(
        "claude-code", str(work), shared_env(tmp_path), "--data-dir", str(tmp_path / "d")
    )
    async with open_session(server) as s:
        listed = await s.client.list_tools()
        assert [t.name for t in listed.tools] == ["Bash", "TaskOutput", "TaskStop"]
        ok = await s.client.call_tool("Bash", {"command": "echo hi"})
        assert [c.text for c in ok.content] == ["hi"]
        assert ok.structured_content is None and not ok.is_error
        failed = await s.client.call_tool("Bash", {"command": "exit 3"})
        assert [c.text for c in failed.content] == ["Exit code 3"] and failed.is_error
        started = await s.client.call_tool(
            "Bash", {"command": "sleep 30", "run_in_background": True}
        )
        match = BACKGROUND.match(started.content[0].text)
        assert match
        stopped = await s.client.call_tool("TaskStop", {"task_id": match.group(1)})
        assert '"message":"Successfully stopped task:' in stopped.content[0].text
