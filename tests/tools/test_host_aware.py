"""Issue 20.2: no job is lost to a host's timeout, no result is cut by the host, and the
default profile fits a host's eight-tool view (conch/tools/hosts.py, tools/profiles/conch.py).

The MCP tests speak raw JSON-RPC to a real `conch serve` over stdio, as a host would: its
``clientInfo`` names the host, and a ``notifications/cancelled`` carries the host's reason."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import conch
from conch.tools.call import call_tool_full, text_block
from conch.tools.context import ToolContext
from conch.tools.hosts import IN_PROCESS, UNKNOWN_HOST, Horizon, facts_for, horizon, horizon_ms
from conch.tools.hosts import is_host_timeout as host_timeout

pytestmark = pytest.mark.anyio


def test_the_horizon_ends_before_each_hosts_timeout() -> None:
    codex = facts_for("codex-mcp-client", "0.171.0")
    assert codex.timeout_ms == 300_000  # measured: Codex cuts a call at 300.0 s
    assert horizon_ms(codex) == 290_000  # a tenth of the timeout, at most 10 s, before it
    assert horizon_ms(facts_for("claude-code", "2.1.197")) is None  # no timeout by default
    assert facts_for("someone-else") is UNKNOWN_HOST and horizon_ms(UNKNOWN_HOST) == 54_000
    assert horizon_ms(IN_PROCESS) is None
    assert horizon_ms(IN_PROCESS, 5000) == 4000  # host_timeout_ms wins
    assert horizon_ms(codex, 2000) == 1000
    assert horizon_ms(facts_for("claude-code"), 120_000) == 110_000


@pytest.mark.parametrize(
    ("name", "version", "timeout_ms"),
    [
        ("codex-mcp-client", "0.171.0", 300_000),
        ("codex-mcp-client", "0.200.1", 300_000),
        # an older Codex: before 300 s its default was 120 s, and 60 s before that (the
        # version that changed it is not known here): the shortest
        ("codex-mcp-client", "0.92.0", 60_000),
        ("codex-mcp-client", None, 60_000),
        ("claude-code", "2.1.197", None),
        ("claude-ai", "0.1.0", 60_000),
        ("Antigravity CLI", "1.1.12", 180_000),
        ("opencode", "1.0", 60_000),
        ("gemini-cli-mcp-client", "0.0.1", 600_000),
        ("goose", "1.33.1", 300_000),
        ("Visual Studio Code", "1.110.0", None),
        ("Visual-Studio-Code", "1.110.0", None),
        ("a-host-nobody-knows", "1.0", 60_000),
        (None, None, 60_000),
    ],
)
def test_the_known_host_table_by_client_name_and_version(
    name: str | None, version: str | None, timeout_ms: int | None
) -> None:
    assert facts_for(name, version).timeout_ms == timeout_ms


def test_the_setting_wins_over_the_table_and_the_table_over_the_default() -> None:
    codex = facts_for("codex-mcp-client", "0.171.0")
    assert horizon(codex, 660_000) == Horizon(650_000, 660_000, "setting")
    assert horizon(codex) == Horizon(290_000, 300_000, "known host")
    assert horizon(facts_for("who-knows")) == Horizon(54_000, 60_000, "default")
    assert horizon(facts_for("claude-code")) == Horizon(None, None, "known host")
    assert horizon(None) == Horizon(None, None, "none")
    assert horizon(None, 5000) == Horizon(4000, 5000, "setting")


def test_a_cut_the_host_was_seen_to_make_wins_when_it_is_shorter() -> None:
    """A host that cut a call sooner than Conch knew (a tool_timeout_sec it was not told of)
    bounds every later wait of that client; a later cut never lengthens it."""
    import dataclasses

    codex = facts_for("codex-mcp-client", "0.171.0")
    cut = dataclasses.replace(codex, learned_ms=5_000)
    assert horizon(cut) == Horizon(4_000, 5_000, "learned")
    assert horizon(cut, 700_000) == Horizon(4_000, 5_000, "learned")  # over the setting too
    longer = dataclasses.replace(codex, learned_ms=400_000)
    assert horizon(longer) == Horizon(290_000, 300_000, "known host")
    claude = dataclasses.replace(facts_for("claude-code"), learned_ms=120_000)
    assert horizon(claude) == Horizon(110_000, 120_000, "learned")


@pytest.mark.parametrize(
    ("reason", "elapsed_ms", "expected"),
    [
        ("McpError: MCP error -32001: Request timed out", 100, True),
        ("timed out awaiting tools/call after 5s", 5000, True),
        ("request timeout", 10, True),
        # Codex's one wording for its timeout and a person's interrupt (measured): the job lives
        ("MCP request cancelled by caller", 100, True),
        ("MCP request cancelled by caller", 5_000, True),
        ("User aborted", 100, False),
        ("AbortError: user-cancel", 100, False),
        ("AbortError: This operation was aborted", 100, False),
        ("caller cancelled", 100, False),  # the Python SDK's (its timeouts say "timed out")
        (None, 100, False),
        (None, 290_000, True),  # no reason, but the host's own timeout (nearly) ran out
    ],
)
def test_a_cancel_is_the_hosts_timeout_by_its_reason_or_its_timing(
    reason: str | None, elapsed_ms: float, expected: bool
) -> None:
    assert host_timeout(reason, elapsed_ms, facts_for("codex-mcp-client", "0.171.0"), 0) is expected


async def test_the_default_profile_has_eight_tools_and_closes_shells_by_signal(tmp_path) -> None:
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        names = [t["name"] for t in rt.tools()]
        assert len(names) <= 8 and "shell_close" not in names and "info" not in names, names
        listed = {"exec", "read", "write", "signal", "list", "shell_open", "search", "changes"}
        assert listed == set(names)
        sh = await rt.call_tool("shell_open", {})
        r = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "sleep 30 &"})
        assert r["state"] == "exited"
        closed = await rt.call_tool("signal", {"shell_id": sh["shell_id"]})
        assert closed == {"shell_id": sh["shell_id"], "state": "closed"}, closed
        gone = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "true"})
        assert gone["error"]["code"] == "not_found"
        for bad in (
            {},
            {"shell_id": "s_x", "job_id": "j_x"},
            {"shell_id": sh["shell_id"], "signal": "interrupt"},
        ):
            err = await rt.call_tool("signal", bad)
            assert err["error"]["code"] == "invalid_argument", (bad, err)
        # a client of the nine-tool catalogue still closes a shell by name
        sh = await rt.call_tool("shell_open", {})
        assert (await rt.call_tool("shell_close", {"shell_id": sh["shell_id"]}))[
            "state"
        ] == "closed"


async def test_every_wait_ends_before_the_configured_host_timeout(tmp_path) -> None:
    cfg = conch.Config(
        data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path), host_timeout_ms=2500
    )
    async with conch.Runtime(cfg) as rt:
        t = time.monotonic()
        r = await rt.call_tool("exec", {"command": "sleep 4; echo done", "yield_ms": 60_000})
        assert r["state"] == "running" and time.monotonic() - t < 2.2, r
        t = time.monotonic()
        r = await rt.call_tool("read", {"job_id": r["job_id"], "wait_ms": 60_000, "until": "exit"})
        assert time.monotonic() - t < 2.2
        r = await rt.call_tool("read", {"job_id": r["job_id"], "wait_ms": 60_000, "until": "exit"})
        assert (r["state"], r["output"]) == ("exited", "done\n"), r


async def test_a_wait_may_last_ten_minutes_but_ends_at_the_horizon_as_no_error(tmp_path) -> None:
    cfg = conch.Config(
        data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path), host_timeout_ms=2500
    )
    async with conch.Runtime(cfg) as rt:
        t = time.monotonic()
        out = await call_tool_full(
            rt.engine, rt.registry, "exec", {"command": "sleep 30", "yield_ms": 600_000}
        )
        r = out.result
        assert r["state"] == "running" and 1.4 < time.monotonic() - t < 2.2, r
        assert r["note"] == "still running — not an error; read to wait on", r
        text = text_block(rt.registry, "exec", out)
        assert f"still running — not an error; read {r['job_id']} to wait on" in text, text
        assert "error" not in text.replace("not an error", ""), text
        # a read whose wait the horizon cut says the same; one that waited as asked does not
        cut = await rt.call_tool("read", {"job_id": r["job_id"], "wait_ms": 600_000})
        assert cut["state"] == "running" and cut["note"] == r["note"], cut
        asked = await rt.call_tool("read", {"job_id": r["job_id"], "wait_ms": 200})
        assert asked["state"] == "running" and "note" not in asked, asked
        await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})
        # a wait past ten minutes is refused, before anything runs
        over = await rt.call_tool("exec", {"command": "true", "yield_ms": 600_001})
        assert over["error"]["code"] == "invalid_argument", over


async def test_an_exec_that_needs_no_wait_carries_no_note(rt) -> None:
    r = await rt.call_tool("exec", {"command": "sleep 30", "yield_ms": 0})
    assert r["state"] == "running" and "note" not in r, r
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})
    done = await rt.call_tool("exec", {"command": "echo hi"})
    assert "note" not in done


async def test_info_says_profiles_transports_and_the_callers_horizon(tmp_path) -> None:
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        typed = await rt.info()
        tool = await rt.call_tool("info", {})
        assert tool["profiles"] == typed["profiles"] == ["conch"]
        assert tool["transports"] == typed["transports"] and "stdio" in tool["transports"]
        assert tool["host"] == {
            "name": "in-process",
            "timeout_ms": None,
            "horizon_ms": None,
            "source": "none",
        }
        codex = ToolContext(host=facts_for("codex-mcp-client", "0.171.0"))
        seen = (await call_tool_full(rt.engine, rt.registry, "info", {}, codex)).result
        assert seen["host"] == {
            "name": "Codex",
            "timeout_ms": 300_000,
            "horizon_ms": 290_000,
            "source": "known host",
        }


# -- over MCP, as a host -----------------------------------------------------------------------

CONCH = Path(__file__).resolve().parents[2] / "bin" / "conch"


class Host:
    """A minimal MCP host on a real `conch serve` over stdio (raw JSON-RPC)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 10
        self.answers: dict[int, dict[str, Any]] = {}

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n")
        await self.proc.stdin.drain()

    async def answer(self, rid: int, limit_s: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + limit_s
        while rid not in self.answers:
            line = await asyncio.wait_for(self.proc.stdout.readline(), deadline - time.monotonic())
            assert line, "the server ended"
            msg = json.loads(line)
            if "id" in msg and ("result" in msg or "error" in msg):
                self.answers[msg["id"]] = msg
        return self.answers.pop(rid)

    async def call(self, name: str, arguments: dict[str, Any]) -> int:
        self.next_id += 1
        params = {"name": name, "arguments": arguments}
        await self.send({"id": self.next_id, "method": "tools/call", "params": params})
        return self.next_id

    async def result(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        msg = await self.answer(await self.call(name, arguments))
        return msg["result"]["structuredContent"]


@pytest.fixture
async def host(request, tmp_path) -> AsyncIterator[Host]:
    client = getattr(request, "param", "codex-mcp-client")
    env = {**os.environ, "CONCH_DATA_DIR": str(tmp_path / "d")}
    proc = await asyncio.create_subprocess_exec(
        str(CONCH),
        "serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    h = Host(proc)
    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0.171.0"},
        }
        await h.send({"id": 1, "method": "initialize", "params": hello})
        await h.answer(1, limit_s=60)
        await h.send({"method": "notifications/initialized"})
        yield h
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


async def _until_exit(host: Host, job_id: str) -> dict[str, Any]:
    return await host.result("read", {"job_id": job_id, "wait_ms": 20_000, "until": "exit"})


@pytest.mark.parametrize(
    "reason",
    ["timed out awaiting tools/call after 5s", "McpError: MCP error -32001: Request timed out"],
)
async def test_a_cancel_for_the_hosts_timeout_leaves_the_job_running(host, reason) -> None:
    rid = await host.call("exec", {"command": "sleep 2; echo survived", "yield_ms": 10_000})
    await asyncio.sleep(0.8)
    listed = await host.result("list", {})
    job_id = listed["jobs"][-1]["job_id"]
    await host.send(
        {"method": "notifications/cancelled", "params": {"requestId": rid, "reason": reason}}
    )
    await asyncio.sleep(0.8)
    listed = await host.result("list", {})
    assert next(j for j in listed["jobs"] if j["job_id"] == job_id)["state"] == "running", listed
    r = await _until_exit(host, job_id)
    assert (r["state"], r["output"]) == ("exited", "survived\n"), r


@pytest.mark.parametrize(
    ("host", "reason"),
    [("codex-mcp-client", "User aborted"), ("claude-code", "AbortError: user-cancel")],
    indirect=["host"],
)
async def test_a_persons_cancel_still_stops_the_job(host, reason) -> None:
    rid = await host.call("exec", {"command": "sleep 20; echo never", "yield_ms": 10_000})
    await asyncio.sleep(0.8)
    job_id = (await host.result("list", {}))["jobs"][-1]["job_id"]
    cancel = {"requestId": rid, "reason": reason}
    await host.send({"method": "notifications/cancelled", "params": cancel})
    r = await _until_exit(host, job_id)
    assert r["state"] == "cancelled" and "never" not in r["output"], r
    assert "detached" not in r


async def test_a_cancel_codex_words_alike_for_its_timeout_and_a_person_detaches_the_job(
    host,
) -> None:
    """Codex sends one reason for its own timeout and for a person's interrupt (measured),
    so its cancel never stops a job: the job runs on, and the session's next result says so
    once, in both views, with how to stop it."""
    rid = await host.call("exec", {"command": "sleep 1.5; echo late", "yield_ms": 10_000})
    await asyncio.sleep(0.5)
    cancel = {"requestId": rid, "reason": "MCP request cancelled by caller"}
    await host.send({"method": "notifications/cancelled", "params": cancel})
    await asyncio.sleep(0.7)
    answer = await host.answer(await host.call("list", {}))
    listed = answer["result"]["structuredContent"]
    [job] = listed["jobs"]
    assert job["state"] == "running", listed
    j = job["job_id"]
    assert listed["detached"] == (
        f"{j} kept running after the host stopped waiting for the call that started it (not an "
        f"error): read {j} to follow it, signal {j} to stop it."
    )
    assert answer["result"]["content"][0]["text"].startswith(f"[{listed['detached']}]\n")
    r = await _until_exit(host, j)
    assert (r["state"], r["output"]) == ("exited", "late\n") and "detached" not in r, r


async def test_codex_gets_windows_below_its_cut_with_the_marker_whole(host) -> None:
    r = await host.result("exec", {"command": "seq 1 100000"})
    assert r["truncated"] is True and len(r["output"].encode()) <= 8192 + 200, len(r["output"])
    assert "bytes omitted: read cursor" in r["output"]
    assert len(json.dumps(r, separators=(",", ":"))) < 12_000  # Codex's cut, fallback model
    w = await host.result("read", {"job_id": r["job_id"], "cursor": 0, "max_bytes": 400_000})
    assert len(json.dumps(w, separators=(",", ":"))) < 12_000 and w["next_cursor"] > 0, len(
        json.dumps(w)
    )


async def test_write_and_signal_windows_stay_below_codexs_cut(host) -> None:
    cat = await host.result("exec", {"command": "cat", "stdin_open": True, "yield_ms": 0})
    w = await host.result(
        "write", {"job_id": cat["job_id"], "text": "y" * 30_000 + "\n", "yield_ms": 2000}
    )
    assert len(json.dumps(w, separators=(",", ":"))) < 12_000, len(json.dumps(w))
    assert w["truncated"] is True and len(w["output"]) <= 8192  # the rest: read from next_cursor
    # a job that prints a lot as it is stopped: the signal's window is cut the same way
    loud = await host.result(
        "exec",
        {"command": "trap 'seq 1 50000; exit 1' TERM; sleep 30 & wait", "yield_ms": 300},
    )
    s = await host.result("signal", {"job_id": loud["job_id"], "wait_ms": 5000})
    assert len(json.dumps(s, separators=(",", ":"))) < 12_000, len(json.dumps(s))
    await host.result("signal", {"job_id": cat["job_id"], "signal": "kill"})


@pytest.mark.parametrize("host", ["claude-code"], indirect=True)
async def test_claude_code_keeps_the_long_waits_it_allows(host) -> None:
    t = time.monotonic()
    r = await host.result("exec", {"command": "sleep 1.5; echo done", "yield_ms": 60_000})
    assert (r["state"], r["output"]) == ("exited", "done\n") and time.monotonic() - t > 1.4


def _properties(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, prop in schema.get("properties", {}).items():
        out.append((path + name, prop))
        out += _properties(prop, path + name + ".")
    return out


def test_descriptions_carry_the_limits_and_defaults_codex_strips() -> None:
    """Codex drops minimum/maximum/default from input schemas: whatever the model must know of
    a number's range and default is said in the description too."""
    from conch.tools.profiles.conch import conch_tools

    missing = []
    for tool in conch_tools():
        for name, prop in _properties(tool.input_schema):
            text = prop.get("description", "")
            if not text:
                continue  # (a nested value whose parent describes it)
            if "maximum" in prop and str(prop["maximum"]) not in text:
                missing.append(f"{tool.name}.{name}: maximum {prop['maximum']}")
            if "default" in prop:
                default = json.dumps(prop["default"]).strip('"')
                if f"Default {default}" not in text:
                    missing.append(f"{tool.name}.{name}: default {default}")
    assert missing == []


async def test_the_opening_of_the_instructions_says_what_conch_is_for(tmp_path) -> None:
    from conch.mcp.server import ConchMCP

    deep = tmp_path / ("a-long-project-directory-name" * 4)
    deep.mkdir()
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(deep))
    async with conch.Runtime(cfg) as rt:
        text = ConchMCP(rt).server.instructions or ""
    head = text[:250]
    for word in ("shell", "exec", "read", "write", "signal", "shell_open", "search"):
        assert word in head, head


# what Codex shows of an MCP server's instructions while its tools are deferred: the first 247
# characters and "..." (measured: tests/hosts/codex/golden/tools.json)
CODEX_DEFERRED_CHARS = 247


@pytest.mark.parametrize("profile", ["conch", "codex", "claude-code"])
async def test_the_call_sheet_opens_the_instructions_and_names_real_arguments(
    tmp_path, profile
) -> None:
    """Every ``tool{a,b|c,...}`` of the call sheet (``list`` is left out) is a tool of the
    profile and every name in
    its braces a property of that tool's schema (an enum or pattern after ``:`` aside), all of
    it inside what Codex shows before the tools are loaded."""
    from conch.mcp.server import ConchMCP
    from conch.tools import registry
    from conch.tools.profiles._common import call_sheet_arguments

    cfg = conch.Config(data_dir=str(tmp_path / "d"), profiles=[profile])
    async with conch.Runtime(cfg) as rt:
        text = ConchMCP(rt).server.instructions or ""
    sheet = registry.profile(profile).call_sheet
    assert sheet and sheet in text[:CODEX_DEFERRED_CHARS], text[:CODEX_DEFERRED_CHARS]
    tools = {t.name: t for t in registry.profile(profile).tools()}
    calls = call_sheet_arguments(sheet)
    assert calls and set(calls) <= set(tools), calls
    for name, args in calls.items():
        props = tools[name].input_schema.get("properties", {})
        for arg in args:
            assert arg in props, f"{name}: {arg} is not an argument of {name}"
