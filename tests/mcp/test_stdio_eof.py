"""stdin EOF right after a burst of requests: calls already received still get their answers,
and the server exits at once afterwards with nothing left running."""

from __future__ import annotations

import json
import subprocess
import sys
import time

MESSAGES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": "echo hello; exit 3"}},
    },
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": "sleep 30", "yield_ms": 60000}},
    },
]


def test_requests_piped_before_eof_are_answered(tmp_path):
    data = "".join(json.dumps(m) + "\n" for m in MESSAGES)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "conch", "serve", "--data-dir", str(tmp_path / "d")],
        input=data,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    replies = {m["id"]: m for m in map(json.loads, out.stdout.splitlines()) if "id" in m}
    result = replies[2]["result"]
    assert result["structuredContent"]["exit_code"] == 3
    assert result["structuredContent"]["output"] == "hello\n"
    # the long call is not waited for: shutdown kills its job within the bounded settle time
    assert elapsed < 15
