"""Turn raw terminal/pipe bytes into the text a person would have seen.

Rules, applied in this order:

1. Decode UTF-8; invalid bytes become U+FFFD (Python's ``errors="replace"``).
2. Drop escape sequences: CSI (``ESC [`` or a decoded U+009B, parameter/intermediate bytes
   0x20-0x3F, final byte 0x40-0x7E), OSC (``ESC ]`` ... BEL or ST), DCS/SOS/PM/APC
   (``ESC P``/``X``/``^``/``_`` ... ST) and other escapes (``ESC``, intermediates 0x20-0x2F,
   one final byte 0x30-0x7E). A sequence broken by an unexpected character is dropped up to
   that character, which is then handled normally; one cut off by the end of the input is
   dropped entirely (so is a lone trailing ESC). The body of any sequence is capped at
   ``MAX_SEQUENCE_BODY`` characters: past that the introducer and the capped body are dropped
   and parsing resumes as ordinary text, which bounds what a stream has to hold back.
3. Drop the other C0 controls (except ``\\n``, ``\\t``, ``\\r``, ``\\b``), DEL and C1 controls.
4. Render each line on a cell model: ``\\r`` returns the cursor to column 0, ``\\b`` moves it
   one column left (not past 0); text overwrites what is under the cursor. ``\\r\\n`` therefore
   ends a line unchanged. One code point is one column.
5. ``\\n`` ends a line; nothing else changes (tabs kept, trailing spaces kept).

``normalize`` does this to a complete input; ``Normalizer`` does it to a stream, with
``"".join(feed(c) for c in chunks) + flush() == normalize(b"".join(chunks))`` for any
chunking.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

from conch.core.output.utf8 import BytesLike, boundary_at_or_before, decode

__all__ = [
    "MAX_SEQUENCE_BODY",
    "WINDOW_ESCAPE_LOOKBACK",
    "Normalizer",
    "normalize",
    "safe_window_end",
]

MAX_SEQUENCE_BODY: Final = 4096
"""Most characters of an escape sequence's body (OSC/DCS string, CSI parameters) honoured."""

WINDOW_ESCAPE_LOOKBACK: Final = 64
"""How far before a window end ``safe_window_end`` looks for an unterminated escape."""

_B = MAX_SEQUENCE_BODY

# Anything that makes a text need more than decoding: C0 except \t and \n, DEL, C1.
_SPECIAL_RE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ASCII_SPECIALS: Final = tuple(chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F))

# Controls that are simply deleted (not ESC/U+009B, which start sequences; not \r/\b).
_CONTROL_RE: Final = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9a\x9c-\x9f]+")
_ASCII_CONTROLS: Final = tuple(c for c in _ASCII_SPECIALS if c not in "\b\r\x1b")

# One left-to-right pass; every match is deleted. Each alternative is "introducer, greedy body
# up to the cap, optional terminator", so a match never depends on characters after it once it
# has a terminator, and one without a terminator that reaches the end of the text is exactly
# an escape sequence that more input could still change (``lastgroup`` is None for it). Every
# alternative starts with a literal so the engine can skip quickly to ESC / U+009B. Plain
# control characters are deleted in a second pass: a run of them never contains ESC or U+009B,
# so deleting them first or in the same pass could not change which sequences this one finds.
_ESCAPE_RE: Final = re.compile(
    rf"\x1b(?:\[[\x20-\x3f]{{0,{_B}}}(?P<csi>[\x40-\x7e])?"
    rf"|\][^\x07\x1b]{{0,{_B}}}(?P<osc>\x07|\x1b\\)?"
    rf"|[PX^_][^\x1b]{{0,{_B}}}(?P<dcs>\x1b\\)?"
    rf"|[\x20-\x2f]{{0,{_B}}}(?P<esc>[\x30-\x7e])?)"
    rf"|\x9b[\x20-\x3f]{{0,{_B}}}(?P<csi8>[\x40-\x7e])?"
)

# The same grammar on raw bytes, for deciding where a display window may end.
_RAW_SEQUENCE_RE: Final = re.compile(
    rb"(?:\x1b\[|\xc2\x9b)[\x20-\x3f]*(?P<csi>[\x40-\x7e])?"
    rb"|\x1b\][^\x07\x1b]*(?P<osc>\x07|\x1b\\)?"
    rb"|\x1b[PX^_][^\x1b]*(?P<dcs>\x1b\\)?"
    rb"|\x1b[\x20-\x2f]*(?P<esc>[\x30-\x7e])?"
)

_CURSOR_SPLIT_RE: Final = re.compile(r"([\r\b])")


class _Line:
    """One line being rendered: plain pieces until a ``\\r``/``\\b`` needs the cell model."""

    __slots__ = ("_cells", "_col", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._cells: list[str] | None = None
        self._col = 0

    def write(self, segment: str) -> None:
        """Apply ``segment`` (no ``\\n``; only ``\\r``/``\\b``/``\\t`` controls) to the line."""
        if not segment:
            return
        cells = self._cells
        if cells is None:
            if "\r" not in segment and "\b" not in segment:
                self._parts.append(segment)
                return
            cells = list("".join(self._parts))
            self._parts = []
            self._cells = cells
            col = len(cells)
        else:
            col = self._col
        for piece in _CURSOR_SPLIT_RE.split(segment):
            if piece == "\r":
                col = 0
            elif piece == "\b":
                if col:
                    col -= 1
            elif piece:
                end = col + len(piece)
                cells[col:end] = piece
                col = end
        self._col = col

    def text(self) -> str:
        if self._cells is None:
            return "".join(self._parts)
        return "".join(self._cells)


def _has_special(text: str) -> bool:
    if text.isascii():
        return any(c in text for c in _ASCII_SPECIALS)
    return _SPECIAL_RE.search(text) is not None


def _clean(text: str) -> str:
    """Delete escape sequences (unfinished ones at the end too) and plain control characters."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPE_RE.sub("", text)
    if not text.isascii() or any(c in text for c in _ASCII_CONTROLS):
        text = _CONTROL_RE.sub("", text)
    return text


def _render(text: str) -> str:
    """Apply the line model to complete text that has had escapes and controls removed."""
    if "\r" in text:
        # Where the cursor is when a line ends does not matter: \r\n is just \n.
        text = text.replace("\r\n", "\n")
    if "\r" not in text and "\b" not in text:
        return text
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if "\b" in line:
            rendered = _Line()
            rendered.write(line)
            lines[index] = rendered.text()
        elif "\r" in line:
            lines[index] = _overlay(line)
    return "\n".join(lines)


def _overlay(line: str) -> str:
    """A whole line of ``\r``-separated frames (no ``\b``) as the cell model renders it.

    Every frame is written from column 0, so each cell shows the last frame long enough to
    reach it: the last frame, then what earlier, longer frames leave visible past its end.
    A progress bar rewritten many times costs a split and a length scan, not a cell walk.
    """
    frames = line.split("\r")
    result = frames[-1]
    width = len(result)
    if max(map(len, frames)) <= width:
        return result
    for frame in reversed(frames):
        if len(frame) > width:
            result += frame[width:]
            width = len(frame)
    return result


def _unfinished_tail(text: str) -> int:
    """Index where an escape sequence that more input could change starts, else ``len(text)``.

    Every ESC either starts a match or is the ESC of an ``ESC \\`` that ends one, and after the
    last ESC every U+009B starts a match, so only the last of each needs looking at.
    """
    size = len(text)
    resume = 0
    esc = text.rfind("\x1b")
    if esc >= 0:
        if text.startswith("\\", esc + 1):
            resume = esc + 2
        else:
            match = _ESCAPE_RE.match(text, esc)
            if match is not None:
                if match.end() == size:
                    return esc if match.lastgroup is None else size
                resume = match.end()
    csi = text.rfind("\x9b", resume)
    if csi >= 0:
        match = _ESCAPE_RE.match(text, csi)
        if match is not None and match.end() == size and match.lastgroup is None:
            return csi
    return size


def normalize(data: BytesLike) -> str:
    """Normalize a complete output. Text without controls is returned as decoded."""
    text = decode(data)
    if not _has_special(text):
        return text
    return _render(_clean(text))


def _new_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


class Normalizer:
    """Incremental ``normalize`` for a stream of chunks.

    Holds back at most the current line (already rendered), an unfinished escape sequence
    (bounded by ``MAX_SEQUENCE_BODY``) and up to 3 bytes of an unfinished UTF-8 sequence.
    """

    __slots__ = ("_decoder", "_held", "_line")

    def __init__(self) -> None:
        self._decoder = _new_decoder()
        self._held = ""
        self._line = _Line()

    @property
    def held(self) -> int:
        """How many characters of an unfinished sequence are held back for the next feed."""
        return len(self._held)

    def feed(self, data: BytesLike) -> str:
        """Consume ``data``; return the text that is final (whole lines, ending in ``\\n``)."""
        text = self._decoder.decode(bytes(data))
        if self._held:
            text = self._held + text
            self._held = ""
        if not text:
            return ""
        if not _has_special(text):
            return self._emit(text)
        cut = _unfinished_tail(text)
        if cut < len(text):
            self._held = text[cut:]
            text = text[:cut]
        return self._emit(_clean(text))

    def pending(self) -> str:
        """The normalized partial line so far; later input may still change it."""
        return self._line.text()

    def flush(self) -> str:
        """End of input: return everything not yet returned and reset for reuse."""
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        out = self._emit(_clean(text)) if text else ""
        out += self._line.text()
        self._line = _Line()
        self._decoder.reset()
        return out

    def _emit(self, clean: str) -> str:
        last = clean.rfind("\n")
        if last < 0:
            self._line.write(clean)
            return ""
        first = clean.find("\n")
        self._line.write(clean[:first])
        head = self._line.text()
        self._line = _Line()
        self._line.write(clean[last + 1 :])
        if first == last:
            return head + "\n"
        return head + "\n" + _render(clean[first + 1 : last + 1])


def safe_window_end(data: BytesLike, end: int) -> int:
    """Largest ``j <= end`` that is a UTF-8 boundary and not inside an unfinished escape.

    Only an escape sequence starting within ``WINDOW_ESCAPE_LOOKBACK`` bytes before ``end`` and
    unterminated at ``end`` moves the cut to its start; otherwise this is the UTF-8 boundary.
    ``end`` is clamped to ``0..len(data)``.
    """
    end = min(max(end, 0), len(data))
    cut = boundary_at_or_before(data, end)
    start = max(0, end - WINDOW_ESCAPE_LOOKBACK)
    window = bytes(data[start:end])
    size = len(window)
    # An ESC is either the ESC of an ``ESC \\`` that ends a sequence or the start of one; bodies
    # never contain ESC. So scanning from the first ESC in the window parses it exactly.
    scan_from = window.find(b"\x1b")
    if scan_from < 0:
        scan_from = 0
    elif window.startswith(b"\\", scan_from + 1):
        scan_from += 2
    previous = last = None
    for match in _RAW_SEQUENCE_RE.finditer(window, scan_from):
        previous, last = last, match
    if last is None or last.end() != size or last.lastgroup is not None:
        return cut
    if (
        previous is not None
        and last.end() - last.start() == 1  # a lone trailing ESC: maybe the start of an ST
        and previous.end() == last.start()
        and previous.lastgroup is None
        and window[previous.start() + 1] in b"]PX^_"
    ):
        return start + previous.start()
    return start + last.start()
