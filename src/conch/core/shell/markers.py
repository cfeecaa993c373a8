"""The end-of-command protocol of a persistent shell, as pure machines: bytes in, events out.

How a command runs (see ``session.py``): the server writes one short *trigger line* to the
terminal, ``__conch_n=<nonce>;. '<command file>' 8>&-``. The terminal echoes that line (the
shell reads it with line editing off, so the kernel's echo is the only echo); then comes the
command's own output. The end of the command never crosses the terminal: the shell's prompt
hook writes the *end marker* ``<nonce>:<exit status>`` as one message to the shell's end of
its marker channel (``channel.py``), which only the shell holds and whose other end tells
Conch which process wrote each message.

* :class:`EchoFilter` drops the echo of the trigger line from the terminal stream (only the
  exact bytes that were sent, once); everything else the terminal shows is output, whatever it
  looks like.
* :class:`Markers` turns a message from the channel into ``Done(status)`` when it carries the
  nonce of the command that runs; any other message (an earlier command's prompt, after
  typed-ahead input or a Ctrl-C at the prompt) ends nothing.

No I/O and no clock: the same bytes give the same output however they are split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BODY = re.compile(rb"([0-9a-f]{1,32}):([0-9]{1,3})")


@dataclass(frozen=True)
class Done:
    nonce: str
    status: int


class EchoFilter:
    """The terminal stream less the echo of the trigger line that was sent last."""

    def __init__(self) -> None:
        self._echo: bytes | None = None
        self._held = b""  # a tail that may be the start of the echo

    @property
    def held(self) -> int:
        """How many bytes are held back as a possible start of the echo."""
        return len(self._held)

    def expect(self, echo: bytes | None) -> None:
        """A trigger line was sent: drop its echo (None: echo is off, nothing to drop)."""
        assert not self._held, "flush() before the next trigger line"
        self._echo = echo or None

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` is output now; a tail that may begin the echo is held back."""
        echo = self._echo
        if echo is None:
            return data
        buf = self._held + data if self._held else data
        self._held = b""
        i = buf.find(echo)
        if i >= 0:
            self._echo = None
            return buf[:i] + buf[i + len(echo) :]
        for keep in range(min(len(echo) - 1, len(buf)), 0, -1):
            if echo.startswith(buf[-keep:]):
                self._held = buf[-keep:]
                return buf[:-keep]
        return buf

    def flush(self) -> bytes:
        """The command ended (or the shell did): what was held back is output after all."""
        held, self._held, self._echo = self._held, b"", None
        return held


class Markers:
    """Which message of the marker channel ends the command that runs."""

    def __init__(self) -> None:
        self.nonce: str | None = None

    def expect(self, nonce: str) -> None:
        """A trigger line with ``nonce`` was sent: its end marker ends the command."""
        self.nonce = nonce

    @property
    def pending(self) -> bool:
        """True while a command was sent and its end marker has not come."""
        return self.nonce is not None

    def take(self, message: bytes) -> Done | None:
        """``Done`` if ``message`` is the end marker of the command that runs, else None."""
        m = _BODY.fullmatch(message)
        if m is None or self.nonce is None or m.group(1).decode("ascii") != self.nonce:
            return None
        self.nonce = None
        return Done(m.group(1).decode("ascii"), int(m.group(2)))
