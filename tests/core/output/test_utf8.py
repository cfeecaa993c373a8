"""Tests for conch.core.output.utf8: boundaries, lengths, decoding."""

from __future__ import annotations

import codecs
import random

import pytest

from conch.core.output.utf8 import (
    boundary_at_or_after,
    boundary_at_or_before,
    decode,
    utf8_len,
)

MIXED_TEXT = "aé你😀b\tĀ€𐍈z"

SAMPLES: list[bytes] = [
    b"",
    b"plain ascii",
    "é".encode(),
    "你".encode(),
    "😀".encode(),
    MIXED_TEXT.encode(),
    b"a\xffb\xfe",  # bytes that never occur in UTF-8
    b"\xe4\xbd",  # truncated 3-byte sequence at the end
    b"x\xf0\x9f\x98",  # truncated 4-byte sequence at the end
    b"\xe4\xbdA\xe4\xbd\xa0",  # truncated sequence followed by a valid one
    b"\xc0\x80\xc1\xbf",  # overlong encodings
    b"\xed\xa0\x80\xed\xbf\xbf",  # encoded surrogates
    b"\xf4\x90\x80\x80\xf4\x8f\xbf\xbf",  # above U+10FFFF, then U+10FFFF
    b"\xe0\x9f\x80\xe0\xa0\x80",  # overlong 3-byte, then the smallest valid one
    b"\xf0\x8f\xbf\xbf\xf0\x90\x80\x80",  # overlong 4-byte, then the smallest valid one
    b"\x80\x80\xbf\xc3",  # stray continuation bytes and a lone lead
]


def _random_samples() -> list[bytes]:
    rng = random.Random(1234)
    alphabet = [b"a", b"\x1b", "é".encode(), "你".encode(), "😀".encode(), b"\x80", b"\xe4"]
    out = []
    for _ in range(40):
        out.append(b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
        out.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))))
    return out


ALL_SAMPLES = SAMPLES + _random_samples()


def _is_valid_prefix(tail: bytes) -> bool:
    """Reference: is ``tail`` the unfinished start of one valid multi-byte character?"""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(tail) == "" and decoder.getstate()[0] == tail
    except UnicodeDecodeError:
        return False


def _splits_valid_sequence(data: bytes, j: int) -> bool:
    """Reference: does cutting at j split a valid 2-4 byte sequence (or one cut short by the
    end of the data, which may yet be completed)?"""
    for start in range(max(0, j - 3), j):
        if _is_valid_prefix(data[start:]):
            return True
        for length in (2, 3, 4):
            end = start + length
            if end <= j or end > len(data):
                continue
            try:
                decoded = data[start:end].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(decoded) == 1:
                return True
    return False


@pytest.mark.parametrize("data", ALL_SAMPLES)
def test_boundary_at_or_before_is_the_largest_safe_cut(data: bytes) -> None:
    for i in range(len(data) + 1):
        j = boundary_at_or_before(data, i)
        assert 0 <= j <= i
        assert i - j <= 3
        assert not _splits_valid_sequence(data, j)
        assert all(_splits_valid_sequence(data, k) for k in range(j + 1, i + 1))


@pytest.mark.parametrize("data", ALL_SAMPLES)
def test_boundary_at_or_after_is_the_smallest_safe_cut(data: bytes) -> None:
    for i in range(len(data) + 1):
        j = boundary_at_or_after(data, i)
        assert i <= j <= len(data)
        assert j == len(data) or not _splits_valid_sequence(data, j)
        assert all(_splits_valid_sequence(data, k) for k in range(i, j))


@pytest.mark.parametrize("text", ["é", "你", "😀"])
def test_multibyte_character_is_never_cut_inside(text: str) -> None:
    data = text.encode()
    assert boundary_at_or_before(data, 0) == 0
    assert boundary_at_or_after(data, len(data)) == len(data)
    for i in range(1, len(data)):
        assert boundary_at_or_before(data, i) == 0
        assert boundary_at_or_after(data, i) == len(data)


def test_cuts_next_to_invalid_bytes_are_allowed_everywhere() -> None:
    data = b"\xff\xe4\xbdA\xfe\xc3(\xed\xa0"  # no valid multi-byte sequence anywhere
    for i in range(len(data) + 1):
        assert boundary_at_or_before(data, i) == i
        assert boundary_at_or_after(data, i) == i


def test_character_cut_short_by_the_end_of_data_is_not_split() -> None:
    data = "x😀".encode()[:-1]  # the last byte of the emoji has not arrived yet
    assert boundary_at_or_before(data, len(data)) == 1
    assert boundary_at_or_before(data, 2) == 1
    assert boundary_at_or_after(data, 2) == len(data)
    assert boundary_at_or_before(b"ab\xc3", 3) == 2  # a lone lead byte may still be completed
    assert boundary_at_or_before(b"ab\xed\xa0", 4) == 4  # would be a surrogate: never valid
    assert boundary_at_or_before(b"ab\xe4\xbdA", 5) == 5  # already broken by the "A"


def test_boundaries_accept_bytearray_and_memoryview() -> None:
    data = "a你b".encode()
    for wrapped in (bytearray(data), memoryview(data)):
        assert boundary_at_or_before(wrapped, 2) == 1
        assert boundary_at_or_after(wrapped, 2) == 4


def test_boundaries_clamp_out_of_range_indices() -> None:
    data = "é".encode()
    assert boundary_at_or_before(data, -5) == 0
    assert boundary_at_or_before(data, 99) == 2
    assert boundary_at_or_after(data, -5) == 0
    assert boundary_at_or_after(data, 99) == 2


def test_utf8_len_counts_encoded_bytes() -> None:
    assert utf8_len("") == 0
    assert utf8_len("abc") == 3
    assert utf8_len("é你😀") == 2 + 3 + 4
    assert utf8_len("\udcff") == 3  # a lone surrogate is counted, not an error


def test_decode_replaces_invalid_bytes_with_replacement_character() -> None:
    assert decode(b"ok \xff\xfe") == "ok \ufffd\ufffd"
    assert decode(b"\xe4\xbdA") == "\ufffdA"  # one replacement per maximal invalid subpart
    assert decode(memoryview("你".encode())) == "你"
    assert decode(bytearray(b"x")) == "x"
