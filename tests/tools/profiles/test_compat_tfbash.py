"""Profile `tfbash` (docs/spec.md §7, seed-contracts §2): the seven shell_* tools, their snapshot
union, error envelope and metadata on the runtime's persistent shells, without the seed's bugs."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

import conch
from conch.tools.call import call_tool_full
from conch.tools.profiles.tfbash import tfbash_overview_markdown

pytestmark = pytest.mark.anyio

ORDER = [
    "shell_open",
    "shell_exec",
    "shell_read",
    "shell_write",
    "shell_signal",
    "shell_list",
    "shell_close",
]
ALWAYS = {
    "shell_id",
    "exec_id",
    "status",
    "exit_code",
    "output",
    "buffer_start_cursor",
    "next_cursor",
    "truncated_before_cursor",
    "eof",
}
TERMINAL = ALWAYS | {"duration_ms", "cwd", "shell_status", "shell_rebuilt"}


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    return {"profiles": ["tfbash"], "max_shells": 2, "default_cwd": "", "result_detail": "lean"}


async def ok(rt: conch.Runtime, name: str, args: dict[str, Any]) -> dict[str, Any]:
    outcome = await call_tool_full(rt.engine, rt.registry, name, args)
    assert not outcome.is_error, outcome.result
    r = outcome.result
    if "exec_id" in r and "status" in r and r["status"] not in ("accepted", "delivered"):
        assert set(r) == (ALWAYS if r["status"] == "running" else TERMINAL), r
    return r


async def err(rt: conch.Runtime, name: str, args: dict[str, Any], code: str) -> dict[str, Any]:
    outcome = await call_tool_full(rt.engine, rt.registry, name, args)
    assert outcome.is_error, outcome.result
    e = outcome.result["error"]
    assert e["code"] == code, e
    assert set(e) <= {"code", "message", "retryable", "shell_id", "exec_id"}
    return e


async def open_shell(rt: conch.Runtime, **kw: Any) -> str:
    r = await ok(rt, "shell_open", kw)
    assert r["status"] == "ready" and r["dialect"] == "bash" and os.path.isabs(r["cwd"])
    return str(r["shell_id"])


async def exec_(rt: conch.Runtime, sid: str, command: str, **kw: Any) -> dict[str, Any]:
    return await ok(rt, "shell_exec", {"shell_id": sid, "command": command, **kw})


async def read_to_end(rt: conch.Runtime, sid: str, r: dict[str, Any]) -> dict[str, Any]:
    out = r["output"]
    deadline = time.monotonic() + 10
    while not r["eof"]:
        assert time.monotonic() < deadline
        args = {"shell_id": sid, "exec_id": r["exec_id"], "cursor": r["next_cursor"]}
        r = await ok(rt, "shell_read", {**args, "wait_ms": 2000})
        out += r["output"]
    return {**r, "output": out}


async def test_seven_tools_in_order_with_meta_tags_and_error_schema(rt):
    tools = rt.tools()
    assert [t["name"] for t in tools] == ORDER
    tags = {t["name"]: t["_meta"]["a2c_tool_meta"]["tags"] for t in tools}
    assert tags["shell_open"] == ["BuildIn", "Create"]
    assert (
        tags["shell_exec"]
        == tags["shell_write"]
        == ["BuildIn", "Create", "Read", "Update", "Delete"]
    )
    assert tags["shell_read"] == tags["shell_list"] == ["BuildIn", "Read"]
    assert tags["shell_signal"] == ["BuildIn", "Update"]
    assert tags["shell_close"] == ["BuildIn", "Delete"]
    for t in tools:
        assert "tfbash-mcp/errorSchema" in t["_meta"]
        assert t["inputSchema"]["additionalProperties"] is False
    write = next(t for t in tools if t["name"] == "shell_write")
    assert set(write["inputSchema"]["properties"]) == {"shell_id", "exec_id", "text"}
    exec_out = next(t for t in tools if t["name"] == "shell_exec")["outputSchema"]
    assert len(exec_out["oneOf"]) == 5


async def test_exec_state_persists_and_exit_codes_are_bashs(rt, tmp_path):
    sid = await open_shell(rt, cwd=str(tmp_path))
    r = await exec_(rt, sid, "cd /; export X=42; printf mcp-e2e")
    assert r["status"] == "exited" and r["exit_code"] == 0 and r["output"] == "mcp-e2e"
    assert r["cwd"] == "/" and r["shell_status"] == "ready" and r["shell_rebuilt"] is False
    assert r["eof"] is True and r["buffer_start_cursor"] == 0
    assert r["truncated_before_cursor"] is False and r["next_cursor"] == 7
    r = await exec_(rt, sid, "pwd; echo $X; false")
    assert r["output"] == "/\n42\n" and r["exit_code"] == 1
    r = await exec_(rt, sid, "while true do echo x; done")
    assert r["status"] == "exited" and r["exit_code"] == 2 and "syntax error" in r["output"]
    r = await exec_(rt, sid, "cat <<'EOF'\nline one\nline two\nEOF")
    assert r["output"] == "line one\nline two\n"  # no prompt, marker or paste noise, \n ends


async def test_fake_markers_and_prompts_do_not_end_the_execution(rt):
    sid = await open_shell(rt)
    fake = r"printf '\036TFBASH_END_0123:0:Lw==\037\n__TFBASH_PROMPT_ab__> \n'; (exit 7)"
    r = await exec_(rt, sid, fake)
    assert r["status"] == "exited" and r["exit_code"] == 7
    assert "TFBASH_END_0123" in r["output"] and "__TFBASH_PROMPT_ab__>" in r["output"]


async def test_yield_then_busy_then_incremental_reads_to_eof(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "printf begin; sleep 0.4; printf end", yield_ms=0)
    assert r["status"] == "running" and r["exit_code"] is None and r["eof"] is False
    e = await err(rt, "shell_exec", {"shell_id": sid, "command": "true"}, "shell_busy")
    assert e["retryable"] is True and e["shell_id"] == sid
    done = await read_to_end(rt, sid, r)
    assert done["output"] == "beginend" and done["status"] == "exited"
    again = await ok(
        rt, "shell_read", {"shell_id": sid, "exec_id": r["exec_id"], "cursor": 0, "max_bytes": 5}
    )
    assert again["output"] == "begin" and again["next_cursor"] == 5 and again["eof"] is False
    e = await err(
        rt, "shell_read", {"shell_id": sid, "exec_id": r["exec_id"], "cursor": 99}, "invalid_cursor"
    )
    assert e["exec_id"] == r["exec_id"]


async def test_interrupt_of_a_command_list_ends_the_execution(rt, tmp_path):
    sid = await open_shell(rt, cwd=str(tmp_path))
    await exec_(rt, sid, "export KEEP=1")
    r = await exec_(rt, sid, "echo start; sleep 30; echo after", yield_ms=300)
    assert r["status"] == "running" and r["output"] == "start\n"
    t0 = time.monotonic()
    s = await ok(
        rt, "shell_signal", {"shell_id": sid, "exec_id": r["exec_id"], "signal": "interrupt"}
    )
    assert s == {
        "shell_id": sid,
        "exec_id": r["exec_id"],
        "status": "delivered",
        "signal": "interrupt",
    }
    done = await read_to_end(rt, sid, r)
    assert time.monotonic() - t0 < 2.0
    assert "after" not in done["output"] and done["status"] == "exited"
    assert done["exit_code"] == 130 and done["shell_status"] == "ready"
    r = await exec_(rt, sid, "pwd; echo $KEEP")
    assert r["output"] == f"{os.path.realpath(tmp_path)}\n1\n"


@pytest.mark.parametrize("sig", ["terminate", "kill"])
async def test_terminate_and_kill_stop_the_whole_command_line(rt, sig):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "trap '' TERM; echo a; sleep 30; echo b", yield_ms=300)
    t0 = time.monotonic()
    await ok(rt, "shell_signal", {"shell_id": sid, "exec_id": r["exec_id"], "signal": sig})
    done = await read_to_end(rt, sid, r)
    assert time.monotonic() - t0 < 2.5
    assert "b" not in done["output"].split() and done["status"] in ("exited", "cancelled")
    assert (await exec_(rt, sid, "echo alive"))["output"] == "alive\n"


async def test_write_feeds_stdin_and_is_rejected_after_the_end(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "read -r v; echo got:$v", yield_ms=200)
    assert r["status"] == "running"
    w = await ok(rt, "shell_write", {"shell_id": sid, "exec_id": r["exec_id"], "text": "héllo\n"})
    assert w == {
        "shell_id": sid,
        "exec_id": r["exec_id"],
        "status": "accepted",
        "accepted_bytes": 7,
    }
    done = await read_to_end(rt, sid, r)
    assert "got:héllo\n" in done["output"] and done["exit_code"] == 0
    await err(
        rt,
        "shell_write",
        {"shell_id": sid, "exec_id": r["exec_id"], "text": "x"},
        "exec_not_active",
    )
    await err(
        rt,
        "shell_signal",
        {"shell_id": sid, "exec_id": r["exec_id"], "signal": "kill"},
        "exec_not_active",
    )
    r = await exec_(rt, sid, "cat", yield_ms=100)
    w = await ok(
        rt, "shell_write", {"shell_id": sid, "exec_id": r["exec_id"], "text": "你好\n\x04"}
    )
    assert w["accepted_bytes"] == 8
    assert (await read_to_end(rt, sid, r))["status"] == "exited"


async def test_timeout_recovers_the_shell_with_cwd_and_env(rt):
    sid = await open_shell(rt)
    await exec_(rt, sid, "cd /tmp; export X=42")
    t0 = time.monotonic()
    r = await exec_(rt, sid, "sleep 10", timeout_ms=500, yield_ms=5000)
    assert time.monotonic() - t0 < 2.0
    assert r["status"] == "timeout" and r["exit_code"] is None and r["shell_status"] == "ready"
    r = await exec_(rt, sid, "pwd; echo $X")
    assert r["output"] == f"{os.path.realpath('/tmp')}\n42\n"


async def test_exit_is_a_shell_error_then_only_close_works(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "exit 3")
    assert r["status"] == "shell_error" and r["exit_code"] is None
    assert r["cwd"] is None and r["shell_status"] == "error"
    lst = await ok(rt, "shell_list", {})
    assert [s["status"] for s in lst["shells"]] == ["error"]
    e = await err(rt, "shell_exec", {"shell_id": sid, "command": "true"}, "shell_unavailable")
    assert e["retryable"] is False
    closed = await ok(rt, "shell_close", {"shell_id": sid})
    assert closed == {"shell_id": sid, "status": "closed", "cleanup_complete": True}
    await err(
        rt, "shell_read", {"shell_id": sid, "exec_id": r["exec_id"], "cursor": 0}, "shell_not_found"
    )


async def test_rejections_use_tfbashs_codes(rt, tmp_path):
    await err(rt, "shell_open", {"cwd": str(tmp_path / "missing")}, "invalid_argument")
    await err(rt, "shell_open", {"cwd": "relative/dir"}, "invalid_argument")
    await err(rt, "shell_open", {"startup_command": "false"}, "shell_start_failed")
    e = await err(
        rt, "shell_exec", {"shell_id": "s_x", "command": "true", "bogus": 1}, "invalid_argument"
    )
    # the original echoes no ids for arguments that failed validation
    assert e == {
        "code": "invalid_argument",
        "message": "bogus: Extra inputs are not permitted",
        "retryable": False,
    }
    await err(
        rt,
        "shell_exec",
        {"shell_id": "s_x", "command": "true", "yield_ms": True},
        "invalid_argument",
    )
    await err(
        rt,
        "shell_exec",
        {"shell_id": "s_x", "command": "true", "yield_ms": 1.0},
        "invalid_argument",
    )
    await err(rt, "shell_exec", {"shell_id": "s_x", "command": "true"}, "shell_not_found")
    await err(rt, "shell_list", {"x": 1}, "invalid_argument")
    a = await open_shell(rt)
    b = await open_shell(rt)
    e = await err(rt, "shell_open", {}, "resource_limit")
    assert e["retryable"] is True
    r = await exec_(rt, a, "true")
    await err(
        rt, "shell_read", {"shell_id": b, "exec_id": r["exec_id"], "cursor": 0}, "exec_not_found"
    )
    await err(
        rt,
        "shell_signal",
        {"shell_id": a, "exec_id": r["exec_id"], "signal": "SIGINT"},
        "invalid_argument",
    )
    e = await err(
        rt,
        "shell_write",
        {"shell_id": a, "exec_id": r["exec_id"], "text": "x", "eof": True},
        "invalid_argument",
    )
    assert "eof" in e["message"]


async def test_list_shows_runtime_and_shells_but_never_env_values(rt):
    sid = await open_shell(
        rt, cwd="/tmp", env={"API_KEY": "very-secret-value"}, startup_command="export S=1"
    )
    r = await exec_(rt, sid, "sleep 5", yield_ms=0)
    lst = await ok(rt, "shell_list", {})
    assert "very-secret-value" not in json.dumps(lst) and "S=1" not in json.dumps(lst)
    assert lst["runtime"]["dialect"] == "bash" and lst["runtime"]["platform"] in ("linux", "macos")
    assert lst["runtime"]["shell_version"] and lst["host"]["mode"] == "standalone"
    (sh,) = lst["shells"]
    assert sh["shell_id"] == sid and sh["status"] == "busy" and sh["active_exec_id"] == r["exec_id"]
    assert sh["last_known_cwd"] == os.path.realpath("/tmp") and sh["created_at_ms"] > 0
    t0 = time.monotonic()
    closed = await ok(rt, "shell_close", {"shell_id": sid})
    assert closed["cleanup_complete"] is True and time.monotonic() - t0 < 1.5
    assert (await ok(rt, "shell_list", {}))["shells"] == []


async def test_overview_resource_markdown(rt):
    assert tfbash_overview_markdown(rt.engine).endswith("- Shells: 0\n\nNo active Shells.")
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "printf 'x%.0s' $(seq 1 700); echo; echo '| `tick` |'")
    md = tfbash_overview_markdown(rt.engine)
    assert md.startswith("# Shell Overview\n\n- Platform: ") and "- Shells: 1" in md
    row = next(line for line in md.splitlines() if line.startswith(f"| `{sid}` |"))
    assert f"| ready | `{r['cwd']}` |" in row and f"| `{r['exec_id']}` | exited | 0 |" in row
    assert f"## `{sid}` — recent output\n\n_Earlier output was truncated._" in md
    body = md.split("```text\n", 1)[1].rsplit("\n```", 1)[0]
    assert len(body) <= 500 and body.endswith("| `tick` |")
    await ok(rt, "shell_close", {"shell_id": sid})
    assert tfbash_overview_markdown(rt.engine).endswith("- Shells: 0\n\nNo active Shells.")


@pytest.mark.parametrize(
    "profiles,winner", [(["tfbash", "conch"], "tfbash"), (["conch", "tfbash"], "conch")]
)
async def test_a_shared_tool_name_resolves_to_the_first_listed_profile(tmp_path, profiles, winner):
    cfg = conch.Config(data_dir=str(tmp_path / "data"), profiles=profiles)
    async with conch.Runtime(cfg) as rt:
        names = [t["name"] for t in rt.tools()]
        assert names.count("shell_open") == 1 and names.count("shell_close") == 1
        assert "shell_exec" in names and "exec" in names
        r = await rt.call_tool("shell_open", {})
        if winner == "tfbash":
            assert r["status"] == "ready" and "dialect" in r
            closed = await rt.call_tool("shell_close", {"shell_id": r["shell_id"]})
            assert closed["status"] == "closed"
        else:  # (conch closes its shells with `signal`: its unlisted shell_close yields)
            assert r["state"] == "ready" and "dialect" not in r
            closed = await rt.call_tool("signal", {"shell_id": r["shell_id"]})
            assert closed["state"] == "closed"


async def test_exec_keeps_the_newest_max_output_bytes_like_the_originals_ring(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "seq 1 5000", max_output_bytes=4096)
    total = len("".join(f"{i}\n" for i in range(1, 5001)))
    assert r["status"] == "exited" and r["eof"] is True and r["truncated_before_cursor"] is True
    assert r["buffer_start_cursor"] == total - 4096 and r["next_cursor"] == total
    assert r["output"].endswith("4999\n5000\n") and len(r["output"]) == 4096
    args = {"shell_id": sid, "exec_id": r["exec_id"]}
    early = await ok(rt, "shell_read", {**args, "cursor": 0, "max_bytes": 8})
    assert early["truncated_before_cursor"] is True
    assert early["output"] == r["output"][:8] and early["next_cursor"] == total - 4096 + 8
    await err(rt, "shell_read", {**args, "cursor": total + 1}, "invalid_cursor")


async def test_a_cursor_inside_a_character_is_invalid(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "printf 'a\u00e9z'")
    args = {"shell_id": sid, "exec_id": r["exec_id"]}
    await err(rt, "shell_read", {**args, "cursor": 2}, "invalid_cursor")
    assert (await ok(rt, "shell_read", {**args, "cursor": 3}))["output"] == "z"


async def test_written_text_is_not_echoed_and_signals_report_bashs_status(rt):
    sid = await open_shell(rt)
    r = await exec_(rt, sid, "read -r v; echo got:$v", yield_ms=300)
    args = {"shell_id": sid, "exec_id": r["exec_id"]}
    assert (await ok(rt, "shell_write", {**args, "text": "hi\n"}))["accepted_bytes"] == 3
    assert (await read_to_end(rt, sid, r))["output"] == "got:hi\n"
    for signal, status in (("interrupt", 130), ("terminate", 143), ("kill", 137)):
        r = await exec_(rt, sid, "sleep 30", yield_ms=200)
        args = {"shell_id": sid, "exec_id": r["exec_id"], "signal": signal}
        await ok(rt, "shell_signal", args)
        end = await read_to_end(rt, sid, r)
        assert end["status"] == "exited" and end["exit_code"] == status, (signal, end)
