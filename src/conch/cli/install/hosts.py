"""The MCP hosts ``conch install`` knows: where each keeps its MCP servers, in what shape, and
how long it lets one tool call last.

Each host's entry starts this installation's ``conch serve`` with ``--host-timeout-ms N``, N the
call timeout the host will apply with this entry (the server ends every wait before it, less
its own margin). Where the host has a key for that timeout, the entry sets it to
``LONG_WAIT_S`` — a 10-minute wait (Conch's longest) plus room for that margin — and keeps a
larger value the user set; where the host has a hard limit and no key, N is that limit; where
it has no limit (Claude Code, VS Code) or none is known (Cursor), see each entry below. The
formats and limits come from each host's own documentation (the URL with each) and from
/work/shared/reference (measured for Codex 0.171 and Claude Code 2.1.197).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = "conch"
# a 600 s wait (yield_ms / wait_ms at most) ends before a 700 s host timeout with the server's
# margin taken off (10 %, at most 100 s here)
LONG_WAIT_S = 700
LONG_WAIT_MS = LONG_WAIT_S * 1000
# Codex waits 10 s for a server to start by default; bin/conch may set up its environment first
STARTUP_S = 60


@dataclass(frozen=True)
class Places:
    """Where config files are: the environment, home, working directory and platform."""

    environ: Mapping[str, str]
    home: Path
    cwd: Path
    platform: str = sys.platform

    @classmethod
    def here(cls) -> Places:
        return cls(os.environ, Path.home(), Path.cwd(), sys.platform)

    def xdg_config(self) -> Path:
        return Path(self.environ.get("XDG_CONFIG_HOME") or self.home / ".config")

    def app_support(self) -> Path:
        return self.home / "Library" / "Application Support"


@dataclass(frozen=True)
class Built:
    """An entry and the ``--host-timeout-ms`` it gives the server (None: not given)."""

    entry: dict[str, Any]
    host_timeout_ms: int | None


def _number(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _at_least(existing: Mapping[str, Any] | None, key: str, ours: float) -> Any:
    theirs = _number((existing or {}).get(key))
    return theirs if theirs is not None and theirs > ours else ours


def _args(serve: list[str], timeout_ms: float | None) -> list[str]:
    return serve if timeout_ms is None else [*serve, "--host-timeout-ms", str(int(timeout_ms))]


Builder = Callable[[list[str], list[str], "Mapping[str, Any] | None"], Built]


@dataclass(frozen=True)
class Host:
    name: str
    label: str
    fmt: str  # "toml", "json" or "yaml"
    docs: str
    container: tuple[str, ...]
    user: Callable[[Places], Path]
    project: Callable[[Places], Path] | None
    build: Builder  # (launcher argv, serve argv, the entry there now) -> the entry to write
    timeout_note: str

    def shape(self, data: Mapping[str, Any]) -> tuple[tuple[str, ...], Builder]:
        """Where the entry goes in this file and how it is built (opencode 2's shape differs
        from opencode 1's)."""
        if self.name == "opencode" and _opencode_v2(data):
            return ("mcp", "servers"), _opencode2
        return self.container, self.build

    def path(self, scope: str, places: Places) -> Path:
        if scope == "project":
            if self.project is None:
                raise ValueError(f"{self.label} has no project-scope MCP config; use --scope user")
            return self.project(places)
        return self.user(places)


# -- Codex -----------------------------------------------------------------------------------


def _codex(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    timeout_s = _at_least(existing, "tool_timeout_sec", LONG_WAIT_S)
    entry = {
        "command": launcher[0],
        "args": [*launcher[1:], *_args(serve, timeout_s * 1000)],
        # without it Codex's first turns go out before Conch's tools are there
        "required": True,
        "startup_timeout_sec": STARTUP_S,
        "tool_timeout_sec": timeout_s,
    }
    return Built(entry, int(timeout_s * 1000))


def _codex_home(p: Places) -> Path:
    return Path(p.environ.get("CODEX_HOME") or p.home / ".codex") / "config.toml"


# -- Claude Code, Claude Desktop -------------------------------------------------------------


def _claude_code(
    launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None
) -> Built:
    # no per-call limit by default: Conch's own table knows Claude Code; a "timeout" the user
    # set is a hard limit, kept and told to the server
    timeout = _number((existing or {}).get("timeout"))
    entry = {
        "type": "stdio",
        "command": launcher[0],
        "args": [*launcher[1:], *_args(serve, timeout)],
    }
    return Built(entry, None if timeout is None else int(timeout))


def _claude_json(p: Places) -> Path:
    config_dir = p.environ.get("CLAUDE_CONFIG_DIR")
    return Path(config_dir) / ".claude.json" if config_dir else p.home / ".claude.json"


def _command_args(timeout_ms: int | None) -> Builder:
    def build(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
        entry = {"command": launcher[0], "args": [*launcher[1:], *_args(serve, timeout_ms)]}
        return Built(entry, timeout_ms)

    return build


def _desktop(p: Places) -> Path:
    base = p.app_support() if p.platform == "darwin" else p.xdg_config()
    return base / "Claude" / "claude_desktop_config.json"


# -- VS Code, Cursor ---------------------------------------------------------------------------


def _vscode(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    # VS Code sets no limit on a call; the server learns it may wait its longest
    entry = {
        "type": "stdio",
        "command": launcher[0],
        "args": [*launcher[1:], *_args(serve, LONG_WAIT_MS)],
    }
    return Built(entry, LONG_WAIT_MS)


def _vscode_user(p: Places) -> Path:
    base = p.app_support() if p.platform == "darwin" else p.xdg_config()
    return base / "Code" / "User" / "mcp.json"


# -- Gemini CLI, Antigravity -----------------------------------------------------------------


def _gemini(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    timeout = _at_least(existing, "timeout", LONG_WAIT_MS)
    entry = {
        "command": launcher[0],
        "args": [*launcher[1:], *_args(serve, timeout)],
        "timeout": timeout,
    }
    return Built(entry, int(timeout))


# -- Goose -------------------------------------------------------------------------------------


def _goose(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    timeout_s = _at_least(existing, "timeout", LONG_WAIT_S)
    entry = {
        "name": NAME,
        "type": "stdio",
        "enabled": True,
        "cmd": launcher[0],
        "args": [*launcher[1:], *_args(serve, timeout_s * 1000)],
        "envs": {},
        "env_keys": [],
        "timeout": timeout_s,
    }
    return Built(entry, int(timeout_s * 1000))


# -- opencode --------------------------------------------------------------------------------


def _opencode_v2(data: Mapping[str, Any]) -> bool:
    """opencode 2's shape: servers under ``mcp.servers`` (opencode 1 reads each name under
    ``mcp`` and would take ``servers`` for a server)."""
    mcp = data.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    return isinstance(servers, dict) and "type" not in servers


# opencode 1: its `timeout` is for listing the tools only; a call gets the MCP SDK's 60 s, which
# progress notifications extend only in releases since mid-2026
OPENCODE_V1_MS = 60_000


def _opencode(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    command = [*launcher, *_args(serve, OPENCODE_V1_MS)]
    return Built({"type": "local", "command": command, "enabled": True}, OPENCODE_V1_MS)


def _opencode2(launcher: list[str], serve: list[str], existing: Mapping[str, Any] | None) -> Built:
    old = (existing or {}).get("timeout")
    old = old if isinstance(old, dict) else {}
    request = _at_least(old, "request", LONG_WAIT_MS)
    entry = {
        "type": "local",
        "command": [*launcher, *_args(serve, request)],
        "timeout": {**old, "request": request},
    }
    return Built(entry, int(request))


def _opencode_file(directory: Path) -> Path:
    """``opencode.json``, or ``opencode.jsonc`` where only that one exists."""
    json_file, jsonc = directory / "opencode.json", directory / "opencode.jsonc"
    return jsonc if jsonc.exists() and not json_file.exists() else json_file


HOSTS: dict[str, Host] = {
    h.name: h
    for h in (
        Host(
            "codex",
            "Codex",
            "toml",
            "https://github.com/openai/codex/blob/main/docs/config.md#mcp-integration",
            ("mcp_servers",),
            _codex_home,
            lambda p: p.cwd / ".codex" / "config.toml",
            _codex,
            f"tool_timeout_sec = {LONG_WAIT_S}; Codex's own default is 300 s",
        ),
        Host(
            "claude-code",
            "Claude Code",
            "json",
            "https://docs.anthropic.com/en/docs/claude-code/mcp",
            ("mcpServers",),
            _claude_json,
            lambda p: p.cwd / ".mcp.json",
            _claude_code,
            'no per-call limit by default; a per-server "timeout" you set is kept',
        ),
        Host(
            "claude-desktop",
            "Claude Desktop",
            "json",
            "https://modelcontextprotocol.io/quickstart/user",
            ("mcpServers",),
            _desktop,
            None,
            _command_args(60_000),
            "Claude Desktop ends a call after about 60 s and has no key to raise it",
        ),
        Host(
            "vscode",
            "VS Code",
            "json",
            "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
            ("servers",),
            _vscode_user,
            lambda p: p.cwd / ".vscode" / "mcp.json",
            _vscode,
            "VS Code sets no limit on a call",
        ),
        Host(
            "cursor",
            "Cursor",
            "json",
            "https://cursor.com/docs/mcp",
            ("mcpServers",),
            lambda p: p.home / ".cursor" / "mcp.json",
            lambda p: p.cwd / ".cursor" / "mcp.json",
            _command_args(None),
            "no documented limit; Conch treats Cursor as a host it does not know",
        ),
        Host(
            "gemini",
            "Gemini CLI",
            "json",
            "https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md",
            ("mcpServers",),
            lambda p: p.home / ".gemini" / "settings.json",
            lambda p: p.cwd / ".gemini" / "settings.json",
            _gemini,
            f"timeout = {LONG_WAIT_MS} ms; Gemini CLI's own default is 600000",
        ),
        Host(
            "antigravity",
            "Antigravity CLI",
            "json",
            "https://antigravity.google/docs/cli/mcp/",
            ("mcpServers",),
            lambda p: p.home / ".gemini" / "config" / "mcp_config.json",
            lambda p: p.cwd / ".agents" / "mcp_config.json",
            _command_args(180_000),
            "Antigravity CLI ends a call after about 180 s and has no key to raise it",
        ),
        Host(
            "goose",
            "Goose",
            "yaml",
            "https://block.github.io/goose/docs/guides/config-files",
            ("extensions",),
            lambda p: p.xdg_config() / "goose" / "config.yaml",
            None,
            _goose,
            f"timeout = {LONG_WAIT_S} s; Goose's own default is 300",
        ),
        Host(
            "opencode",
            "opencode",
            "json",
            "https://opencode.ai/docs/mcp-servers",
            ("mcp",),
            lambda p: _opencode_file(p.xdg_config() / "opencode"),
            lambda p: _opencode_file(p.cwd),
            _opencode,
            "opencode 1 gives a call 60 s (its `timeout` is for listing tools); opencode 2, "
            f"servers under mcp.servers: timeout.request = {LONG_WAIT_MS} ms",
        ),
    )
}
