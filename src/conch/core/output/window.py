"""Turning byte ranges of a log into text for a model: windows and head+tail previews.

Budgets count bytes of the returned (normalized) text, which is always valid UTF-8. A window
that had to be cut reports the exact raw cursor where it stopped, so nothing is ever lost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from conch.core.output.log import JobLog
from conch.core.output.normalize import normalize, safe_window_end
from conch.core.output.utf8 import (
    boundary_at_or_after,
    decode,
    utf8_len,
)

NORMALIZE_BOUND = 1 << 20
"""Most raw bytes normalized to find what a person would see in one window: a preview of a
100 MB log costs the same as one of 1 MB."""


@dataclass(frozen=True)
class Window:
    text: str
    cursor: int  # raw offset where the window starts
    next_cursor: int  # raw offset just after what the window covers
    truncated: bool = False
    omitted_bytes: int = 0


def render(data: bytes, raw: bool) -> str:
    return decode(data) if raw else normalize(data)


def forward(
    log: JobLog, start: int, limit: int, budget: int, *, stream: int | None, raw: bool, final: bool
) -> Window:
    """Text of [start, x) with x <= limit as large as fits the budget."""
    if budget <= 0 or start >= limit:
        return Window("", start, start, truncated=start < limit, omitted_bytes=0)
    if start > 0:
        # a cursor inside a character: start at the next whole one
        lead = max(0, start - 3)
        head = log.read(lead, min(limit, start + 3), stream)
        start = lead + boundary_at_or_after(head, start - lead)
        if start >= limit:
            return Window("", start, start)
    span = budget
    while True:
        data = log.read(start, min(limit, start + span), stream)
        end = len(data)
        if start + end < limit or not final:
            end = safe_window_end(data, end)
        text = render(data[:end], raw)
        # carriage-return rewrites and escapes shrink in the rendering: read further (bounded)
        # until the text a person would see fills the budget
        if raw or start + len(data) >= limit or span >= NORMALIZE_BOUND:
            break
        if utf8_len(text) * 2 > budget:
            break
        span = min(NORMALIZE_BOUND, span * 4)
    while end > 0 and utf8_len(text) > budget:
        end = safe_window_end(data, max(0, end * budget // utf8_len(text) - 1))
        text = render(data[:end], raw)
    return Window(text, start, start + end, truncated=start + end < limit)


def backward(
    log: JobLog, floor: int, end: int, budget: int, *, stream: int | None, raw: bool
) -> Window:
    """Text of [x, end) with x >= floor as large as fits the budget."""
    if budget <= 0 or end <= floor:
        return Window("", end, end)
    base = max(floor, end - budget)
    # read a little earlier too, so a character cut at `base` can be recognised and skipped
    lead = max(floor, base - 3)
    data = log.read(lead, end, stream)
    begin = 0 if base == floor else boundary_at_or_after(data, base - lead)
    text = render(data[begin:], raw)
    while begin < len(data) and utf8_len(text) > budget:
        over = utf8_len(text) - budget
        begin = boundary_at_or_after(data, begin + max(1, over))
        text = render(data[begin:], raw)
    return Window(text, lead + begin, end)


def following(
    log: JobLog,
    start: int,
    budget: int,
    *,
    stream: int | None = None,
    raw: bool = False,
    final: bool = True,
) -> Window:
    """What a reader gets from ``start`` on: a forward window up to the log's end, and as
    ``omitted_bytes`` what it left for the next read."""
    total = log.size(stream)
    w = forward(log, start, total, budget, stream=stream, raw=raw, final=final)
    return replace(w, omitted_bytes=total - w.next_cursor)


def last(log: JobLog, floor: int, budget: int, *, stream: int | None, raw: bool) -> Window:
    """The last ``budget`` bytes above ``floor`` (a tail read): what lies before them is
    ``omitted_bytes``."""
    w = backward(log, floor, log.size(stream), budget, stream=stream, raw=raw)
    return replace(w, truncated=w.cursor > 0, omitted_bytes=w.cursor)


def _marker(omitted: int, a: int, b: int) -> str:
    # short on purpose: it must fit small budgets; `read {cursor: a}` continues from the gap
    return f"[... {omitted} bytes omitted: read cursor {a}-{b} ...]\n"


def preview(
    log: JobLog,
    budget: int,
    *,
    stream: int | None = None,
    raw: bool = False,
    final: bool = True,
    start: int = 0,
) -> Window:
    """All output from ``start`` if it fits, else head + one marker line + tail."""
    total = log.size(stream)
    if start >= total:
        return Window("", start, total)
    if total - start <= budget or (not raw and total - start <= NORMALIZE_BOUND):
        # what a person sees may be far shorter than the raw bytes (a progress bar rewritten
        # with \r thousands of times): if it fits, it is the whole preview
        whole = forward(log, start, total, budget, stream=stream, raw=raw, final=final)
        if whole.next_cursor == total:
            return whole
    worst = len(_marker(total, total, total)) + 1
    room = budget - worst
    if room < 2:
        # no room for the marker: the newest output matters most
        tail = backward(log, start, total, budget, stream=stream, raw=raw)
        omitted = tail.cursor - start
        return Window(tail.text, start, total, truncated=omitted > 0, omitted_bytes=omitted)
    head = forward(log, start, total, room - room // 2, stream=stream, raw=raw, final=final)
    tail = backward(log, head.next_cursor, total, room // 2, stream=stream, raw=raw)
    omitted = tail.cursor - head.next_cursor
    if omitted <= 0:
        return Window(head.text + tail.text, start, total)
    sep = "" if not head.text or head.text.endswith("\n") else "\n"
    text = head.text + sep + _marker(omitted, head.next_cursor, tail.cursor) + tail.text
    return Window(text, start, total, truncated=True, omitted_bytes=omitted)
