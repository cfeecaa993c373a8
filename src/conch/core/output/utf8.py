"""UTF-8 helpers that never split a code point.

Everything here is pure and works on in-memory data. "Valid" means strict UTF-8: no overlong
forms, no surrogates, nothing above U+10FFFF. Bytes that cannot be part of a valid sequence are
their own single-byte "characters", so cutting next to them is always fine.

The data is usually a slice of a longer log, so a valid *prefix* of a sequence that runs into
the end of the data is treated as the sequence it may yet become: ``boundary_at_or_before(data,
len(data))`` backs off a character whose last bytes are not there yet instead of cutting it.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = [
    "BytesLike",
    "boundary_at_or_after",
    "boundary_at_or_before",
    "decode",
    "utf8_len",
]

BytesLike: TypeAlias = bytes | bytearray | memoryview

# Lone surrogates (e.g. from ``surrogateescape``) count as 3 bytes instead of raising.
_ENCODE_ERRORS = "surrogatepass"


def _sequence_length(data: BytesLike, start: int, size: int) -> int:
    """Length (2-4) of the multi-byte sequence starting at ``start``, else 0.

    The bytes that are there must be valid; the sequence may be cut short by ``size``.
    """
    lead = data[start]
    if lead < 0xC2 or lead > 0xF4:
        return 0
    if lead < 0xE0:
        length, low, high = 2, 0x80, 0xBF
    elif lead < 0xF0:
        length = 3
        low = 0xA0 if lead == 0xE0 else 0x80
        high = 0x9F if lead == 0xED else 0xBF
    else:
        length = 4
        low = 0x90 if lead == 0xF0 else 0x80
        high = 0x8F if lead == 0xF4 else 0xBF
    stop = min(start + length, size)
    if start + 1 < stop and not low <= data[start + 1] <= high:
        return 0
    for k in range(start + 2, stop):
        if not 0x80 <= data[k] <= 0xBF:
            return 0
    return length


def boundary_at_or_before(data: BytesLike, i: int) -> int:
    """Largest ``j <= i`` where cutting ``data`` splits no valid multi-byte sequence.

    ``i`` is clamped to ``0..len(data)``. Looks back at most 3 bytes. A valid sequence prefix
    that the end of ``data`` cuts short counts as a sequence (see the module docstring).
    """
    size = len(data)
    i = min(max(i, 0), size)
    for back in (1, 2, 3):
        start = i - back
        if start < 0:
            break
        byte = data[start]
        if 0x80 <= byte <= 0xBF:
            continue  # continuation byte: the lead (if any) is further back
        if _sequence_length(data, start, size) > back:
            return start
        break
    return i


def boundary_at_or_after(data: BytesLike, i: int) -> int:
    """Smallest ``j >= i`` where cutting splits no valid sequence, capped at ``len(data)``."""
    size = len(data)
    i = min(max(i, 0), size)
    start = boundary_at_or_before(data, i)
    if start == i:
        return i
    return min(start + _sequence_length(data, start, size), size)


def utf8_len(text: str) -> int:
    """Number of bytes ``text`` takes as UTF-8."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", _ENCODE_ERRORS))


def decode(data: BytesLike) -> str:
    """Decode UTF-8, turning each maximal invalid subsequence into U+FFFD."""
    return str(data, "utf-8", "replace")
