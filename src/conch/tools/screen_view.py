"""A terminal screen (``conch.core.ScreenSnapshot``) as the dashboard draws it: each row as
segments ``{text, cls, fg, bg}`` in the log pane's palette (``conch.tools.ansi``), the cursor,
the size. Data, never markup: the page sets each segment's ``textContent``."""

from __future__ import annotations

from typing import Any

from conch.core import ScreenSnapshot
from conch.tools.ansi import DEFAULT_BG, DEFAULT_FG, colour

_NAMES = ("black", "red", "green", "brown", "blue", "magenta", "cyan", "white")
_CSS = {name: colour(i) for i, name in enumerate(_NAMES)} | {
    f"bright{name}": colour(8 + i) for i, name in enumerate(_NAMES)
}
_CSS["yellow"] = _CSS["brown"]
_CSS["brightyellow"] = _CSS["brightbrown"]


def _css(name: str) -> str:
    """A pyte colour (a name, ``rrggbb``, or ``default``) as CSS; "" for the default."""
    if name == "default":
        return ""
    if name in _CSS:
        return _CSS[name]
    if len(name) == 6 and all(c in "0123456789abcdefABCDEF" for c in name):
        return "#" + name.lower()
    return ""


def segments(snap: ScreenSnapshot) -> list[list[dict[str, str]]]:
    rows: list[list[dict[str, str]]] = []
    for runs in snap["runs"]:
        row = []
        for r in runs:
            fg, bg = _css(r["fg"]), _css(r["bg"])
            if r["reverse"]:
                fg, bg = (bg or DEFAULT_BG), (fg or DEFAULT_FG)
            cls = " ".join(
                name
                for name, on in (
                    ("b", r["bold"]),
                    ("i", r["italics"]),
                    ("u", r["underscore"]),
                    ("s", r["strikethrough"]),
                )
                if on
            )
            row.append({"text": r["text"], "cls": cls, "fg": fg, "bg": bg})
        rows.append(row)
    return rows


def screen_body(snap: ScreenSnapshot) -> dict[str, Any]:
    return {
        "rows": snap["rows"],
        "cols": snap["cols"],
        "cursor": snap["cursor"],
        "alternate": snap["alternate"],
        "lines": segments(snap),
    }
