"""`ready` probes: return from `exec` once a daemon is up (output pattern, TCP port, URL)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conch.core.jobs.job import Job
from conch.core.output.normalize import Normalizer
from conch.core.pattern import Pattern, compile_pattern
from conch.errors import ConchError

_POLL_S = 0.1
_CARRY = 4096


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
    Each :meth:`found` reads only what arrived since the last one (1 MiB at a time)."""

    def __init__(self, pattern: Pattern, since: int = 0) -> None:
        self.pattern = pattern
        self.scanned = since
        self._carry = ""  # the last _CARRY characters of the finished lines
        self._norm = Normalizer()

    def behind(self, job: Job) -> bool:
        return job.log.size() > self.scanned

    def found(self, job: Job) -> bool:
        size = job.log.size()
        if size <= self.scanned:
            return False
        chunk = job.log.read(self.scanned, min(size, self.scanned + (1 << 20)))
        self.scanned += len(chunk)
        done = self._carry + self._norm.feed(chunk)
        if self.pattern.search(done + self._norm.pending()):
            return True
        self._carry = done[-_CARRY:]
        return False


async def wait_ready(job: Job, spec: ReadySpec, timeout_s: float, *, since: int = 0) -> bool | None:
    """True once ready, False if the job ended first, None if timeout_s passed (a pattern is
    looked for as :class:`LogScanner` does)."""
    deadline = time.monotonic() + timeout_s
    scan = LogScanner(spec.pattern, since) if spec.pattern is not None else None
    next_probe = 0.0
    while True:
        if scan is not None and scan.found(job):
            return True
        now = time.monotonic()
        if now >= next_probe and (spec.port is not None or spec.url is not None):
            next_probe = now + _POLL_S
            if spec.port is not None and await _port_open(spec.port):
                return True
            if spec.url is not None and await asyncio.to_thread(_url_ok, spec.url):
                return True
        behind = scan is not None and scan.behind(job)
        if job.terminal and not behind:  # ended, and all it printed was looked at
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if behind:
            continue
        wait = remaining if spec.port is None and spec.url is None else min(remaining, _POLL_S)
        await job.wait_change(job.version, wait)


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
