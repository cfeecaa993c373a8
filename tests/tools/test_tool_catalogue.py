"""docs/spec.md §6 through the embedded API: tools(), call_tool() and the error envelope."""

from __future__ import annotations

import pytest

from conch.tools.call import call_tool_full
from conch.tools.context import ToolContext
from conch.tools.render import render

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


EXPECTED = {
    "exec",
    "read",
    "write",
    "signal",
    "list",
    "shell_open",
    "search",
    "changes",
}


async def test_catalogue_lists_every_tool_with_strict_schemas(rt):
    tools = {t["name"]: t for t in rt.tools()}
    assert set(tools) == EXPECTED
    for t in tools.values():
        schema = t["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert t["outputSchema"]["type"] == "object"
        assert t["description"]
    for name in ("read", "list", "search"):
        assert tools[name]["annotations"]["readOnlyHint"] is True
    assert tools["exec"]["annotations"]["readOnlyHint"] is False


async def test_call_tool_returns_the_structured_result(rt):
    r = await rt.call_tool("exec", {"command": "echo hi"})
    assert r["state"] == "exited" and r["output"] == "hi\n"
    r2 = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0})
    assert r2["output"] == "hi\n"


@pytest.mark.parametrize(
    "args,code",
    [
        ({}, "invalid_argument"),
        ({"command": "true", "bogus": 1}, "invalid_argument"),
        ({"command": "true", "host": "example.com"}, "invalid_argument"),
        ({"command": "true", "host": None}, "invalid_argument"),
        ({"command": "true", "yield_ms": True}, "invalid_argument"),
        ({"command": "true", "yield_ms": 1.5}, "invalid_argument"),
        ({"command": "true", "yield_ms": "10"}, "invalid_argument"),
        ({"command": "true", "yield_ms": 600001}, "invalid_argument"),
        ({"command": "true", "timeout_ms": -1}, "invalid_argument"),
        ({"command": "ec\x00ho"}, "invalid_argument"),
        ({"argv": []}, "invalid_argument"),
        ({"argv": [""]}, "invalid_argument"),
        ({"argv": ["echo", 1]}, "invalid_argument"),
        ({"command": "true", "env": {"A=B": "x"}}, "invalid_argument"),
        ({"command": "true", "max_output_bytes": 2_000_000}, "invalid_argument"),
        ({"command": "true", "cwd": "/definitely/missing"}, "cwd_not_found"),
        ({"argv": ["no-such-program-abc"]}, "spawn_failed"),
        ({"script": "if then"}, "syntax_error"),
        ({"command": "true", "purpose": "   "}, "invalid_argument"),
        ({"command": "true", "purpose": "x" * 201}, "invalid_argument"),
        ({"command": "true", "purpose": "a\x07b"}, "invalid_argument"),
    ],
)
async def test_bad_input_gets_the_error_envelope_and_runs_nothing(rt, args, code):
    out = await call_tool_full(rt.engine, rt.registry, "exec", args)
    assert out.is_error is True
    assert set(out.result) == {"error"}
    err = out.result["error"]
    assert err["code"] == code and isinstance(err["message"], str) and err["message"]
    assert isinstance(err["retryable"], bool)
    assert [j for j in rt.engine.jobs] == []


async def test_unknown_tool_and_unknown_job(rt):
    assert (await rt.call_tool("nope", {}))["error"]["code"] == "not_found"
    r = await rt.call_tool("read", {"job_id": "j_0123456789"})
    assert r["error"]["code"] == "not_found" and r["error"]["retryable"] is False


async def test_nonzero_exit_is_not_an_error(rt):
    out = await call_tool_full(rt.engine, rt.registry, "exec", {"command": "exit 9"})
    assert out.is_error is False and out.result["exit_code"] == 9
    assert out.full is not None and out.full["ok"] is False


async def test_purpose_is_echoed_in_meta_summary_only(rt):
    out = await call_tool_full(
        rt.engine, rt.registry, "exec", {"command": "echo hi", "purpose": "  say hi  "}
    )
    assert out.meta == {"summary": "say hi"} and out.result["output"] == "hi\n"


async def test_meta_shell_env_reaches_the_child_but_not_the_caller_session(rt):
    ctx = ToolContext(
        meta={"shell_env": {"TOKEN": "s3cret", "AI_ASSISTANT_CALLER_SESSION_ID": "ses-9"}},
        trusted=False,
    )
    out = await call_tool_full(
        rt.engine,
        rt.registry,
        "exec",
        {"command": 'echo "$TOKEN|$AI_ASSISTANT_CALLER_SESSION_ID"'},
        ctx,
    )
    assert out.result["output"] == "s3cret|\n"


async def test_caller_session_projected_only_when_trusted(rt):
    cmd = {"command": 'echo "[$AI_ASSISTANT_CALLER_SESSION_ID]"'}
    meta = {"assistant": {"session_id": "ses-42"}}
    ok = await call_tool_full(
        rt.engine, rt.registry, "exec", cmd, ToolContext(meta=meta, trusted=True)
    )
    assert ok.result["output"] == "[ses-42]\n"
    no = await call_tool_full(
        rt.engine, rt.registry, "exec", cmd, ToolContext(meta=meta, trusted=False)
    )
    assert no.result["output"] == "[]\n"
    bad = await call_tool_full(
        rt.engine, rt.registry, "exec", cmd, ToolContext(meta={"assistant": {"session_id": "x"}})
    )
    assert bad.result["output"] == "[]\n"


async def test_progress_messages_carry_the_latest_line(rt):
    messages = []

    async def progress(msg: str) -> None:
        messages.append(msg)

    out = await call_tool_full(
        rt.engine,
        rt.registry,
        "exec",
        {"command": "echo tick-1; sleep 2.3; echo tock"},
        ToolContext(progress=progress),
    )
    assert out.result["state"] == "exited"
    assert len(messages) >= 2 and "tick-1" in messages[0]


async def test_list_and_info(rt):
    r = await rt.call_tool("exec", {"command": "sleep 5", "yield_ms": 0, "name": "bg"})
    lst = await rt.call_tool("list", {"state": "running"})
    assert [j["name"] for j in lst["jobs"]] == ["bg"]
    info = await rt.call_tool("info", {})
    assert info["containment"] in ("subreaper", "process-group", "cgroup")
    assert info["limits"]["max_running"] == 32
    text = str(info)
    assert "PATH" not in text
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})


async def test_text_rendering_is_a_header_then_output(rt):
    out = await call_tool_full(rt.engine, rt.registry, "exec", {"command": "echo hi; exit 2"})
    text = render("exec", out.result, is_error=False, full=out.full)
    assert text.splitlines()[0].startswith(f"[{out.result['job_id']} exited 2 · ")
    assert text.endswith("hi\n")
    err = await call_tool_full(rt.engine, rt.registry, "read", {"job_id": "nope"})
    assert render("read", err.result, is_error=True).startswith("[error not_found]")


async def test_concurrent_calls_each_report_progress_on_their_own_job(rt):
    import asyncio

    seen: dict[str, list[str]] = {"a": [], "b": []}

    def reporter(key: str):
        async def progress(message: str) -> None:
            seen[key].append(message)

        return progress

    async def call(key: str, delay: float) -> dict:
        await asyncio.sleep(delay)
        outcome = await call_tool_full(
            rt.engine,
            rt.registry,
            "exec",
            {"command": f"echo {key}-line; sleep 1.6", "yield_ms": 5000},
            ToolContext(progress=reporter(key)),
        )
        return outcome.result

    a, b = await asyncio.gather(call("a", 0.0), call("b", 0.2))
    for key, result in (("a", a), ("b", b)):
        assert seen[key], f"no progress for {key}"
        for message in seen[key]:
            assert message.startswith(result["job_id"] + " "), (key, message)
            assert f"{key}-line" in message


async def test_info_rides_on_list_and_stays_callable_by_name(rt):
    """Eight tools listed: `info` is `list {info: true}`, and still answers by its name."""
    assert "info" not in {t["name"] for t in rt.tools()}
    plain = await rt.call_tool("list", {})
    assert "info" not in plain
    both = await rt.call_tool("list", {"info": True})
    alone = await rt.call_tool("info", {})
    assert both["jobs"] == plain["jobs"] and both["info"] == alone, (both, alone)
    assert alone["version"] and alone["limits"] and alone["host"]["name"]
    for bad in ({"info": "yes"}, {"info": 1}, {"info": None}):
        r = await rt.call_tool("list", bad)
        assert r["error"]["code"] == "invalid_argument", (bad, r)
    text = render("list", both, is_error=False)
    assert "\ninfo: {" in text and alone["version"] in text, text
