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


# -- the cost of a pattern ---------------------------------------------------------------

#: the red team's pattern (N02): a counted repetition of a class defeats RE2's DFA, and its
#: simulation of the 24,010-instruction program took 9 s per 512 KiB, all on the event loop
COSTLY = "|".join(
    f"(?:[{chr(97 + i)}-q][^u-{chr(122 - i)}]{{1000}}{chr(120 - i)})" for i in range(3)
)
#: under the size limit (4,808 instructions) and still slow: tens of µs a character
SLOW = "(?:[a-q][^u-z]{300}x)|(?:[b-q][^u-y]{300}w)"
#: letters a-t, never u-z: neither pattern ever matches
LETTERS = (
    "import random,sys; random.seed(1); "
    "sys.stdout.write(''.join(random.choice('abcdefghijklmnopqrst') for _ in range({n})))"
)


async def test_a_pattern_whose_program_is_too_large_is_refused_naming_why(rt: conch.Runtime):
    r = await rt.call_tool("exec", {"command": "true", "ready": {"pattern": COSTLY}})
    assert r["error"]["code"] == "invalid_argument", r
    assert "ready.pattern is too costly" in r["error"]["message"], r
    assert "24010 instructions" in r["error"]["message"], r
    job = (await rt.call_tool("exec", {"command": "true"}))["job_id"]
    r = await rt.call_tool("read", {"job_id": job, "until": {"pattern": ".{1000}"}})
    assert r["error"]["code"] == "invalid_argument" and "until.pattern" in r["error"]["message"]
    # what people write stays well inside
    for fine in (r"[^\n]{0,200}", r"\pL+", r"(?i)listening on port \d+"):
        assert "error" not in await rt.call_tool(
            "read", {"job_id": job, "until": {"pattern": fine}}
        )


async def test_a_slow_pattern_stalls_neither_the_server_nor_its_own_wait(rt: conch.Runtime):
    """A pattern under the limit that searches slowly, over 256 KiB: the read answers when its
    wait_ms runs out, saying how much it had not searched yet, and the loop ticks on
    meanwhile (the old matcher held it for seconds per MiB); so does an exec's ready."""
    r = await rt.exec(
        command=f'python3 -c "{LETTERS.format(n=256 * 1024)}"; sleep 60', yield_ms=3000
    )
    job = r["job_id"]
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    t = asyncio.ensure_future(ticker())
    try:
        t0 = time.monotonic()
        got = await rt.read(job_id=job, cursor=0, until={"pattern": SLOW}, wait_ms=1000)
        took = time.monotonic() - t0
        ready = await rt.exec(
            command=f'python3 -c "{LETTERS.format(n=64 * 1024)}"; sleep 30',
            ready={"pattern": SLOW},
            yield_ms=500,
        )
        quick = await rt.exec(command="echo fine")
    finally:
        t.cancel()
        await rt.signal(job_id=job, signal="kill")
    await rt.signal(job_id=ready["job_id"], signal="kill")
    assert max(gaps) < 0.5, max(gaps)  # (the old matcher: seconds)
    assert got["state"] == "running" and 1.0 <= took < 3.0, (took, got["state"])
    assert "bytes of output were not searched yet when wait_ms (1000) ran out" in got["output"]
    assert ready["state"] == "running" and ready.get("ready") is None, ready
    assert quick["output"] == "fine\n"


async def test_a_match_is_found_however_far_into_the_output(rt: conch.Runtime):
    """The search goes through the output in steps: what it looks for is found after many
    (the read ends long before its wait_ms), what is not there is not (it waits them out)."""
    prog = "import sys; sys.stdout.write('x' * 300000 + 'the needle' + 'x' * 5000)"
    r = await rt.exec(command=f'python3 -c "{prog}"; sleep 30', yield_ms=300)
    t0 = time.monotonic()
    got = await rt.read(job_id=r["job_id"], cursor=0, until={"pattern": r"ne+dle"}, wait_ms=20000)
    took = time.monotonic() - t0
    missing = await rt.read(job_id=r["job_id"], cursor=0, until={"pattern": "hay"}, wait_ms=2000)
    await rt.signal(job_id=r["job_id"], signal="kill")
    assert got["state"] == "running" and took < 10, (took, got["state"])
    assert got["total_bytes"] == 305010
    assert missing["state"] == "running" and "not searched" not in missing["output"]


def test_re2_releases_the_gil_while_it_searches():
    """What keeps the loop free while a pattern worker searches: RE2's search lets other
    threads run. A search of ~0.3 s in a thread; this thread sleeps 1 ms at a time meanwhile
    (with the GIL held throughout, no sleep would end before the search did)."""
    import random
    import threading

    from conch.core.pattern import compile_pattern

    pattern = compile_pattern(SLOW, "until.pattern")
    rng = random.Random(1)
    text = "".join(rng.choice("abcdefghijklmnopqrst") for _ in range(64 * 1024))
    th = threading.Thread(target=pattern.search, args=(text,))
    t0 = time.monotonic()
    th.start()
    slept = 0
    while th.is_alive():
        time.sleep(0.001)
        slept += 1
    took = time.monotonic() - t0
    assert took > 0.1, took  # (else the measure says nothing)
    assert slept >= 20, (slept, took)
