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


async def wait_ready(job: Job, spec: ReadySpec, timeout_s: float, *, since: int = 0) -> bool | None:
    """True once ready, False if the job ended first, None if timeout_s passed.

    A pattern is looked for in the combined output from byte ``since`` on, normalized as a
    stream: an escape sequence or a UTF-8 character cut between two reads is still whole."""
    deadline = time.monotonic() + timeout_s
    scanned = since
    carry = ""  # the last _CARRY characters of the finished lines
    norm = Normalizer()
    next_probe = 0.0
    while True:
        if spec.pattern is not None:
            size = job.log.size()
            if size > scanned:
                chunk = job.log.read(scanned, min(size, scanned + (1 << 20)))
                scanned += len(chunk)
                done = carry + norm.feed(chunk)
                if spec.pattern.search(done + norm.pending()):
                    return True
                carry = done[-_CARRY:]
        now = time.monotonic()
        if now >= next_probe and (spec.port is not None or spec.url is not None):
            next_probe = now + _POLL_S
            if spec.port is not None and await _port_open(spec.port):
                return True
            if spec.url is not None and await asyncio.to_thread(_url_ok, spec.url):
                return True
        if job.terminal:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if spec.pattern is not None and job.log.size() > scanned:
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
