"""The dialects' own escape hatches never loosen Conch's fence (docs/spec.md §9a: per-call values
may only tighten): Codex's `sandbox_permissions: require_escalated` and Claude Code's
`dangerouslyDisableSandbox: true` run inside the configured sandbox like any other call."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import conch

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]


def sandboxed(tmp_path: Path, profile: str) -> conch.Config:
    work = tmp_path / "work"
    work.mkdir()
    return conch.Config(
        data_dir=str(tmp_path / "data"),
        default_cwd=str(work),
        profiles=[profile],
        sandbox="read-only",
        network="off",
    )


# what a job escaping its fence would do: write the workspace, reach the network
ESCAPE = (
    "echo pwned > escaped.txt; echo wrote=$?; "
    "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 9), 1)' 2>&1 | tail -1"
)


async def test_codex_require_escalated_stays_in_the_sandbox(tmp_path: Path):
    cfg = sandboxed(tmp_path, "codex")
    async with conch.dialects.openai_tools(cfg) as d:
        for extra in ({}, {"sandbox_permissions": "require_escalated", "justification": "pls"}):
            out = await d.call("exec_command", {"cmd": ESCAPE, "yield_time_ms": 5000, **extra})
            assert "wrote=1" in out.text and "Read-only file system" in out.text, out.text
            assert "Network is unreachable" in out.text or "Errno" in out.text, out.text
    assert not os.path.exists(tmp_path / "work" / "escaped.txt")


async def test_claude_code_dangerously_disable_sandbox_stays_in_the_sandbox(tmp_path: Path):
    cfg = sandboxed(tmp_path, "claude-code")
    async with conch.dialects.anthropic_tools(cfg) as d:
        for extra in ({}, {"dangerouslyDisableSandbox": True}):
            out = await d.call("Bash", {"command": ESCAPE, **extra})
            assert "wrote=1" in out.text and "Read-only file system" in out.text, out.text
            assert "Network is unreachable" in out.text or "Errno" in out.text, out.text
    assert not os.path.exists(tmp_path / "work" / "escaped.txt")
