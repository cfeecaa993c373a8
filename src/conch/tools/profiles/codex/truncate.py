"""Codex's cut of a long output, as Codex CLI 0.171.0 makes it (a pure function of the text).

Codex counts tokens as bytes / 4 (rounded up) and keeps a budget of ``max_output_tokens * 4``
bytes: half from the head, the rest from the tail, both on character boundaries, with
``…N tokens truncated…`` between them (N is the bytes over the budget, / 4 rounded up). Over
budget, the text is headed by ``Warning: truncated output (original token count: N)`` and
``Total output lines: N``. Conch adds one line to that header saying where the bytes it left
out are in the job's lossless log (:class:`Cut` gives their byte range in the text).

The text is the output decoded as Codex decodes it (invalid UTF-8 → U+FFFD, one per maximal
invalid subsequence); :func:`decode` also says where each replacement stood in the raw bytes,
so a cut in the text maps back to raw log offsets.
"""

from __future__ import annotations

import codecs
from contextvars import ContextVar
from dataclasses import dataclass

BYTES_PER_TOKEN = 4
_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = len(_REPLACEMENT.encode())


def approx_tokens(nbytes: int) -> int:
    """Codex's token estimate of ``nbytes`` bytes."""
    return (max(nbytes, 0) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def line_count(text: str) -> int:
    """Lines as Rust's ``str::lines`` counts them (a final line ending adds none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


@dataclass(frozen=True)
class Cut:
    """A cut text: what is shown, and the byte range ``[start, end)`` of the text (as UTF-8)
    left out; ``start == end`` when nothing was."""

    text: str
    start: int
    end: int

    @property
    def cut(self) -> bool:
        return self.end > self.start


def truncate_middle(text: str, max_tokens: int) -> Cut:
    """``text`` within ``max_tokens`` tokens: head, Codex's marker, tail (no header)."""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    budget = max(max_tokens, 0) * BYTES_PER_TOKEN
    if total == 0 or (max_tokens > 0 and total <= budget):
        return Cut(text, total, total)
    marker = f"…{approx_tokens(total - budget)} tokens truncated…"
    if budget == 0:
        return Cut(marker, 0, total)
    left = budget // 2
    right = budget - left
    head_end = _boundary_at_or_before(data, left)
    tail_start = max(_boundary_at_or_after(data, total - right), head_end)
    shown = data[:head_end].decode("utf-8", "surrogatepass") + marker
    shown += data[tail_start:].decode("utf-8", "surrogatepass")
    return Cut(shown, head_end, tail_start)


def formatted(text: str, max_tokens: int) -> Cut:
    """Codex's ``formatted_truncate_text``: ``text`` when it fits, else the warning header
    and the middle cut."""
    nbytes = len(text.encode("utf-8", "surrogatepass"))
    if nbytes <= max(max_tokens, 0) * BYTES_PER_TOKEN:
        return Cut(text, nbytes, nbytes)
    cut = truncate_middle(text, max_tokens)
    header = (
        f"Warning: truncated output (original token count: {approx_tokens(nbytes)})\n"
        f"Total output lines: {line_count(text)}\n\n"
    )
    return Cut(header + cut.text, cut.start, cut.end)


def _is_continuation(b: int) -> bool:
    return b & 0xC0 == 0x80


def _boundary_at_or_before(data: bytes, i: int) -> int:
    i = min(i, len(data))
    while 0 < i < len(data) and _is_continuation(data[i]):
        i -= 1
    return i


def _boundary_at_or_after(data: bytes, i: int) -> int:
    i = max(i, 0)
    while i < len(data) and _is_continuation(data[i]):
        i += 1
    return i


# --- decoding as Codex does, with the raw offsets kept ------------------------------------------


@dataclass(frozen=True)
class Decoded:
    """Raw bytes as text (``String::from_utf8_lossy``), and the raw ``(start, end)`` of every
    invalid sequence that became one U+FFFD."""

    text: str
    replaced: tuple[tuple[int, int], ...]

    def raw_offset(self, text_offset: int) -> int:
        """The raw offset of a UTF-8 byte offset of ``text`` (at a character boundary)."""
        shift = 0
        for start, end in self.replaced:
            if start + shift >= text_offset:
                break
            shift += _REPLACEMENT_BYTES - (end - start)
        return text_offset - shift


# the replacements of the decode under way in this thread or task (an error handler is
# registered once, by name, so it finds its list through the context)
_SEEN: ContextVar[list[tuple[int, int]] | None] = ContextVar("conch_codex_lossy", default=None)


def _record(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    seen = _SEEN.get()
    if seen is not None:
        seen.append((error.start, error.end))
    return _REPLACEMENT, error.end


codecs.register_error("conch-codex-lossy", _record)


def decode(raw: bytes) -> Decoded:
    """``raw`` decoded as Codex decodes output (CPython and Rust replace the same maximal
    invalid subsequences), with where each replacement stood."""
    seen: list[tuple[int, int]] = []
    token = _SEEN.set(seen)
    try:
        text = raw.decode("utf-8", "conch-codex-lossy")
    finally:
        _SEEN.reset(token)
    return Decoded(text, tuple(seen))
