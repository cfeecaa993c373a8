"""Seed 3's service manifest: what the HTTP invoke service offers, for gateways and `conch tools`.
No MCP import; cheap to build."""

from __future__ import annotations

from typing import Any

from conch._version import __version__
from conch.config import Config
from conch.tools.registry import catalogue

SERVICE_ID = "conch"

SOP = """Conch runs shell commands on this machine for you.
1. `exec` a command (or `argv`, or a `script`); if the result says `state: running`, the job goes
   on in the background: poll it with `read {job_id, wait_ms}` until `eof`, send input with
   `write`, stop it with `signal`.
2. A non-zero exit is a normal result (`ok: false`); an `error` object means the call itself
   failed (`retryable` says whether trying again may help).
3. Long output is cut to head + tail with a marker naming the cursor range: `read` with that
   cursor to see the rest. Jobs stay readable for the retention period, also across `invoke`s.
4. Use `shell_open` for a persistent shell (cwd and env persist), `search` to find text in files.
"""


def manifest(cfg: Config, base_url: str | None = None) -> dict[str, Any]:
    """The manifest: service id, version, ``execution: "http"``, methods with schemas, SOP."""
    tools = catalogue(cfg.profiles)
    out: dict[str, Any] = {
        "service_id": SERVICE_ID,
        "name": "Conch",
        "version": __version__,
        "description": "A shell for AI agents: one-shot commands, background jobs, persistent "
        "shells and structured file search.",
        "execution": "http",
        "profiles": list(cfg.profiles),
        "endpoints": {
            "invoke": "/invoke",
            "health": "/health",
            "manifest": "/manifest",
            "mcp": "/mcp",
            "sse": "/sse",
            "dashboard": "/",
        },
        "methods": [
            {
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "input_schema": t.input_schema,
                "output_schema": t.published_output_schema,
                "annotations": t.annotations,
            }
            for t in tools
        ],
        "sop": SOP,
    }
    if base_url:
        out["base_url"] = base_url.rstrip("/")
    return out
