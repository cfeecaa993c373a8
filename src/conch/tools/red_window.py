"""Faithful on red, short beside it: the inline window of a failed job that carries a digest.

A finished job whose output did not fit its window gets a digest (docs/spec.md §5): the lines that
say what went wrong, from the whole log, with cursors. Beside it, a head-and-tail window of
16 KB mostly repeats noise (the warnings, the passing tests) that the digest already counts in
``omitted``: it made a red result cost 9-21 KB where the digest alone is 0.5-5 KB. So when a
job that did not succeed carries a digest, its window shrinks to a short tail (the last
``TAIL_LINES`` whole lines in ``TAIL_BYTES``, none a digest line already lists) after the usual
marker, which names the cursor range of what was left out; ``read {cursor}`` shows any of it.

Not shrunk: a job that exited 0 (its output may be what was asked for: a file, a listing); a
read that gave its own ``max_bytes``, ``cursor``, ``tail``, ``raw``, ``stream`` or ``screen``;
an exec that gave its own ``max_output_bytes``; a window that left nothing out.
"""

from __future__ import annotations

from typing import Any

import conch.core as core
from conch.core import Engine, boundary_at_or_after, normalize

#: most whole lines of the short tail, and most bytes it reads
TAIL_LINES = 2
TAIL_BYTES = 512

#: read arguments that choose the window themselves (then it is left as asked)
_OWN_WINDOW = ("max_bytes", "cursor", "tail", "raw", "stream", "screen", "max_output_bytes")


def _marker(omitted: int, a: int, b: int) -> str:
    # the window's own marker (core/output/window.py), so one reading fits both
    return f"[... {omitted} bytes omitted: read cursor {a}-{b} ...]\n"


def tail_start(data: bytes, base: int, floor: int) -> int:
    """Where the short tail starts, as a raw cursor: ``data`` is the log's last bytes, from
    ``base`` to its end. The tail is the last ``TAIL_LINES`` whole lines of it that start
    after ``floor`` (a digest line's cursor: what the digest lists is not shown twice); a
    last line longer than ``data`` shows its end, from a whole character."""
    starts = [i + 1 for i in range(len(data)) if data[i] == 0x0A and i + 1 < len(data)]
    if not starts:
        starts = [boundary_at_or_after(data, 0)] if data else []
    kept = [base + s for s in starts[-TAIL_LINES:] if base + s > floor]
    return kept[0] if kept else base + len(data)


async def shrink(rt: Engine, result: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a job snapshot) with its window cut to the short tail, when it is a red
    result with a digest and the caller did not choose the window (module doc). A read's
    window that stopped before the end (a forward window leaves the rest for the next read)
    then reaches it: the job's read cursor moves to the end, as the result says."""
    digest = result.get("digest")
    if (
        not digest
        or not (result.get("truncated") or result.get("omitted_bytes"))
        or (result.get("state") == "exited" and result.get("exit_code") == 0)
        or any(args.get(k) is not None for k in _OWN_WINDOW)
    ):
        return result
    log = rt.job(result["job_id"]).log
    start, total = result.get("cursor") or 0, log.size()
    base = max(start, total - TAIL_BYTES)
    data = log.read(base, total)
    floor = max((e["cursor"] for e in digest.get("lines", [])), default=-1)
    at = tail_start(data, base, floor)
    if at <= start:
        return result
    if result.get("next_cursor") != total:
        await rt.read(core.ReadRequest(job_id=result["job_id"], cursor=total, digest=False))
    text = _marker(at - start, start, at) + normalize(data[at - base :])
    return {
        **result,
        "output": text,
        "truncated": True,
        "omitted_bytes": at - start,
        "next_cursor": total,
        "total_bytes": total,
        "eof": log.closed,
    }
