"""A node's call channel: the fleet's tool calls to one node executor cross Ray in batches,
both ways (docs/spec.md §9b).

:class:`Channel` is the fleet's end. The calls made in one turn of the event loop leave
together as one Ray call (``NodeExecutor.call``), and that call comes back as soon as any reply
of the node's is ready, with every reply ready then (its own calls' or earlier ones'). A few
such calls wait on a node while replies are due; past that, a batch comes straight back with
what is ready, and while it is on its way the calls made meanwhile gather for the next one. A
lone call so costs one Ray round trip, and a burst of calls to a node fewer Ray calls than tool
calls (never more: every Ray call but the one that keeps a reply awaited carries a call).
Requests and replies cross as one pickled ``bytes`` each way (Ray serializes each argument
apart; one opaque argument is its cheapest).

:class:`Calls` is the node's end (its executor holds one): each request runs as a task, and its
reply waits there until a Ray call takes it.

A caller that gives up (its task is cancelled: an MCP cancellation) is dropped here, and the
node is told, with whether the host gave up for its own timeout: the node cancels the call as a
local cancellation does (the job it started stops, unless it was the host's timeout). Faults
stay the fleet's: ``node_lost`` from the transport fails every call in flight; a batch that
could not reach the node fails its calls ``node_unreachable``; a call with no reply by its
deadline answers ``node_unreachable`` (it may or may not have happened there). Pure asyncio: the
Ray call is the transport (conch.fleet.runtime).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import pickle
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from conch.errors import ConchError

log = logging.getLogger("conch.fleet")

#: a call's request: (tool, arguments, _meta, trusted, whether it reports progress)
Request = tuple[str, Mapping[str, Any], Mapping[str, Any] | None, bool, bool]
#: its reply: (result, is_error, result _meta, snapshot of the job it started or None)
Reply = tuple[dict[str, Any], bool, dict[str, Any] | None, dict[str, Any] | None]
#: what a Ray call carries: (requests by call id, cancels as (call id, keep the job), wait s);
#: what it returns: (replies by call id, jobs running on the node)
Batch = tuple[list[tuple[int, Request]], list[tuple[int, bool]], float]
Replies = tuple[list[tuple[int, Reply]], int]

#: calls that wait on a node for replies at once; a batch beyond them comes straight back
MAX_WAITING = 4
#: after a batch the node could not be reached with, before the next waiting call
RETRY_PAUSE_S = 0.5
#: how long a node remembers a cancel of a call it has not seen (it may come after it)
EARLY_CANCEL_S = 60.0

Transport = Callable[[bytes], Awaitable[bytes]]
GaveUp = Callable[[], Awaitable[bool]]


def unanswered(node_id: str, timeout_s: float) -> ConchError:
    """A node that did not answer a call in time: it may or may not have run it."""
    return ConchError(
        "node_unreachable",
        f"node {node_id} did not answer within {timeout_s:.0f} s; the call may or may not "
        "have taken effect there",
    )


def pack(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(data: bytes) -> Any:
    return pickle.loads(data)


def _again(e: ConchError) -> ConchError:
    """A fresh copy of ``e`` for each call it fails (one raise, one traceback)."""
    return ConchError(e.code, e.message, e.retryable)


class Channel:
    """The fleet's end of one node's calls."""

    def __init__(
        self,
        node_id: str,
        transport: Transport,
        *,
        wait_s: float,
        timeout_s: float,
        on_running: Callable[[int], None],
    ) -> None:
        self.node_id = node_id
        self._transport = transport
        self.wait_s = wait_s  # how long a waiting call waits on the node for a reply
        self.timeout_s = timeout_s  # how late past that the node may answer (fleet_timeout)
        self._on_running = on_running
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._out: list[tuple[int, Request]] = []
        self._cancels: list[tuple[int, bool]] = []
        self._flush_due = False
        self._waiting = 0  # Ray calls open on the node that wait for a reply
        self._quick = False  # a Ray call that comes straight back is on its way
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closed: ConchError | None = None
        self.calls = 0  # tool calls made (info.nodes shows both counts)
        self.ray_calls = 0  # Ray calls that carried them

    async def call(
        self, call_id: int, request: Request, timeout_s: float, gave_up: GaveUp | None = None
    ) -> Reply:
        """The node's reply to ``request``; ``node_unreachable`` after ``timeout_s``.
        ``gave_up``: asked after a cancellation whether the host gave up for its own timeout
        (the node then keeps the job running)."""
        if self._closed is not None:
            raise _again(self._closed)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Reply] = loop.create_future()
        self._pending[call_id] = fut
        self._out.append((call_id, request))
        self.calls += 1
        self._soon()
        timer = loop.call_later(timeout_s, self._late, call_id, timeout_s)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.cancelled():  # (an answer or a fault that came meanwhile is let go)
                self._gave_up(call_id, gave_up)
            raise
        finally:
            timer.cancel()
            self._pending.pop(call_id, None)

    def close(self, error: ConchError) -> None:
        """Every call in flight, and every later one, fails with ``error``."""
        if self._closed is None:
            self._closed = error
        self._out.clear()
        self._cancels.clear()
        self._fail(list(self._pending), error)

    async def aclose(self, error: ConchError) -> None:
        self.close(error)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- inside ------------------------------------------------------------------------------

    def _late(self, call_id: int, timeout_s: float) -> None:
        self._fail([call_id], unanswered(self.node_id, timeout_s))

    def _fail(self, call_ids: list[int], error: ConchError) -> None:
        for call_id in call_ids:
            fut = self._pending.pop(call_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(_again(error))

    def _gave_up(self, call_id: int, gave_up: GaveUp | None) -> None:
        async def tell() -> None:
            keep = False
            if gave_up is not None:
                try:
                    keep = bool(await gave_up())
                except Exception:
                    keep = False
            if self._closed is None:
                self._cancels.append((call_id, keep))
                self._soon()

        self._spawn(tell())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _soon(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send what was asked since the last batch in one Ray call: one that waits for a
        reply while fewer than MAX_WAITING do (always one, when replies are due), else one that
        comes straight back; while such a call is on its way, what is asked meanwhile waits for
        it to come back and leaves with the next (at most one round trip later)."""
        self._flush_due = False
        if self._closed is not None:
            return
        due = bool(self._pending)
        wait = due and self._waiting < MAX_WAITING
        if not self._out and not self._cancels and not (due and self._waiting == 0):
            return
        if not wait and self._quick:
            return  # sent when the quick call comes back
        out, self._out = self._out, []
        cancels, self._cancels = self._cancels, []
        self._spawn(self._send(out, cancels, wait))

    async def _send(
        self, out: list[tuple[int, Request]], cancels: list[tuple[int, bool]], wait: bool
    ) -> None:
        if wait:
            self._waiting += 1
        else:
            self._quick = True
        self.ray_calls += 1
        batch: Batch = (out, cancels, self.wait_s if wait else 0.0)
        try:
            packed = await asyncio.wait_for(
                self._transport(pack(batch)), self.wait_s + self.timeout_s
            )
        except asyncio.TimeoutError:
            pass  # no answer: each call has its own deadline (its wait + fleet_timeout)
        except ConchError as e:
            if e.code == "node_lost":
                self.close(e)
            else:  # the node could not be reached with this batch
                self._fail([call_id for call_id, _ in out], e)
                if wait:
                    await asyncio.sleep(RETRY_PAUSE_S)
        except Exception as e:  # (the node's call failed: a bug, not a fault of the fleet)
            log.exception("node %s: a call batch failed", self.node_id)
            error = ConchError("internal", f"node {self.node_id}: {type(e).__name__}: {e}")
            self._fail([call_id for call_id, _ in out], error)
        else:
            replies, running = unpack(packed)
            self._on_running(running)
            for call_id, reply in replies:
                fut = self._pending.pop(call_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        finally:
            if wait:
                self._waiting -= 1
            else:
                self._quick = False
            if self._closed is None and (
                self._out or self._cancels or (self._pending and self._waiting == 0)
            ):
                self._soon()  # what waited for this call; or replies due: one call waits


Run = Callable[[int, Request, GaveUp], Awaitable[Reply]]


class Calls:
    """The node's end: each request runs as a task (``run(call id, request, gave_up)``: the
    executor's tool call); its reply waits until a Ray call takes it."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._tasks: dict[int, asyncio.Future[None]] = {}
        self._keep: dict[int, bool] = {}  # cancelled calls: whether the host timed out
        self._early: dict[int, float] = {}  # cancels of calls not seen yet: when they came
        self._replies: list[tuple[int, Reply]] = []
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def take(self, batch: bytes, running_jobs: Callable[[], int]) -> bytes:
        """Start a packed :data:`Batch`'s requests, apply its cancels; the packed
        :data:`Replies` ready once one is (or after the batch's wait; at once without one)."""
        requests, cancels, wait_s = unpack(batch)
        for call_id, keep in cancels:
            self.cancel(call_id, keep)
        for call_id, request in requests:
            self._start(call_id, request)
        if wait_s > 0 and not self._replies:
            await self._wait(wait_s)
        replies, self._replies = self._replies, []
        return pack((replies, running_jobs()))

    async def _wait(self, wait_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not self._replies:
            left = deadline - loop.time()
            if left <= 0:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except asyncio.TimeoutError:
                return
            finally:
                if not waiter.done():  # (timed out, or the call was cancelled)
                    waiter.cancel()
                    self._waiters.remove(waiter)

    def _wake(self) -> None:
        """The first call still waiting takes the replies (one, not all of them)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _start(self, call_id: int, request: Request) -> None:
        if self._early.pop(call_id, None) is not None:
            return  # its caller gave up before it came
        self._tasks[call_id] = asyncio.ensure_future(self._one(call_id, request))

    async def _one(self, call_id: int, request: Request) -> None:
        async def gave_up() -> bool:
            return self._keep.pop(call_id, False)

        try:
            reply = await self._run(call_id, request, gave_up)
        except asyncio.CancelledError:
            return  # its caller gave up: nobody waits for a reply
        except Exception as e:
            log.exception("a fleet call failed on this node")
            error = ConchError("internal", f"{type(e).__name__}: {e}")
            reply = (error.envelope(), True, None, None)
        finally:
            self._tasks.pop(call_id, None)
            self._keep.pop(call_id, None)
        if not self._replies:
            self._wake()
        self._replies.append((call_id, reply))

    def cancel(self, call_id: int, keep: bool) -> None:
        """Cancel call ``call_id`` (``keep``: its caller timed out, so the job it started stays);
        one not seen yet is remembered a while, in case it comes after its cancel."""
        task = self._tasks.get(call_id)
        if task is not None:
            self._keep[call_id] = keep
            task.cancel()
            return
        now = time.monotonic()  # not here (yet): remembered a while, in case it comes after
        for old, when in list(self._early.items()):
            if now - when > EARLY_CANCEL_S:
                del self._early[old]
        self._early[call_id] = now
