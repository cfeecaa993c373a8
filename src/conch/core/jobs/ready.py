"""`ready` probes: return from `exec` once a daemon is up (output pattern, TCP port, URL)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.jobs.job import Job
from conch.core.output.normalize import Normalizer
from conch.core.pattern import MAX_STEP_S, STEP_S, Pattern, beside_loop, compile_pattern
from conch.errors import ConchError

_POLL_S = 0.1
_CARRY = 4096  # characters of a step searched again with the next (a match across steps)
_MIN = 128  # the fewest characters carried, and bytes read, in a step
_MAX_CHUNK = 64 << 10  # the most bytes read in a step (normalizing them holds the GIL)
_MEASURABLE = 1024  # characters a step searched to say how fast its pattern is


@dataclass(frozen=True)
class ReadySpec:
    pattern: Pattern | None = None
    port: int | None = None
    url: str | None = None


async def _port_open(port: int) -> bool:
    try:
        _, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 0.5)
    except (OSError, asyncio.TimeoutError):
        return False
    w.close()
    with contextlib.suppress(Exception):
        await w.wait_closed()
    return True


def _url_ok(url: str) -> bool:
    req = urllib.request.Request(url, method="GET")
    try:
        with urllib.request.urlopen(req, timeout=1.0) as r:
            return 200 <= r.status < 400
    except urllib.error.HTTPError as e:
        return 300 <= e.code < 400
    except Exception:
        return False


class LogScanner:
    """Looks for a pattern in a job's combined output from byte ``since`` on, normalized as a
    stream: an escape sequence or a UTF-8 character cut between two reads is still whole.

    The search runs in steps beside the event loop (core/pattern.py): each reads on the loop
    what arrived since the last one, as much as the pattern searches in ``pattern.STEP_S``
    of CPU time at the rate it showed so far (at first its worst), never more than it could
    search in ``pattern.MAX_STEP_S`` at its worst, and normalizes and searches it on a
    pattern worker. A match may begin in the text of an earlier step (the last characters of
    its finished lines are searched again: 4096, fewer for a slow pattern)."""

    def __init__(self, pattern: Pattern, since: int = 0) -> None:
        self.pattern = pattern
        self.scanned = since
        self.matched = False
        self._carry = ""  # the last finished characters, searched again with the next step
        self._norm = Normalizer()
        self._rate = pattern.cost  # CPU seconds per character: as measured, at first the worst
        self._keep, self._chunk = self._sizes()
        self._step: asyncio.Task[None] | None = None

    def behind(self, job: Job) -> bool:
        """More output than was searched, and no match yet."""
        return not self.matched and job.log.size() > self.scanned

    def step(self, job: Job) -> asyncio.Task[None] | None:
        """The step that runs, started now if none does and the scan is behind (None: none)."""
        if self._step is not None and self._step.done():
            done, self._step = self._step, None
            error = None if done.cancelled() else done.exception()
            if error is not None:
                raise error
        if self._step is None and self.behind(job):
            self._step = asyncio.ensure_future(self._search_more(job))
        return self._step

    def close(self) -> None:
        """The wait is over: the step that runs is not waited for (its thread finishes it)."""
        if self._step is not None:
            self._step.cancel()
            self._step = None

    async def _search_more(self, job: Job) -> None:
        size = job.log.size()
        end = min(size, self.scanned + self._chunk)
        chunk = job.log.read(self.scanned, end)
        if not chunk:  # (the log cannot be read there: nothing to find in it)
            self.scanned = end
            return
        bound = self.pattern.cost * (len(self._carry) + len(chunk))  # (at its worst)
        found = await beside_loop(bound, self._search, chunk)
        self.scanned += len(chunk)
        self.matched = self.matched or found

    def _search(self, chunk: bytes) -> bool:  # on the pattern worker
        done = self._carry + self._norm.feed(chunk)
        text = done + self._norm.pending()
        t0 = time.thread_time()  # (CPU time: a busy machine only stretches it in wall time)
        found = self.pattern.search(text) is not None
        took = time.thread_time() - t0
        if len(text) >= _MEASURABLE:
            self._rate = max(took / len(text), 1e-10)
            self._keep, self._chunk = self._sizes()
        self._carry = done[-self._keep :] if not found else ""
        return found

    def _sizes(self) -> tuple[int, int]:
        """(characters carried over, bytes read) for a step of about STEP_S at the rate
        measured, and no more than MAX_STEP_S at the pattern's worst."""
        fits = min(STEP_S / self._rate, MAX_STEP_S / self.pattern.cost)
        keep = int(min(_CARRY, max(_MIN, fits / 2)))
        return keep, int(min(_MAX_CHUNK, max(_MIN, fits - keep)))


async def changed(
    jobs: Sequence[Job], timeout_s: float, steps: Sequence[asyncio.Task[None]] = ()
) -> None:
    """Until one of ``jobs`` changes, one of ``steps`` (pattern searches) ends, or timeout_s."""
    if not steps and len(jobs) == 1:
        await jobs[0].wait_change(jobs[0].version, timeout_s)
        return
    futures = [(job, job.watch()) for job in dict.fromkeys(jobs)]
    try:
        await asyncio.wait(
            [*(f for _, f in futures), *steps],
            timeout=timeout_s,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        for job, fut in futures:
            job.unwatch(fut)


async def wait_ready(job: Job, spec: ReadySpec, timeout_s: float, *, since: int = 0) -> bool | None:
    """True once ready, False if the job ended first, None if timeout_s passed (a pattern is
    looked for as :class:`LogScanner` does: a search still behind the output then is None)."""
    deadline = time.monotonic() + timeout_s
    scan = LogScanner(spec.pattern, since) if spec.pattern is not None else None
    next_probe = 0.0
    try:
        while True:
            if scan is not None and scan.matched:
                return True
            now = time.monotonic()
            if now >= next_probe and (spec.port is not None or spec.url is not None):
                next_probe = now + _POLL_S
                if spec.port is not None and await _port_open(spec.port):
                    return True
                if spec.url is not None and await asyncio.to_thread(_url_ok, spec.url):
                    return True
            step = scan.step(job) if scan is not None else None
            if job.terminal and step is None:  # ended, and all it printed was looked at
                return bool(scan is not None and scan.matched)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            probing = spec.port is not None or spec.url is not None
            await changed([job], min(remaining, _POLL_S) if probing else remaining, _all(step))
    finally:
        if scan is not None:
            scan.close()


def _all(step: asyncio.Task[None] | None) -> list[asyncio.Task[None]]:
    return [step] if step is not None else []


def parse_ready(ready: Mapping[str, Any] | None) -> ReadySpec | None:
    """Check an exec's `ready` argument."""
    if ready is None:
        return None
    if not isinstance(ready, Mapping) or not ready:
        raise ConchError("invalid_argument", "ready must be an object with pattern, port or url")
    unknown = set(ready) - {"pattern", "port", "url"}
    if unknown:
        raise ConchError("invalid_argument", f"ready: unknown field(s) {sorted(unknown)}")
    pattern = None
    if "pattern" in ready:
        pattern = compile_pattern(ready["pattern"], "ready.pattern")
    port = ready.get("port")
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
    ):
        raise ConchError("invalid_argument", "ready.port must be an integer 1..65535")
    url = ready.get("url")
    if url is not None and (not isinstance(url, str) or not re.match(r"^https?://", url)):
        raise ConchError("invalid_argument", "ready.url must be an http:// or https:// URL")
    return ReadySpec(pattern=pattern, port=port, url=url)
