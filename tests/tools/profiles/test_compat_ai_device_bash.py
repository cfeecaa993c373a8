"""Profile `ai-device-bash` (docs/spec.md §7, seed-contracts §1): the seed's tools, result and codes
on the Conch runtime, without the seed's bugs."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psutil
import pytest

import conch
from conch.tools.call import call_tool_full
from conch.tools.context import ToolContext
from conch.tools.profiles import ai_device_bash

pytestmark = pytest.mark.anyio

KEYS = {
    "success",
    "code",
    "message",
    "exit_code",
    "output",
    "output_path",
    "truncated",
    "returned_output_bytes",
    "total_bytes",
    "duration_ms",
    "background_pid",
    "tool_mode",
}


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    return {"profiles": ["ai-device-bash"], "kill_grace_ms": 500, "result_detail": "lean"}


async def call(rt: conch.Runtime, name: str, args: dict[str, Any], **ctx: Any) -> dict[str, Any]:
    outcome = await call_tool_full(
        rt.engine, rt.registry, name, args, ToolContext(**ctx) if ctx else None
    )
    r = outcome.result
    assert set(r) == KEYS, r
    assert r["returned_output_bytes"] == len(r["output"].encode())
    return r


async def test_tools_are_the_seeds_in_its_order(rt):
    tools = rt.tools()
    assert [t["name"] for t in tools] == ["bash", "run", "script", "get"]
    for t in tools:
        assert t["inputSchema"]["additionalProperties"] is False
        assert "outputSchema" not in t  # the original publishes none (FastMCP, ToolResult)
    # the original's own descriptions and annotations (checked against 0.2.0 by
    # tests/tools/profiles/differential/test_ai_device_bash_diff.py)
    assert tools[0]["description"].startswith("Execute a bash command and return the output.")
    assert [t.get("annotations") for t in tools] == [{"summary_key": "purpose"}] * 3 + [None]


async def test_bash_ok_has_the_twelve_keys_and_merged_output(rt):
    outcome = await call_tool_full(
        rt.engine, rt.registry, "bash", {"command": "echo out; echo err >&2"}
    )
    r = outcome.result
    assert set(r) == KEYS and not outcome.is_error
    assert r["success"] is True and r["code"] == "OK" and r["exit_code"] == 0
    assert r["output"] == "out\nerr\n" and r["truncated"] is False
    assert r["tool_mode"] == "bash" and r["background_pid"] is None
    assert r["total_bytes"] == 8
    with open(r["output_path"], "rb") as f:
        assert f.read() == b"out\nerr\n"
    assert outcome.meta == {"summary": "bash"}


async def test_purpose_is_the_summary_and_a_bad_one_runs_nothing(rt, tmp_path):
    outcome = await call_tool_full(
        rt.engine, rt.registry, "run", {"argv": ["true"], "purpose": "  check  "}
    )
    assert outcome.meta == {"summary": "check"}
    outcome = await call_tool_full(rt.engine, rt.registry, "run", {"argv": ["true"]})
    assert outcome.meta == {"summary": "run command"}
    marker = tmp_path / "ran"
    for purpose in ("   ", "x" * 201):
        r = await call(rt, "bash", {"command": f"touch {marker}", "purpose": purpose})
        assert r["code"] == "INVALID_PURPOSE" and r["success"] is False and r["exit_code"] == -1
    assert not marker.exists()


async def test_nonzero_exit_is_command_error(rt):
    r = await call(rt, "bash", {"command": "echo no; exit 3"})
    assert r["success"] is False and r["code"] == "COMMAND_ERROR" and r["exit_code"] == 3
    assert r["output"] == "no\n"


async def test_signal_exit_is_negative_like_asyncio(rt):
    r = await call(rt, "bash", {"command": "kill -9 $$"})
    assert r["code"] == "COMMAND_ERROR" and r["exit_code"] == -9


async def test_run_argv_is_literal(rt, tmp_path):
    target = tmp_path / "injected"
    r = await call(rt, "run", {"argv": ["printf", "%s|", "$(touch " + str(target) + ")", ""]})
    assert r["code"] == "OK" and r["output"] == f"$(touch {target})||"
    assert not target.exists()


async def test_run_and_script_get_exact_stdin(rt):
    r = await call(rt, "run", {"argv": ["od", "-An", "-c"], "stdin": "a\nb"})
    assert r["output"].split() == ["a", "\\n", "b"]
    r = await call(rt, "script", {"script": "read -r x\necho got:$x\n", "stdin": "héllo\n"})
    assert r["code"] == "OK" and r["output"] == "got:héllo\n" and r["tool_mode"] == "script"
    r = await call(rt, "run", {"argv": ["cat"]})
    assert r["code"] == "OK" and r["output"] == ""


async def test_script_syntax_error_runs_nothing(rt, tmp_path):
    marker = tmp_path / "ran"
    r = await call(rt, "script", {"script": f"touch {marker}\nif then\n"})
    assert r["code"] == "SCRIPT_SYNTAX_ERROR" and r["success"] is False and r["exit_code"] == -1
    assert "syntax error" in r["output"]
    assert not marker.exists()


async def test_timeout_background_then_get_follows_the_job(rt):
    t0 = time.monotonic()
    r = await call(rt, "bash", {"command": "echo early; sleep 0.6; echo late", "timeout": 0.2})
    assert time.monotonic() - t0 < 1.0
    assert r["code"] == "BACKGROUND" and r["success"] is True and r["exit_code"] is None
    assert r["output"] == "early\n"
    handle = r["background_pid"]
    assert isinstance(handle, int) and handle > 4_194_304  # above any Linux pid
    assert all(p.pid != handle for p in psutil.Process().children(recursive=True))

    r = await call(rt, "get", {"pid": handle})
    assert r["code"] == "RUNNING" and r["background_pid"] == handle and r["tool_mode"] == "bash"
    r = await call(rt, "get", {"pid": handle, "timeout": 5})
    assert r["code"] == "OK" and r["output"] == "early\nlate\n" and r["background_pid"] is None
    again = await call(rt, "get", {"pid": handle})
    time.sleep(0.05)
    third = await call(rt, "get", {"pid": handle})
    assert r["duration_ms"] == again["duration_ms"] == third["duration_ms"]  # frozen, not growing


async def test_get_prefers_the_tail_on_a_tiny_budget(rt):
    r = await call(rt, "bash", {"command": "seq 1 2000; sleep 5", "timeout": 0.3})
    r = await call(rt, "get", {"pid": r["background_pid"], "bytes": 20})
    assert r["code"] == "RUNNING" and r["truncated"] is True
    assert r["output"].endswith("2000\n") and r["returned_output_bytes"] <= 20


async def test_timeout_kill_kills_the_tree_without_waiting_for_escaped_daemons(rt):
    t0 = time.monotonic()
    r = await call(
        rt,
        "bash",
        {
            "command": "setsid sleep 6 & echo x; sleep 30",
            "timeout": 0.5,
            "timeout_behavior": "kill",
        },
    )
    assert time.monotonic() - t0 < 3.0
    assert r["code"] == "TIMEOUT" and r["success"] is False and r["exit_code"] == -1
    assert r["output"] == "x\n" and r["background_pid"] is None


async def test_grandchild_holding_the_pipe_does_not_delay_the_result(rt):
    t0 = time.monotonic()
    r = await call(rt, "bash", {"command": "(sleep 3; echo late) & echo early"})
    assert time.monotonic() - t0 < 1.5
    assert r["code"] == "OK" and r["output"].startswith("early")


async def test_bytes_budget_previews_head_and_tail(rt):
    r = await call(rt, "bash", {"command": "seq 1 10000"})
    assert r["truncated"] is True and r["returned_output_bytes"] <= 8192
    assert r["output"].startswith("1\n2\n") and r["output"].endswith("10000\n")
    assert "...[output omitted]..." in r["output"]
    assert r["total_bytes"] == len("".join(f"{i}\n" for i in range(1, 10001)))
    r = await call(rt, "bash", {"command": "seq 1 10000", "bytes": 100})
    assert r["returned_output_bytes"] <= 100 and r["truncated"] is True
    r = await call(rt, "bash", {"command": "seq 1 10000", "bytes": 0})
    assert r["output"] == "" and r["truncated"] is True
    r = await call(rt, "bash", {"command": "seq 1 10000", "bytes": 10**9})
    assert r["returned_output_bytes"] <= 8192


@pytest.mark.parametrize(
    "tool,args,code",
    [
        ("bash", {"command": "true", "timeout": -1}, "INVALID_TIMEOUT"),
        ("bash", {"command": "true", "bytes": -1}, "INVALID_BYTES"),
        ("run", {"argv": []}, "INVALID_ARGV"),
        ("run", {"argv": [""]}, "INVALID_ARGV"),
        ("run", {"argv": ["a\x00b"]}, "INVALID_ARGV"),
        ("run", {"argv": "echo"}, "INVALID_ARGV"),
        ("run", {"argv": ["true"] * 4097}, "ARGV_TOO_LARGE"),
        ("run", {"argv": ["true", "x" * 262144]}, "ARGV_TOO_LARGE"),
        ("run", {"argv": ["cat"], "stdin": 5}, "INVALID_STDIN"),
        ("run", {"argv": ["cat"], "stdin": "x" * (4 * 1024 * 1024 + 1)}, "STDIN_TOO_LARGE"),
        ("script", {"script": ""}, "INVALID_SCRIPT"),
        ("script", {"script": "true\n" * 300000}, "SCRIPT_TOO_LARGE"),
        ("bash", {"command": "true", "timeout_behavior": "later"}, "INVALID_TIMEOUT_BEHAVIOR"),
        ("bash", {"command": "pwd", "cwd": "/no/such/dir"}, "CWD_NOT_FOUND"),
        ("run", {"argv": ["no-such-program-x"]}, "EXECUTION_ERROR"),
    ],
)
async def test_invalid_arguments_get_the_seeds_codes(rt, tool, args, code):
    r = await call(rt, tool, args)
    assert r["code"] == code and r["success"] is False and r["exit_code"] == -1
    # as in 0.2.0: checks its executor makes come after it created the (empty) output file
    if code in ("INVALID_TIMEOUT", "INVALID_BYTES", "CWD_NOT_FOUND", "EXECUTION_ERROR"):
        assert os.path.getsize(r["output_path"]) == 0 and r["total_bytes"] == 0
    else:
        assert r["output_path"] is None and r["total_bytes"] is None


@pytest.mark.parametrize("host", [None, "", "example.com"])
async def test_host_is_rejected_before_anything_runs(rt, tmp_path, host):
    marker = tmp_path / "ran"
    outcome = await call_tool_full(
        rt.engine, rt.registry, "bash", {"command": f"touch {marker}", "host": host}
    )
    assert outcome.is_error and outcome.result["success"] is False
    assert set(outcome.result) == KEYS
    assert not marker.exists()


async def test_get_validates_and_unknown_handles_are_not_running(rt, tmp_path):
    r = await call(rt, "get", {"pid": 123, "timeout": -1})
    assert r["code"] == "INVALID_TIMEOUT" and r["exit_code"] is None
    r = await call(rt, "get", {"pid": 123, "bytes": -1})
    assert r["code"] == "INVALID_BYTES" and r["exit_code"] is None
    r = await call(rt, "get", {"pid": os.getpid()})
    assert r["code"] == "NOT_RUNNING" and r["success"] is False
    assert r["output_path"] is None and r["total_bytes"] is None and r["tool_mode"] is None
    outcome = await call_tool_full(rt.engine, rt.registry, "get", {"pid": 5})
    assert outcome.meta == {"summary": "get 5"}

    bg = await call(rt, "bash", {"command": "sleep 5", "timeout": 0.05})
    other_cfg = conch.Config(data_dir=str(tmp_path / "d2"), profiles=["ai-device-bash"])
    async with conch.Runtime(other_cfg) as other:
        r = await call(other, "get", {"pid": bg["background_pid"]})
        assert r["code"] == "NOT_RUNNING"


async def test_meta_shell_env_and_caller_context(rt):
    meta = {"shell_env": {"SECRET": "s3", "N": 7, "AI_ASSISTANT_CALLER_SESSION_ID": "ses-9"}}
    r = await call(
        rt,
        "bash",
        {"command": 'echo "$SECRET $N [$AI_ASSISTANT_CALLER_SESSION_ID]"'},
        meta=meta,
    )
    assert r["output"] == "s3 7 []\n"
    meta = {"assistant": {"session_id": "ses-42"}}
    r = await call(rt, "bash", {"command": "echo $AI_ASSISTANT_CALLER_SESSION_ID"}, meta=meta)
    assert r["output"] == "ses-42\n"
    r = await call(
        rt, "bash", {"command": "echo [$AI_ASSISTANT_CALLER_SESSION_ID]"}, meta=meta, trusted=False
    )
    assert r["output"] == "[]\n"
    for bad in ({"1X": "v"}, {"X": None}, ["X"]):
        r = await call(rt, "bash", {"command": "true"}, meta={"shell_env": bad})
        assert r["code"] == "INVALID_META"


async def test_output_limit_exceeded_kills_the_job(tmp_path):
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"), profiles=["ai-device-bash"], max_log_bytes=100_000
    )
    async with conch.Runtime(cfg) as rt:
        r = await call(rt, "bash", {"command": "yes", "timeout": 10})
        assert r["code"] == "OUTPUT_LIMIT_EXCEEDED" and r["success"] is False
        # 0.2.0 empties the output file: nothing to show, nothing left on disk
        assert r["exit_code"] == -1 and r["total_bytes"] == 0
        assert r["output"] == "" and r["truncated"] is False
        assert os.path.getsize(r["output_path"]) == 0


@pytest.mark.parametrize(
    "args,waited",
    [
        ({"timeout": "5"}, 5.0),
        ({"timeout": True}, 1.0),
        ({"timeout": " 2 ", "bytes": "3"}, 2.0),
    ],
)
async def test_numbers_are_parsed_like_pydantic_lax_mode(rt, args, waited):
    outcome = await call_tool_full(rt.engine, rt.registry, "bash", {"command": "sleep 30", **args})
    r = outcome.result
    assert not outcome.is_error and r["code"] == "BACKGROUND"
    assert r["message"] == f"命令执行超时（{waited}秒），已转入后台继续运行"
    r = await call(rt, "get", {"pid": str(r["background_pid"]), "bytes": True})
    assert r["code"] == "RUNNING"


async def test_a_bad_argument_is_pydantics_error_text_with_is_error(rt):
    tools = {t.name: t for t in ai_device_bash.tools()}
    outcome = await call_tool_full(rt.engine, rt.registry, "get", {"pid": 1.5})
    assert outcome.is_error and outcome.meta is None
    text = tools["get"].wire.render_text
    assert text is not None and not tools["get"].wire.structured
    assert text(outcome.result, True) == (
        "1 validation error for call[get]\npid\n  Input should be a valid integer, got a number "
        "with a fractional part [type=int_from_float, input_value=1.5, input_type=float]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/int_from_float"
    )
    ok = await call_tool_full(rt.engine, rt.registry, "bash", {"command": "echo hi"})
    body = text(ok.result, False)
    assert json.loads(body) == ok.result
    assert ": " not in body.split('"output"')[0]  # compact, like FastMCP's


async def test_blank_commands_and_scripts_run(rt):
    for tool, args in (
        ("bash", {"command": ""}),
        ("bash", {"command": "  "}),
        ("script", {"script": " \n"}),
    ):
        r = await call(rt, tool, args)
        assert r["code"] == "OK" and r["output"] == "" and r["total_bytes"] == 0


async def test_nul_is_a_normal_failure_result(rt):
    outcome = await call_tool_full(rt.engine, rt.registry, "bash", {"command": "echo a\x00b"})
    r = outcome.result
    assert not outcome.is_error
    assert (r["code"], r["message"], r["total_bytes"]) == (
        "EXECUTION_ERROR",
        "embedded null byte",
        0,
    )
    r = await call(rt, "run", {"argv": ["echo", "a\x00b"]})
    assert r["code"] == "INVALID_ARGV" and r["message"] == "argv 元素不能包含空字节"


async def test_tilde_cwd_is_not_expanded_and_a_lone_cr_is_a_newline(rt):
    r = await call(rt, "bash", {"command": "pwd", "cwd": "~"})
    assert r["code"] == "CWD_NOT_FOUND" and r["message"] == "工作目录不存在: ~"
    r = await call(rt, "bash", {"command": "printf 'a\\rb\\r\\nc\\r'"})
    assert r["output"] == "a\nb\nc\n" and r["total_bytes"] == 7


async def test_an_endless_timeout_waits_for_the_end(rt):
    for behavior in ("background", "kill"):
        r = await call(
            rt,
            "bash",
            {"command": "sleep 0.3; echo done", "timeout": 1e308, "timeout_behavior": behavior},
        )
        assert r["code"] == "OK" and r["output"] == "done\n"


async def test_syntax_errors_are_bashs_own_text_and_go_to_the_output_file(rt):
    r = await call(rt, "script", {"script": "echo a\nif then\n"})
    assert r["code"] == "SCRIPT_SYNTAX_ERROR" and r["message"] == "脚本语法检查失败，未执行脚本"
    assert r["output"].endswith(": line 2: `if then'\n")
    assert ".sh: line 2: syntax error near unexpected token `then'" in r["output"]
    with open(r["output_path"], encoding="utf-8") as f:
        assert f.read() == r["output"]
    assert r["total_bytes"] == len(r["output"].encode())
