"""``conch install claude-code`` into a fresh CLAUDE_CONFIG_DIR, then the real Claude Code
(pinned) starts Conch from what install wrote — its user-scope servers are read from
``$CLAUDE_CONFIG_DIR/.claude.json`` — lists Conch's tools and calls one. Claude Code rewrites
that file as it runs; install still knows its entry afterwards and removes only that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from claude_host import CONCH
from fake_messages import Say, ToolUse

pytestmark = pytest.mark.slow


def conch_install(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conch", "install", *args],
        env={**os.environ, "CLAUDE_CONFIG_DIR": str(config)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_claude_code_runs_conch_from_what_conch_install_wrote(claude, tmp_path: Path):
    data = tmp_path / "data"
    configs: list[Path] = []

    def install(config: Path) -> None:
        r = conch_install("claude-code", "--data-dir", str(data), config=config)
        assert r.returncode == 0, r.stderr
        entry = {"type": "stdio", "command": str(CONCH), "args": ["serve", "--data-dir", str(data)]}
        assert json.loads((config / ".claude.json").read_text()) == {"mcpServers": {"conch": entry}}
        configs.append(config)

    run = claude(
        [ToolUse("mcp__conch__exec", {"command": "echo installed"}), Say("done")], prepare=install
    )
    (init,) = [e for e in run.events if e.get("subtype") == "init"]
    assert {"mcp__conch__exec", "mcp__conch__read", "mcp__conch__changes"} <= set(init["tools"])
    block = run.fake.tool_result(0)
    assert block is not None and not block.get("is_error"), block
    result = json.loads(block["content"])
    assert (result["state"], result["exit_code"], result["output"]) == ("exited", 0, "installed\n")
    assert any(p.is_file() for p in data.rglob("*")), list(data.rglob("*"))

    # Claude Code has written its own state into the file; the entry is still install's
    (config,) = configs
    written = json.loads((config / ".claude.json").read_text())
    assert len(written) > 1, written
    again = conch_install("claude-code", "--data-dir", str(data), config=config)
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout + again.stderr
    removed = conch_install("--remove", "claude-code", "--data-dir", str(data), config=config)
    assert removed.returncode == 0, removed.stderr
    left = json.loads((config / ".claude.json").read_text())
    assert "conch" not in left.get("mcpServers", {})
    assert {k: v for k, v in left.items() if k != "mcpServers"} == {
        k: v for k, v in written.items() if k != "mcpServers"
    }
