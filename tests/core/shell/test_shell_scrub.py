"""The private-path scrubber, fed at every byte split."""

from __future__ import annotations

import itertools

import pytest

from conch.core.shell.scrub import PathScrubber

NEEDLE = b"/data/tmp/20261130-s_0123456789.sh"


def run(chunks: list[bytes]) -> bytes:
    s = PathScrubber(NEEDLE, b"bash")
    return b"".join(s.feed(c) for c in chunks) + s.flush()


CASES = [
    NEEDLE + b": line 1: syntax error\n",
    b"a" + NEEDLE + b"b" + NEEDLE,
    b"no path here /data/tmp/2026 partial",
    b"/data/tmp/",
    NEEDLE[:-1] + b"X",
    b"\xff\xfe" + NEEDLE + b"\x00",
]


@pytest.mark.parametrize("data", CASES)
def test_every_single_split(data: bytes) -> None:
    expected = data.replace(NEEDLE, b"bash")
    assert run([data]) == expected
    for i in range(len(data) + 1):
        assert run([data[:i], data[i:]]) == expected


def test_every_double_split_of_a_short_input() -> None:
    data = b"x" + NEEDLE + b": y"
    expected = b"xbash: y"
    for i, j in itertools.combinations(range(len(data) + 1), 2):
        assert run([data[:i], data[i:j], data[j:]]) == expected


def test_byte_by_byte_holds_back_only_a_possible_start() -> None:
    s = PathScrubber(NEEDLE, b"bash")
    out = b"".join(s.feed(bytes([b])) for b in b"hello /data/tmp/ world")
    assert out + s.flush() == b"hello /data/tmp/ world"
    assert s.feed(b"abc") == b"abc"
