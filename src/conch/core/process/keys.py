"""Key names for `write {keys}` and the bytes a terminal sends for them."""

from __future__ import annotations

import signal
from collections.abc import Sequence

from conch.errors import ConchError

_NAMED = {
    "enter": b"\r",
    "return": b"\r",
    "tab": b"\t",
    "backspace": b"\x7f",
    "esc": b"\x1b",
    "escape": b"\x1b",
    "space": b" ",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "delete": b"\x1b[3~",
    "insert": b"\x1b[2~",
    "f1": b"\x1bOP",
    "f2": b"\x1bOQ",
    "f3": b"\x1bOR",
    "f4": b"\x1bOS",
    "f5": b"\x1b[15~",
    "f6": b"\x1b[17~",
    "f7": b"\x1b[18~",
    "f8": b"\x1b[19~",
    "f9": b"\x1b[20~",
    "f10": b"\x1b[21~",
    "f11": b"\x1b[23~",
    "f12": b"\x1b[24~",
}
KEY_NAMES = sorted(
    [
        *_NAMED,
        *(f"ctrl-{c}" for c in "abcdefghijklmnopqrstuvwxyz"),
        "ctrl-[",
        "ctrl-\\",
        "ctrl-]",
        "ctrl-^",
        "ctrl-_",
        "ctrl-@",
    ]
)


def encode_key(name: str) -> bytes:
    key = name.strip().lower().replace("+", "-").replace("control-", "ctrl-")
    if key.startswith("c-"):
        key = "ctrl-" + key[2:]
    if key in _NAMED:
        return _NAMED[key]
    if key.startswith("ctrl-") and len(key) == 6:
        c = key[5]
        if "a" <= c <= "z":
            return bytes([ord(c) - 96])
        special = {"@": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31}
        if c in special:
            return bytes([special[c]])
    raise ConchError("invalid_argument", f"unknown key {name!r}; known: {', '.join(KEY_NAMES)}")


def encode_keys(names: list[str]) -> bytes:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConchError("invalid_argument", "keys must be a list of key names")
    return b"".join(encode_key(n) for n in names)


def pipe_keys(names: Sequence[str]) -> tuple[bytes, list[int], bool]:
    """What named keys mean to a process on pipes, which has no terminal to turn them into
    signals: what a person pressing them would mean. Returns (bytes to write, signals to
    send, whether stdin closes)."""
    data, eof = b"", False
    signals: list[int] = []
    for key in names:
        k = key.strip().lower()
        if k in ("enter", "return"):
            data += b"\n"
        elif k in ("ctrl-c", "c-c"):
            signals.append(signal.SIGINT)
        elif k in ("ctrl-d", "c-d"):
            eof = True
        elif k in ("ctrl-\\",):
            signals.append(signal.SIGQUIT)
        else:
            data += encode_keys([key])
    return data, signals, eof
