"""A terminal job's recording as asciicast v2 (docs/spec.md §8), made from its log.

The log already holds every byte the program printed, within the log's cap and nothing typed
(a terminal echoes what it echoes; echo-off input is never output). So the recording is only
*when* each part of the log arrived: one (seconds, log offset) mark per chunk of output, chunks
less than ``COALESCE_S`` apart sharing a mark, plus the terminal's size and its changes. The
cast is written from the log and the marks when someone asks for it:

    {"version": 2, "width": COLS, "height": ROWS, "timestamp": UNIX_SECONDS}
    [t, "o", "text"]        output (decoded as UTF-8 incrementally, errors replaced; a
                            ``\n`` written as ``\r\n``, as a terminal with ONLCR shows it:
                            Conch's terminals leave ONLCR off so that logs hold ``\n``)
    [t, "r", "COLSxROWS"]   a resize

Memory is flat: a busy job gets at most ``1 / COALESCE_S`` marks a second (16 bytes each),
and past ``MAX_MARKS`` the marks thin out (pairs merge, marks coalesce twice as long).
"""

from __future__ import annotations

import codecs
import json
import time
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Protocol

COALESCE_S = 0.01
MAX_MARKS = 1 << 18
_READ_CHUNK = 1 << 20


class _Log(Protocol):
    def size(self, stream: int | None = None) -> int: ...

    def read(self, start: int, end: int, stream: int | None = None) -> bytes: ...


class Recording:
    """When each part of a terminal job's log arrived, and the terminal's size."""

    def __init__(self, rows: int, cols: int, coalesce_s: float = COALESCE_S) -> None:
        self.size = (rows, cols)
        self.first_size = (rows, cols)
        self.started = time.time()
        self._t0 = time.monotonic()
        self._times = array("d")
        self._ends = array("q")  # the log's size when the mark was made
        self._coalesce = coalesce_s
        self.resizes: list[tuple[float, int, int, int]] = []  # (t, offset, rows, cols)
        self._split = False  # a resize came since the last mark: the next one starts afresh

    def mark(self, log_size: int) -> None:
        """Output arrived: the log now holds ``log_size`` bytes."""
        t = time.monotonic() - self._t0
        times = self._times
        if times and t - times[-1] < self._coalesce and not self._split:
            self._ends[-1] = log_size
            return
        self._split = False
        if len(times) >= MAX_MARKS:
            self._thin()
        self._times.append(t)
        self._ends.append(log_size)

    def _thin(self) -> None:
        """Merge the marks pairwise (each pair keeps its first time and its last end) and
        coalesce twice as long from now on: memory stays flat, timing gets coarser."""
        ends = self._ends
        self._times = array("d", self._times[0::2])
        self._ends = array("q", ends[1::2])
        if len(ends) % 2:
            self._ends.append(ends[-1])
        self._coalesce = max(self._coalesce * 2, COALESCE_S)

    def resize(self, rows: int, cols: int, log_size: int) -> None:
        """The terminal became rows × cols when the log held ``log_size`` bytes (what comes
        after is drawn at the new size, so no mark spans the resize)."""
        if (rows, cols) == self.size:
            return
        self.size = (rows, cols)
        self.resizes.append((time.monotonic() - self._t0, log_size, rows, cols))
        self._split = True

    def size_at(self, offset: int) -> tuple[int, int]:
        """The terminal's size once the log held ``offset`` bytes (resizes there included)."""
        size = self.first_size
        for _, at, rows, cols in self.resizes:
            if at > offset:
                break
            size = (rows, cols)
        return size

    def offset_at(self, t: float) -> int:
        """How much of the log had arrived ``t`` seconds after the start."""
        end = 0
        for when, size in zip(self._times, self._ends, strict=True):
            if when > t:
                break
            end = size
        return end

    @property
    def marks(self) -> int:
        """How many marks the recording holds (at most ``MAX_MARKS`` + 1: it thins them)."""
        return len(self._times)

    @property
    def coalesce_s(self) -> float:
        """Output closer than this to the last mark joins it (doubled at each thinning)."""
        return self._coalesce

    @property
    def duration(self) -> float:
        return self._times[-1] if self._times else 0.0

    def events(self) -> Iterator[tuple[float, int, int]]:
        """(t, start, end) of each mark's part of the log."""
        start = 0
        for t, end in zip(self._times, self._ends, strict=True):
            if end > start:
                yield t, start, end
                start = end


def _header(rec: Recording) -> str:
    rows, cols = rec.first_size
    return json.dumps({"version": 2, "width": cols, "height": rows, "timestamp": int(rec.started)})


def cast_lines(rec: Recording, log: _Log) -> Iterator[str]:
    """The asciicast v2 of ``rec`` over ``log``, one JSON line at a time (no newlines). A
    resize comes where the log stood when it happened, and times never go back."""
    yield _header(rec)
    for t, kind, data in _events(rec, log):
        yield _event(t, kind, data)


def session_cast_lines(parts: Sequence[tuple[Recording, _Log]]) -> Iterator[str]:
    """One asciicast v2 of several recordings in turn (a shell's commands, oldest first):
    each at its own start's distance from the first, with a resize where one starts at
    another size than the one before it ended."""
    if not parts:
        return
    first = parts[0][0]
    yield _header(first)
    size, clock = first.first_size, 0.0
    for rec, log in parts:
        offset = max(clock, rec.started - first.started)
        if rec.first_size != size:
            yield _event(offset, "r", f"{rec.first_size[1]}x{rec.first_size[0]}")
        clock = offset
        for t, kind, data in _events(rec, log):
            clock = max(clock, offset + t)
            yield _event(clock, kind, data)
        size = rec.size


def _event(t: float, kind: str, data: str) -> str:
    return json.dumps([round(t, 6), kind, data], ensure_ascii=False)


def _events(rec: Recording, log: _Log) -> Iterator[tuple[float, str, str]]:
    """(t, "o" | "r", data) of ``rec`` over ``log``, times never going back."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    resizes = deque(rec.resizes)
    total = log.size()
    clock = 0.0
    for t, start, end in rec.events():
        end, pos = min(end, total), start
        while True:
            while resizes and resizes[0][1] <= pos:
                rt, _, r, c = resizes.popleft()
                clock = max(clock, rt)
                yield clock, "r", f"{c}x{r}"
            clock = max(clock, t)
            stop = min(end, resizes[0][1]) if resizes else end
            while pos < stop:
                part = min(stop, pos + _READ_CHUNK)
                text = decoder.decode(log.read(pos, part)).replace("\n", "\r\n")
                pos = part
                if text:
                    yield clock, "o", text
            if pos >= end:
                break
    for rt, _, r, c in resizes:
        clock = max(clock, rt)
        yield clock, "r", f"{c}x{r}"
    tail = decoder.decode(b"", final=True)
    if tail:
        yield max(clock, rec.duration), "o", tail


def cast_text(rec: Recording, log: _Log) -> str:
    return "".join(line + "\n" for line in cast_lines(rec, log))
