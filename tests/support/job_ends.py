"""Test helper: a job's end after a ``write`` (imported by the tests; not a conftest).

A ``write`` returns once the output has settled (50 ms without more): a program's exit after
its last output may come later on a loaded box, so a test that expects the end reads until it."""

from __future__ import annotations

from typing import Any

import conch


async def until_exit(rt: conch.Runtime, w: dict[str, Any]) -> dict[str, Any]:
    """``w`` (a write's result), or, while its job still ran, the job at its end with the
    output that came after ``w``'s."""
    if w["state"] != "running":
        return w
    r = await rt.call_tool("read", {"job_id": w["job_id"], "until": "exit", "wait_ms": 15000})
    return {**r, "output": w["output"] + r["output"]}
