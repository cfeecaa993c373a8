"""Replace a private path in a byte stream, at any chunking (pure, I/O-free).

A shell sources each command from a private file, so its own error messages name that file
(`/…/tmp/…-s_x.sh: line 1: syntax error …`). What a person typing the command would have seen
names the shell instead (`bash: line 1: …`); the scrubber makes the output say that.
"""

from __future__ import annotations


class PathScrubber:
    def __init__(self, needle: bytes, replacement: bytes) -> None:
        if not needle:
            raise ValueError("needle must not be empty")
        self._needle = needle
        self._replacement = replacement
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """Bytes that are final; a tail that may start the needle is held back."""
        buf = (self._held + data).replace(self._needle, self._replacement)
        keep = 0
        for n in range(min(len(self._needle) - 1, len(buf)), 0, -1):
            if self._needle.startswith(buf[-n:]):
                keep = n
                break
        self._held = buf[len(buf) - keep :] if keep else b""
        return buf[: len(buf) - keep]

    def flush(self) -> bytes:
        """The held-back tail (it did not turn out to be the needle)."""
        out, self._held = self._held, b""
        return out
