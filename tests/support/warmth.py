"""Test helper: the pid of a runtime's warm process, once it is ready (tests import it; it is
not a conftest)."""

from __future__ import annotations

import asyncio

import conch


async def ready_pid(rt: conch.Runtime, kind: str) -> int:
    """Start the warm ``bash`` or ``sh`` with the environment as it is now (its first use
    only starts it; pytest changes PYTEST_CURRENT_TEST between a test's phases) and return its
    pid once it is ready."""
    if kind == "bash":
        await rt.call_tool("exec", {"command": "true"})
    else:
        await rt.exec(argv=["true"])
    for _ in range(200):
        warm = rt.engine.starter.warm if kind == "bash" else rt.engine.starter.warm_sh
        pid = warm.ready_pid if warm is not None else None
        if pid:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError(f"no warm {kind} became ready")
