"""Every profile on the fleet: its tools give the results they give locally (their own ids and
handles followed to the node that gave them out, their listings and resources merged from
every node), or the profile is refused, by name, before anything starts."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from fleet_cluster import LocalCluster

from conch import Config, ConfigError
from conch.fleet import FleetBackend
from conch.runtime import Runtime

pytestmark = [pytest.mark.anyio]
SESSION = re.compile(r"Process running with session ID ([0-9]+)\n")


def both(cluster: LocalCluster, tmp_path: Any, profile: str) -> tuple[Runtime, Runtime]:
    fleet = Runtime(
        Config(
            fleet="ray",
            ray_address=cluster.address,
            data_dir=str(tmp_path / "fleet"),
            profiles=[profile],
        )
    )
    local = Runtime(Config(data_dir=str(tmp_path / "local"), profiles=[profile]))
    return fleet, local


def tags(fleet: Runtime) -> set[str]:
    assert isinstance(fleet.backend, FleetBackend)
    return {n.tag for n in fleet.backend.table.nodes.values()}


async def test_ai_device_bash_get_follows_a_background_job_to_its_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    fleet, local = both(cluster, tmp_path, "ai-device-bash")
    async with fleet, local:
        # 1 s for `early` to arrive before the call backgrounds: room for a loaded machine
        command = {"command": "echo early; sleep 2; echo late", "timeout": 1}
        for rt in (fleet, local):
            handles = []
            for _ in range(3):  # one on each node (the least loaded takes the next)
                r = await rt.call_tool("bash", command)
                assert r["code"] == "BACKGROUND" and r["output"] == "early\n", r
                handles.append(r["background_pid"])
            for handle in handles:
                r = await rt.call_tool("get", {"pid": handle, "timeout": 10})
                assert r["code"] == "OK" and r["output"] == "early\nlate\n", r
                assert r["background_pid"] is None and r["tool_mode"] == "bash"
            unknown = await rt.call_tool("get", {"pid": 12_345_678})
            assert unknown["code"] == "NOT_RUNNING" and "12345678" in unknown["message"]


async def test_codex_sessions_are_followed_to_their_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    fleet, local = both(cluster, tmp_path, "codex")
    async with fleet, local:
        cmd = {"cmd": "echo at-$CONCH_NODE_ID; sleep 1; echo late-$CONCH_NODE_ID"}
        for rt in (fleet, local):
            sessions = []
            for _ in range(3):
                r = await rt.call_tool("exec_command", {**cmd, "yield_time_ms": 300})
                m = SESSION.search(r["text"])
                assert m is not None, r
                sessions.append((int(m.group(1)), r["text"].rsplit("Output:\n", 1)[1]))
            assert len({sid for sid, _ in sessions}) == 3
            started_on = []
            for sid, first in sessions:
                r = await rt.call_tool(
                    "write_stdin", {"session_id": sid, "chars": "", "yield_time_ms": 5000}
                )
                assert "Process exited with code 0" in r["text"], r
                out = first + r["text"].rsplit("Output:\n", 1)[1]
                at, late = out.split()
                # the session's own process answered, on the node it started on
                assert at.startswith("at-") and late == "late-" + at[3:], out
                started_on.append(at)
            if rt is fleet:  # three nodes, each answering for its own sessions
                assert len(set(started_on)) == 3
            unknown = await rt.call_tool("write_stdin", {"session_id": 99_999, "chars": ""})
            assert unknown.get("error") and "99999" in unknown["text"]


async def test_tfbash_shells_list_and_overview_cover_every_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    fleet, local = both(cluster, tmp_path, "tfbash")
    async with fleet, local:
        placed: Counter[str] = Counter()
        for rt in (fleet, local):
            opened = [(await rt.call_tool("shell_open", {}))["shell_id"] for _ in range(3)]
            if rt is fleet:
                placed.update(sid.rpartition(".")[2] for sid in opened)
            for sid in opened:
                r = await rt.call_tool("shell_exec", {"shell_id": sid, "command": "echo hi-$PPID"})
                assert r["exit_code"] == 0 and r["output"].startswith("hi-"), r
            listed = await rt.call_tool("shell_list", {})
            assert sorted(s["shell_id"] for s in listed["shells"]) == sorted(opened)
            assert "runtime" in listed  # (one node's: the same Python and shell on each)
            (resource,) = await rt.list_resources(seed_only=True)
            _, text = await rt.read_resource(resource["uri"], seed_only=True)
            assert all(sid in text for sid in opened), text
            for sid in opened:
                await rt.call_tool("shell_close", {"shell_id": sid})
        assert set(placed) == tags(fleet)  # the fleet's shells went to three nodes


async def test_bash_mcp_results_match_local(cluster: LocalCluster, tmp_path: Any) -> None:
    fleet, local = both(cluster, tmp_path, "bash-mcp")
    async with fleet, local:
        results = []
        for rt in (fleet, local):
            r = await rt.call_tool("bash.exec", {"command": "printf 'a\\nb\\n'", "wait_ms": 5000})
            results.append({k: v for k, v in r.items() if k in ("success", "stdout", "exit_code")})
        assert results[0] == results[1]


async def test_claude_code_is_refused_on_a_fleet_by_name(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="the claude-code profile is not served on a fleet"):
        Runtime(Config(fleet="ray", profiles=["claude-code"]))
    served = subprocess.run(
        [sys.executable, "-m", "conch", "serve", "--fleet", "ray", "--profiles", "claude-code"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert served.returncode != 0
    assert "claude-code profile is not served on a fleet" in served.stderr
