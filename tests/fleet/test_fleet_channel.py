"""The call channel's two ends (conch.fleet.channel) wired together in process, the Ray call
replaced by a direct one: batching, replies as they come, cancellation, and the faults."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from conch import ConchError
from conch.fleet.channel import Calls, Channel, GaveUp, Reply, Request

pytestmark = pytest.mark.anyio


class Node:
    """A node's end whose tool call is ``sleep`` for ``args["s"]`` then echoes ``args``."""

    def __init__(self) -> None:
        self.calls = Calls(self.run)
        self.started: list[int] = []
        self.cancelled: dict[int, bool] = {}  # call id -> what gave_up() said
        self.batches: list[int] = []  # requests per Ray call

    async def run(self, call_id: int, request: Request, gave_up: GaveUp) -> Reply:
        self.started.append(call_id)
        try:
            await asyncio.sleep(request[1].get("s", 0))
        except asyncio.CancelledError:
            self.cancelled[call_id] = await gave_up()
            raise
        return {"echo": dict(request[1])}, False, None, None

    async def transport(self, batch: bytes) -> bytes:
        from conch.fleet.channel import unpack

        self.batches.append(len(unpack(batch)[0]))
        return await self.calls.take(batch, lambda: 7)


def channel(transport: Callable[[bytes], Awaitable[bytes]], **kw: Any) -> Channel:
    running: list[int] = []
    ch = Channel(
        "n1",
        transport,
        wait_s=kw.pop("wait_s", 5.0),
        timeout_s=1.0,
        **kw,
        on_running=running.append,
    )
    return ch


def req(**args: Any) -> Request:
    return ("exec", args, None, True, False)


async def test_a_lone_call_is_one_ray_call_and_a_burst_is_fewer_than_its_calls() -> None:
    node = Node()
    ch = channel(node.transport)
    reply = await ch.call(1, req(k=1), 5.0)
    assert reply[0] == {"echo": {"k": 1}} and ch.ray_calls == 1
    ids = range(2, 202)
    replies = await asyncio.gather(*(ch.call(i, req(k=i, s=(i % 3) * 0.05), 5.0) for i in ids))
    assert [r[0]["echo"]["k"] for r in replies] == list(ids)  # each its own reply
    assert ch.ray_calls - 1 < 20  # 200 calls made in one turn: a batch, replies in a few
    assert max(node.batches) == 200
    await ch.aclose(ConchError("closed", "done"))


async def test_calls_made_while_a_batch_is_on_its_way_gather_for_the_next() -> None:
    """One call per turn of the loop (an HTTP server's requests trickle in so), the node a
    round trip of 20 ms away: a few Ray calls wait for replies, the rest gather."""
    node = Node()

    async def far(batch: bytes) -> bytes:
        await asyncio.sleep(0.01)
        reply = await node.transport(batch)
        await asyncio.sleep(0.01)
        return reply

    ch = channel(far)
    calls = []
    for i in range(200):
        calls.append(asyncio.ensure_future(ch.call(i, req(k=i, s=0.5), 5.0)))
        await asyncio.sleep(0)
    replies = await asyncio.gather(*calls)
    assert [r[0]["echo"]["k"] for r in replies] == list(range(200))
    assert ch.calls == 200 and ch.ray_calls < 40, ch.ray_calls
    await ch.aclose(ConchError("closed", "done"))


async def test_a_slow_call_does_not_hold_back_a_quick_one() -> None:
    node = Node()
    ch = channel(node.transport)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    slow = asyncio.ensure_future(ch.call(1, req(s=1.0), 5.0))
    quick = await ch.call(2, req(k=2), 5.0)  # (sent in the same batch as the slow one)
    assert quick[0] == {"echo": {"k": 2}} and loop.time() - t0 < 0.5
    assert (await slow)[0] == {"echo": {"s": 1.0}}
    await ch.aclose(ConchError("closed", "done"))


@pytest.mark.parametrize("host_timed_out", [False, True])
async def test_a_caller_that_gives_up_cancels_the_call_on_the_node(host_timed_out: bool) -> None:
    node = Node()
    ch = channel(node.transport)

    async def gave_up() -> bool:
        return host_timed_out

    call = asyncio.ensure_future(ch.call(1, req(s=30), 40.0, gave_up))
    while 1 not in node.started:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for _ in range(200):
        if 1 in node.cancelled:
            break
        await asyncio.sleep(0.01)
    assert node.cancelled == {1: host_timed_out}
    await ch.aclose(ConchError("closed", "done"))


async def test_a_cancel_that_overtakes_its_call_is_kept_for_it() -> None:
    from conch.fleet.channel import pack, unpack

    node = Node()
    await node.calls.take(pack(([], [(5, False)], 0.0)), lambda: 0)
    await node.calls.take(pack(([(5, req()), (6, req())], [], 0.0)), lambda: 0)
    await asyncio.sleep(0.05)
    replies, running = unpack(await node.calls.take(pack(([], [], 0.0)), lambda: 3))
    assert node.started == [6] and [i for i, _ in replies] == [6] and running == 3


async def test_no_reply_by_the_deadline_is_node_unreachable() -> None:
    never = asyncio.Event()

    async def silent(batch: bytes) -> bytes:
        await never.wait()
        raise AssertionError("unreachable")

    ch = channel(silent)
    with pytest.raises(ConchError) as e:
        await ch.call(1, req(), 0.2)
    assert e.value.code == "node_unreachable" and e.value.retryable
    await ch.aclose(ConchError("closed", "done"))


async def test_a_lost_node_fails_every_call_in_flight_and_every_later_one() -> None:
    node = Node()
    gone = asyncio.Event()

    async def dies(batch: bytes) -> bytes:
        from conch.fleet.channel import unpack

        if unpack(batch)[0] and unpack(batch)[0][0][0] >= 3:
            gone.set()
            raise ConchError("node_lost", "node n1 is gone")
        return await node.calls.take(batch, lambda: 0)

    ch = channel(dies)
    first = [asyncio.ensure_future(ch.call(i, req(s=10), 20.0)) for i in (1, 2)]
    while len(node.started) < 2:
        await asyncio.sleep(0.01)
    with pytest.raises(ConchError) as e:
        await ch.call(3, req(), 20.0)
    assert e.value.code == "node_lost"
    for f in first:
        with pytest.raises(ConchError) as e:
            await f
        assert e.value.code == "node_lost"
    with pytest.raises(ConchError) as e:
        await ch.call(4, req(), 20.0)
    assert e.value.code == "node_lost"
    node.calls.cancel(1, False)  # (the node's side, left running by this fake)
    node.calls.cancel(2, False)
    await ch.aclose(ConchError("closed", "done"))


async def test_a_batch_that_cannot_reach_the_node_fails_its_calls_unreachable() -> None:
    tries = 0

    async def flaky(batch: bytes) -> bytes:
        nonlocal tries
        tries += 1
        raise ConchError("node_unreachable", "node n1 is unreachable right now")

    ch = channel(flaky)
    with pytest.raises(ConchError) as e:
        await ch.call(1, req(), 20.0)
    assert e.value.code == "node_unreachable" and tries == 1
    await ch.aclose(ConchError("closed", "done"))
