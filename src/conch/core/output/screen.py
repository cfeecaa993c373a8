"""A terminal screen: PTY output bytes in, the screen a person would see out (docs/spec.md §8).

The emulation is pyte's (a maintained VT emulator), with what Conch needs of it on top:

* the alternate screen (private modes 47, 1047, 1049), which pyte 0.8 lacks: full-screen
  programs (``top``, ``vim``, ``less``) switch to it and back, and the primary screen returns;
* a line feed that also returns the carriage: Conch's terminals do not map ``\n`` to
  ``\r\n`` (ONLCR is off, so logs hold plain ``\n``: core/process/terminal.py), so the
  screen does what the program meant (pyte's LNM mode);
* a stream that survives any input: a sequence pyte cannot handle (``CSI ? Pn L``, non-ASCII
  digits) is dropped, never the bytes after it;
* snapshots as data: the text of each row, the cursor, and each row as runs of one style.

A ``Screen`` is a pure state machine (``feed(bytes)``, ``snapshot()``); who feeds it and when
(only while someone looks) is core/jobs/screens.py's business.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any, TypedDict

import pyte
from pyte import modes
from pyte.screens import Char, StaticDefaultDict

# private modes arrive shifted by 5 bits (pyte's convention for DEC private modes)
_ALT_SAVES_CURSOR = 1049 << 5
_ALT_MODES = frozenset({47 << 5, 1047 << 5, 1049 << 5})


class Run(TypedDict):
    """Cells of one row in one style; colours are pyte's names (``red``, ``brightblue``,
    ``default``) or ``rrggbb`` hex."""

    text: str
    fg: str
    bg: str
    bold: bool
    italics: bool
    underscore: bool
    strikethrough: bool
    reverse: bool


class ScreenSnapshot(TypedDict):
    rows: int
    cols: int
    cursor: dict[str, Any]  # {"row": 0-based, "col": 0-based, "visible": bool}
    alternate: bool  # the program is on the alternate screen (full-screen mode)
    lines: list[str]  # the text of each row, trailing blanks cut
    runs: list[list[Run]]  # each row as styled runs (trailing default blanks cut)


class _Screen(pyte.Screen):
    """pyte's screen with the alternate screen, and tolerant of arguments pyte rejects."""

    def __init__(self, columns: int, lines: int) -> None:
        self._primary: tuple[Any, pyte.screens.Cursor] | None = None
        super().__init__(columns, lines)
        self.mode.add(modes.LNM)

    @property
    def alternate(self) -> bool:
        return self._primary is not None

    def reset(self) -> None:
        self._primary = None
        super().reset()
        self.mode.add(modes.LNM)

    def _enter_alternate(self, save_cursor: bool) -> None:
        # the alternate buffer starts blank (xterm keeps 47's old content; nothing relies on it)
        if self._primary is not None:
            return
        self._primary = (self.buffer, copy.copy(self.cursor))
        self.buffer = defaultdict(lambda: StaticDefaultDict[int, Char](self.default_char))
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, restore_cursor: bool) -> None:
        if self._primary is None:
            return
        self.buffer, cursor = self._primary
        self._primary = None
        if restore_cursor:
            self.cursor = cursor
            self.ensure_hbounds()
            self.ensure_vbounds()
        self.dirty.update(range(self.lines))

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            alt = [m << 5 for m in modes if m << 5 in _ALT_MODES]
            if alt:
                self._enter_alternate(save_cursor=_ALT_SAVES_CURSOR in alt)
                modes = tuple(m for m in modes if m << 5 not in _ALT_MODES)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            alt = [m << 5 for m in modes if m << 5 in _ALT_MODES]
            if alt:
                self._leave_alternate(restore_cursor=_ALT_SAVES_CURSOR in alt)
                modes = tuple(m for m in modes if m << 5 not in _ALT_MODES)
        super().reset_mode(*modes, **kwargs)

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        # as xterm does, not as pyte 0.8 does (it drops rows at the top whatever the cursor's
        # row, and leaves the cursor where it was): rows below the cursor go first, then rows
        # at the top, so the cursor's row stays in sight; both screens are resized alike
        lines, columns = lines or self.lines, columns or self.columns
        if (lines, columns) == (self.lines, self.columns):
            return
        if self._primary is not None:
            buffer, cursor = self._primary
            self._primary = (self._fit(buffer, cursor, lines, columns), cursor)
        self.buffer = self._fit(self.buffer, self.cursor, lines, columns)
        self.lines, self.columns = lines, columns
        self.dirty.update(range(lines))
        self.set_margins()  # a resize resets the scroll region

    def _fit(self, buffer: Any, cursor: pyte.screens.Cursor, lines: int, columns: int) -> Any:
        drop = max(0, cursor.y + 1 - lines)
        fitted: defaultdict[int, StaticDefaultDict[int, Char]] = defaultdict(
            lambda: StaticDefaultDict[int, Char](self.default_char)
        )
        for y, line in buffer.items():
            if 0 <= y - drop < lines:
                for x in [x for x in line if x >= columns]:
                    del line[x]
                fitted[y - drop] = line
        cursor.y = min(cursor.y - drop, lines - 1)
        cursor.x = min(cursor.x, columns - 1)
        return fitted

    # pyte gives these a `private` keyword they do not take (CSI ? Pn L, CSI ? r)
    def insert_lines(self, count: int | None = None, **kwargs: Any) -> None:
        super().insert_lines(count)

    def delete_lines(self, count: int | None = None, **kwargs: Any) -> None:
        super().delete_lines(count)

    def set_margins(self, top: int | None = None, bottom: int | None = None, **kw: Any) -> None:
        super().set_margins(top, bottom)

    def cursor_up(self, count: int | None = None, **kwargs: Any) -> None:
        super().cursor_up(count)

    def cursor_down(self, count: int | None = None, **kwargs: Any) -> None:
        super().cursor_down(count)


class _Stream(pyte.ByteStream):
    """A byte stream that drops what the screen cannot take instead of raising out of feed
    (which would lose the rest of the chunk)."""

    def _send_to_parser(self, data: str) -> bool | None:
        try:
            return super()._send_to_parser(data)
        except Exception:  # pyte reset its parser: plain text follows
            return self._taking_plain_text


def _run(text: str, c: Char) -> Run:
    return {
        "text": text,
        "fg": c.fg,
        "bg": c.bg,
        "bold": c.bold,
        "italics": c.italics,
        "underscore": c.underscore,
        "strikethrough": c.strikethrough,
        "reverse": c.reverse,
    }


def _same_style(a: Char, b: Char) -> bool:
    return a[1:] == b[1:]


class Screen:
    """A terminal of ``rows`` × ``cols`` fed with what the program printed."""

    def __init__(self, rows: int, cols: int) -> None:
        self._screen = _Screen(cols, rows)
        self._stream = _Stream(self._screen)
        self.fed = 0  # bytes fed since the last reset

    @property
    def size(self) -> tuple[int, int]:
        return self._screen.lines, self._screen.columns

    def feed(self, data: bytes) -> None:
        self._stream.feed(data)
        self.fed += len(data)

    def resize(self, rows: int, cols: int) -> None:
        self._screen.resize(rows, cols)

    def reset(self) -> None:
        self._screen.reset()
        self._stream.utf8_decoder.reset()
        self._stream.use_utf8 = True
        self.fed = 0

    def text(self) -> list[str]:
        return [line.rstrip() for line in self._screen.display]

    def snapshot(self) -> ScreenSnapshot:
        s = self._screen
        runs: list[list[Run]] = []
        for y in range(s.lines):
            line = s.buffer[y]
            row: list[Run] = []
            chars: list[str] = []
            style: Char | None = None
            last = max((x for x in line if x < s.columns), default=-1)
            for x in range(last + 1):
                c = line[x]
                if c.data == "":  # the second cell of a wide character
                    continue
                if style is None or not _same_style(style, c):
                    if chars and style is not None:
                        row.append(_run("".join(chars), style))
                    chars, style = [], c
                chars.append(c.data)
            if chars and style is not None:
                row.append(_run("".join(chars), style))
            # trailing default blanks carry nothing (an erase leaves blank cells behind, a
            # screen never drawn that wide has none: the two look alike)
            while row and _is_plain(row[-1]) and not row[-1]["text"].rstrip(" "):
                row.pop()
            if row and _is_plain(row[-1]):
                row[-1]["text"] = row[-1]["text"].rstrip(" ")
            runs.append(row)
        return {
            "rows": s.lines,
            "cols": s.columns,
            "cursor": {"row": s.cursor.y, "col": s.cursor.x, "visible": not s.cursor.hidden},
            "alternate": s.alternate,
            "lines": self.text(),
            "runs": runs,
        }


def _is_plain(r: Run) -> bool:
    return r["bg"] == "default" and not r["reverse"] and not r["underscore"]


def screen_text(snap: ScreenSnapshot) -> str:
    """The screen as text: its rows (trailing empty rows left out) then where the cursor is."""
    lines = list(snap["lines"])
    while lines and not lines[-1]:
        lines.pop()
    cur = snap["cursor"]
    where = (
        f"[screen {snap['cols']}x{snap['rows']}"
        + (", alternate" if snap["alternate"] else "")
        + f"; cursor at row {cur['row'] + 1}, column {cur['col'] + 1}"
        + ("" if cur["visible"] else " (hidden)")
        + "]"
    )
    return "\n".join(lines) + ("\n" if lines else "") + where
