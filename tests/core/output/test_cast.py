"""Recordings (core/output/cast.py): timing marks over a log, written as asciicast v2."""

from __future__ import annotations

import json
import time

from conch.core.output.cast import MAX_MARKS, Recording, cast_text, session_cast_lines


class Log:
    def __init__(self) -> None:
        self.data = b""

    def size(self, stream: int | None = None) -> int:
        return len(self.data)

    def read(self, start: int, end: int, stream: int | None = None) -> bytes:
        return self.data[start:end]


def record(chunks: list[bytes], pause: float = 0.02) -> tuple[Recording, Log]:
    rec, log = Recording(24, 80), Log()
    for c in chunks:
        log.data += c
        rec.mark(len(log.data))
        time.sleep(pause)
    return rec, log


def test_header_has_the_terminal_size_and_events_their_time():
    rec, log = record([b"one\n", b"two\n"])
    lines = cast_text(rec, log).splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and (header["width"], header["height"]) == (80, 24)
    events = [json.loads(x) for x in lines[1:]]
    assert [e[1:] for e in events] == [["o", "one\r\n"], ["o", "two\r\n"]]
    assert 0 <= events[0][0] < events[1][0]


def test_a_character_split_across_chunks_is_whole_in_one_event():
    rec, log = record(["é".encode()[:1], "é".encode()[1:] + b"!"])
    events = [json.loads(x) for x in cast_text(rec, log).splitlines()[1:]]
    assert "".join(e[2] for e in events) == "é!"
    assert all("\ufffd" not in e[2] for e in events)


def test_chunks_close_together_share_one_event(monkeypatch):
    # a clock 1 ms a look: the three chunks come well inside the window, however loaded the
    # machine is (a real clock let a context switch split them)
    from conch.core.output import cast

    ticks = iter(range(1_000_000))

    class Clock:
        time = staticmethod(time.time)
        monotonic = staticmethod(lambda: next(ticks) / 1000)

    monkeypatch.setattr(cast, "time", Clock)
    rec, log = record([b"a", b"b", b"c"], pause=0)
    assert len(cast_text(rec, log).splitlines()) == 2


def test_marks_stay_bounded_for_a_job_that_never_stops():
    rec = Recording(24, 80, coalesce_s=0.0)  # every mark its own (as if 10 ms apart)
    for i in range(MAX_MARKS + 1000):
        rec.mark(i)
    assert rec.coalesce_s > 0 and rec.marks <= MAX_MARKS + 1


def test_a_resize_is_an_r_event():
    rec, log = record([b"x"])
    rec.resize(30, 100, log.size())
    log.data += b"y"
    time.sleep(0.02)
    rec.mark(len(log.data))
    events = [json.loads(x) for x in cast_text(rec, log).splitlines()[1:]]
    assert ["r", "100x30"] in [e[1:] for e in events]


def test_a_session_plays_its_recordings_in_turn_each_at_its_own_start():
    """A shell's session: several recordings as one cast, each offset by its start, a resize
    where one starts at another size than the last ended, times never going back (a later
    recording that claims an earlier start is held at the clock)."""
    first, log1 = Recording(24, 80), Log()
    log1.data = b"one\n"
    first.mark(4)
    second, log2 = Recording(30, 100), Log()  # (another size: a resize between them)
    log2.data = b"two\n"
    second.mark(4)
    second.started = first.started + 1.5
    third, log3 = Recording(30, 100), Log()
    log3.data = b"three\n"
    third.mark(6)
    third.started = first.started + 0.5  # out of step: never before what came earlier
    lines = list(session_cast_lines([(first, log1), (second, log2), (third, log3)]))
    header = json.loads(lines[0])
    assert (header["width"], header["height"], header["timestamp"]) == (
        80,
        24,
        int(first.started),
    )
    events = [json.loads(x) for x in lines[1:]]
    assert [e[1:] for e in events] == [
        ["o", "one\r\n"],
        ["r", "100x30"],
        ["o", "two\r\n"],
        ["o", "three\r\n"],
    ]
    times = [e[0] for e in events]
    assert times == sorted(times) and 1.5 <= times[1] <= times[2] <= times[3] < 1.6
    assert list(session_cast_lines([])) == []
