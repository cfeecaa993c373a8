"""Issue 18.5: caller patterns (read until, exec ready) cost time linear in the text, never
the pattern's backtracking, and RE2's syntax limits are refused naming the construct."""

from __future__ import annotations

import asyncio
import time

import pytest

import conch

pytestmark = pytest.mark.anyio

# patterns that take Python's backtracking `re` exponential time on a near-miss input
CATASTROPHIC = [r"(a+)+$", r"(a|aa)+$", r"(a|a?)+$", r"(.*a){12}$", r"^(\w+\s?)*$"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
async def test_a_catastrophic_pattern_never_stalls_the_server(rt: conch.Runtime, pattern):
    text = "a" * 40 + "!"
    r = await rt.exec(command=f"printf '{text}'; sleep 30", yield_ms=200)
    job = r["job_id"]
    # the loop stays free while the read waits: a ticker must keep ticking
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.ensure_future(ticker())
    t0 = time.monotonic()
    got = await rt.read(job_id=job, until={"pattern": pattern}, wait_ms=500)
    elapsed = time.monotonic() - t0
    t.cancel()
    ready = await rt.exec(command=f"printf '{text}\\n'", ready={"pattern": pattern})
    await rt.signal(job_id=job, signal="kill")
    assert got["state"] == "running" and elapsed < 2.0, (pattern, elapsed)
    assert ticks >= 10, ticks  # (the old matcher held the loop for seconds)
    assert ready["state"] == "exited"


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "backreferences"),
        (r"a(?=b)", "lookahead"),
        (r"a(?!b)", "negative lookahead"),
        (r"(?<=a)b", "lookbehind"),
        (r"(?<!a)b", "negative lookbehind"),
        (r"(?P<x>a)(?P=x)", "named backreferences"),
        (r"(unclosed", "missing )"),
    ],
)
async def test_unsupported_constructs_are_invalid_argument_naming_them(
    rt: conch.Runtime, pattern, named
):
    r = await rt.call_tool("exec", {"command": "true", "ready": {"pattern": pattern}})
    assert r["error"]["code"] == "invalid_argument" and named in r["error"]["message"], r
    job = (await rt.call_tool("exec", {"command": "true"}))["job_id"]
    r = await rt.call_tool("read", {"job_id": job, "until": {"pattern": pattern}})
    assert r["error"]["code"] == "invalid_argument" and "until.pattern" in r["error"]["message"]


async def test_python_style_patterns_still_match(rt: conch.Runtime):
    r = await rt.exec(
        command="echo 'Listening on port 8080'; sleep 5",
        ready={"pattern": r"(?i)listening on (?P<what>port) \d+"},
        yield_ms=5000,
    )
    assert r["ready"] is True
    await rt.signal(job_id=r["job_id"], signal="kill")
