"""The completion-marker protocol of a persistent shell, as a pure parser: bytes in, events out.

How a command runs (see ``session.py``): the server writes one short *trigger line* to the
terminal, ``__conch_n=<nonce>; . '<command file>'``. The terminal echoes that line (the shell reads
it with line editing off, so the kernel's echo is the only echo); then comes the command's own
output; then the shell's prompt hook prints the *end marker*::

    \\x1e <token> : <nonce> : <exit status> \\x1f

``token`` is random per shell, ``nonce`` random per command. The parser

* drops the echo of the trigger line (only the exact bytes that were sent, once),
* turns the end marker carrying the expected nonce into ``Done(status)``,
* silently drops end markers of earlier commands (a stray prompt), and
* passes everything else through as ``Output`` — a marker-lookalike with a wrong token or nonce
  is output like any other.

No I/O and no clock: the same bytes give the same events however they are split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARK_START = b"\x1e"
MARK_END = b"\x1f"
_MAX_BODY = 64  # nonce + status fit easily; anything longer is not ours
_BODY = re.compile(rb"^([0-9a-f]{1,32}):([0-9]{1,3})$")
_KEEP_OLD = 8


@dataclass(frozen=True)
class Output:
    data: bytes


@dataclass(frozen=True)
class Done:
    nonce: str
    status: int


Event = Output | Done


class MarkerParser:
    """Incremental parser of a shell's terminal stream (see the module docstring)."""

    def __init__(self, token: str) -> None:
        self.prefix = MARK_START + token.encode("ascii") + b":"
        self.nonce: str | None = None
        self._old: list[str] = []
        self._echo: bytes | None = None
        self._buf = b""

    def expect(self, nonce: str, echo: bytes | None) -> None:
        """A trigger line was sent: wait for its echo (if echo is on) and its end marker."""
        if self.nonce is not None:
            self._retire(self.nonce)
        self.nonce = nonce
        self._echo = echo or None

    def _retire(self, nonce: str) -> None:
        self._old.append(nonce)
        del self._old[:-_KEEP_OLD]

    @property
    def pending(self) -> bool:
        """True while a command was sent and its end marker has not been seen."""
        return self.nonce is not None

    def feed(self, data: bytes) -> list[Event]:
        self._buf += data
        events: list[Event] = []
        out = bytearray()
        buf = self._buf
        pos = 0
        n = len(buf)
        while pos < n:
            k = buf.find(MARK_START, pos)
            plain_end = n if k < 0 else k
            if pos < plain_end:
                if self._echo is not None:
                    pos = self._strip_echo(buf, pos, plain_end, k >= 0, out)
                    if self._echo is not None and pos < plain_end:
                        break  # a possible start of the echo is held back
                    continue
                out += buf[pos:plain_end]
                pos = plain_end
                continue
            # buf[pos] is MARK_START: a marker, a prefix of one, or plain output
            rest = buf[pos : pos + len(self.prefix)]
            if not self.prefix.startswith(rest):
                out += buf[pos : pos + 1]
                pos += 1
                continue
            if len(rest) < len(self.prefix):
                break  # could still become a marker: hold it
            body_start = pos + len(self.prefix)
            end = buf.find(MARK_END, body_start, body_start + _MAX_BODY + 1)
            if end < 0:
                if n - body_start <= _MAX_BODY:
                    break  # incomplete marker: hold it
                out += buf[pos : pos + 1]
                pos += 1
                continue
            m = _BODY.match(buf[body_start:end])
            nonce = m.group(1).decode("ascii") if m else None
            if m and nonce is not None and nonce == self.nonce:
                if out:
                    events.append(Output(bytes(out)))
                    out = bytearray()
                events.append(Done(nonce, int(m.group(2))))
                self._retire(nonce)
                self.nonce = None
                self._echo = None
                pos = end + 1
            elif m and nonce in self._old:
                pos = end + 1  # a prompt of an earlier command (e.g. after typed-ahead input)
            else:
                out += buf[pos : pos + 1]  # not ours: it is output like any other byte
                pos += 1
        self._buf = buf[pos:]
        if out:
            events.append(Output(bytes(out)))
        return events

    def _strip_echo(self, buf: bytes, pos: int, end: int, closed: bool, out: bytearray) -> int:
        """Copy buf[pos:end] to out minus the echo; return how far it got (the rest is held)."""
        echo = self._echo
        assert echo is not None
        i = buf.find(echo, pos, end)
        if i >= 0:
            out += buf[pos:i]
            self._echo = None
            return i + len(echo)
        if closed:
            # the echo never contains MARK_START, so it cannot continue past it
            out += buf[pos:end]
            return end
        # hold back the longest tail that could still be the beginning of the echo
        for keep in range(min(len(echo) - 1, end - pos), 0, -1):
            if echo.startswith(buf[end - keep : end]):
                out += buf[pos : end - keep]
                return end - keep
        out += buf[pos:end]
        return end

    def flush(self) -> list[Event]:
        """The stream ended (the shell exited): whatever is held back is output."""
        data, self._buf = self._buf, b""
        self._echo = None
        return [Output(data)] if data else []
