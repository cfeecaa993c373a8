"""Terminal text with colours, for the dashboard: raw log text → lines of styled segments.

SGR sequences (``ESC [ … m``) set the style; every other escape sequence and control
character is dropped; ``\\r`` and ``\\b`` move the cursor on a cell model so a rewritten line
shows its final content (as ``conch.core.output.normalize`` does for the plain text). The
result is data, never markup: the page puts each segment's text into a span with
``textContent``, so nothing a command prints can become HTML or reach the DOM as an escape.

A chunk is rendered on its own: ``lines[0]`` continues the line the previous chunk left open
(``reset_first`` says the chunk moved the cursor back to its start, so the page clears that
line first) and each later entry starts a new line. ``style`` is the SGR state at the end of
the chunk; the page sends it back with the next request so colours carry across chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final, TypedDict

# An escape sequence of any kind (the grammar of conch.core.output.normalize): CSI, OSC,
# DCS/SOS/PM/APC and two-character escapes; a trailing unterminated one is matched too.
_ESCAPE_RE: Final = re.compile(
    r"\x1b(?:\[(?P<params>[\x30-\x3f]{0,64})(?P<inter>[\x20-\x2f]{0,16})(?P<final>[\x40-\x7e])?"
    r"|\[[\x20-\x3f]{0,4096}[\x40-\x7e]?"
    r"|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?"
    r"|[PX^_][^\x1b]{0,4096}(?:\x1b\\)?"
    r"|[\x20-\x2f]{0,16}[\x30-\x7e]?)"
    r"|\x9b[\x20-\x3f]{0,4096}[\x40-\x7e]?"
)
_TOKEN_RE: Final = re.compile(
    _ESCAPE_RE.pattern + r"|(?P<nl>\n)|(?P<cr>\r)|(?P<bs>\x08)"
    r"|(?P<ctl>[\x00-\x07\x0b-\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9a\x9c-\x9f]+)"
    r"|(?P<text>[^\x00-\x1f\x7f-\x9f]+|\t)"
)
_STYLE_TOKEN_RE: Final = re.compile(r"[0-9;]{0,128}")
_SGR_RE: Final = re.compile(r"[0-9;:]*")

# xterm's 16 colours, tuned for the dashboard's dark log pane
_BASIC: Final = (
    "#3b3b3b", "#e05a5a", "#5fbf5f", "#d6b84a", "#5c8fe6", "#c36fd6", "#4fc1c9", "#d0d0d0",
    "#767676", "#ff7b7b", "#7fe07f", "#f2d86b", "#86adff", "#e598f2", "#76e4ea", "#ffffff",
)  # fmt: skip
DEFAULT_FG: Final = "#dddddd"
DEFAULT_BG: Final = "#111111"


def colour(n: int) -> str:
    """The ``#rrggbb`` of xterm-256 colour ``n``."""
    if n < 16:
        return _BASIC[n]
    if n < 232:
        n -= 16
        steps = (0, 95, 135, 175, 215, 255)
        return f"#{steps[n // 36]:02x}{steps[n // 6 % 6]:02x}{steps[n % 6]:02x}"
    level = 8 + (n - 232) * 10
    return f"#{level:02x}{level:02x}{level:02x}"


@dataclass(frozen=True)
class Style:
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    hidden: bool = False
    strike: bool = False
    fg: int | str | None = None  # 0-255 or "#rrggbb"
    bg: int | str | None = None

    def token(self) -> str:
        """The SGR parameters that recreate this style (``""`` for the default)."""
        out = [
            code
            for code, on in (
                ("1", self.bold),
                ("2", self.dim),
                ("3", self.italic),
                ("4", self.underline),
                ("7", self.inverse),
                ("8", self.hidden),
                ("9", self.strike),
            )
            if on
        ]
        for base, c in ((38, self.fg), (48, self.bg)):
            if isinstance(c, int):
                out.append(f"{base};5;{c}")
            elif isinstance(c, str):
                out.append(f"{base};2;{int(c[1:3], 16)};{int(c[3:5], 16)};{int(c[5:7], 16)}")
        return ";".join(out)

    def css(self) -> tuple[str, str, str]:
        """(classes, color, background-color) for a span; empty strings mean "default"."""
        fg = colour(self.fg) if isinstance(self.fg, int) else (self.fg or "")
        bg = colour(self.bg) if isinstance(self.bg, int) else (self.bg or "")
        if self.inverse:
            fg, bg = (bg or DEFAULT_BG), (fg or DEFAULT_FG)
        classes = " ".join(
            name
            for name, on in (
                ("b", self.bold),
                ("d", self.dim),
                ("i", self.italic),
                ("u", self.underline),
                ("s", self.strike),
                ("h", self.hidden),
            )
            if on
        )
        return classes, fg, bg


_PLAIN: Final = Style()
_OFF: Final = {
    22: {"bold": False, "dim": False},
    23: {"italic": False},
    24: {"underline": False},
    27: {"inverse": False},
    28: {"hidden": False},
    29: {"strike": False},
    39: {"fg": None},
    49: {"bg": None},
}
_ON: Final = {
    1: "bold",
    2: "dim",
    3: "italic",
    4: "underline",
    7: "inverse",
    8: "hidden",
    9: "strike",
}


def _extended(params: list[int], i: int) -> tuple[int | str | None, int]:
    """Parse ``5;n`` or ``2;r;g;b`` after a 38/48 at ``params[i]``; (colour, next index)."""
    if i + 1 < len(params) and params[i + 1] == 5 and i + 2 < len(params):
        n = params[i + 2]
        return (n if 0 <= n <= 255 else None), i + 3
    if i + 1 < len(params) and params[i + 1] == 2 and i + 4 < len(params):
        r, g, b = (min(255, max(0, v)) for v in params[i + 2 : i + 5])
        return f"#{r:02x}{g:02x}{b:02x}", i + 5
    return None, len(params)


def apply_sgr(style: Style, text: str) -> Style:
    """The style after ``ESC [ text m``."""
    params = [int(p) if p.isdigit() else 0 for p in text.replace(":", ";").split(";")][:64]
    i = 0
    while i < len(params):
        p = params[i]
        if p == 0:
            style = _PLAIN
        elif p in _ON:
            style = replace(style, **{_ON[p]: True})
        elif p == 21:
            style = replace(style, underline=True)
        elif p in _OFF:
            style = replace(style, **_OFF[p])  # type: ignore[arg-type]
        elif 30 <= p <= 37 or 90 <= p <= 97:
            style = replace(style, fg=p - 30 if p < 90 else p - 82)
        elif 40 <= p <= 47 or 100 <= p <= 107:
            style = replace(style, bg=p - 40 if p < 100 else p - 92)
        elif p in (38, 48):
            c, i = _extended(params, i)
            style = replace(style, fg=c) if p == 38 else replace(style, bg=c)
            continue
        i += 1
    return style


def style_from_token(token: str | None) -> Style:
    """The style a page sent back (``Style.token()``); anything malformed is the default."""
    if not token or not _STYLE_TOKEN_RE.fullmatch(token):
        return _PLAIN
    return apply_sgr(_PLAIN, token)


class Segment(TypedDict):
    text: str
    cls: str
    fg: str
    bg: str


class Rendered(TypedDict):
    lines: list[list[Segment]]
    reset_first: bool
    style: str


def _segments(cells: list[tuple[str, Style]]) -> list[Segment]:
    out: list[Segment] = []
    run: list[str] = []
    current: Style | None = None
    for ch, st in cells:
        if st != current and run:
            assert current is not None
            cls, fg, bg = current.css()
            out.append({"text": "".join(run), "cls": cls, "fg": fg, "bg": bg})
            run = []
        current = st
        run.append(ch)
    if run:
        assert current is not None
        cls, fg, bg = current.css()
        out.append({"text": "".join(run), "cls": cls, "fg": fg, "bg": bg})
    return out


def render(text: str, style: Style = _PLAIN) -> Rendered:
    """Lines of styled segments for one chunk of raw terminal text (see the module doc)."""
    lines: list[list[Segment]] = []
    cells: list[tuple[str, Style]] = []
    cursor = 0
    reset_first = returned = False  # returned: a \r on the first line, nothing written yet
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "text":
            reset_first = reset_first or returned
            for ch in m.group():
                if cursor < len(cells):
                    cells[cursor] = (ch, style)
                else:
                    cells.append((ch, style))
                cursor += 1
        elif kind == "nl":
            lines.append(_segments(cells))
            cells, cursor, returned = [], 0, False
        elif kind == "cr":
            cursor = 0
            returned = not lines
        elif kind == "bs":
            cursor = max(0, cursor - 1)
        elif kind == "final" and m.group("final") == "m" and _SGR_RE.fullmatch(m.group("params")):
            style = apply_sgr(style, m.group("params") or "0")
        # every other escape sequence and control character is dropped
    lines.append(_segments(cells))
    return {"lines": lines, "reset_first": reset_first, "style": style.token()}
