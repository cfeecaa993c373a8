"""The terminal screen (core/output/screen.py): bytes in, the screen a person sees out. Pure:
fed byte strings, split at every byte where it matters."""

from __future__ import annotations

import pytest

from conch.core.output.screen import Screen, screen_text


def fed(data: bytes, rows: int = 5, cols: int = 20) -> Screen:
    s = Screen(rows, cols)
    s.feed(data)
    return s


def test_a_line_feed_starts_a_new_line_as_conchs_terminals_mean_it():
    assert fed(b"one\ntwo\n").text()[:3] == ["one", "two", ""]


def test_carriage_return_rewrites_a_line_as_a_progress_bar_does():
    assert fed(b"10%\r50%\r100%").text()[0] == "100%"


def test_the_alternate_screen_returns_the_primary_screen_and_cursor():
    s = fed(b"shell line\n\x1b[?1049h\x1b[2J\x1b[Hfull screen\x1b[3;3H")
    assert s.snapshot()["alternate"] and s.text()[0] == "full screen"
    s.feed(b"\x1b[?1049l")
    snap = s.snapshot()
    assert not snap["alternate"] and snap["lines"][0] == "shell line"
    assert snap["cursor"] == {"row": 1, "col": 0, "visible": True}


def test_scroll_region_scrolls_only_its_lines():
    s = fed(b"top\n\x1b[2;4r" + b"".join(b"\x1b[4;1H\nline %d" % i for i in range(5)) + b"\x1b[r")
    lines = s.text()
    assert lines[0] == "top" and lines[3] == "line 4" and lines[2] == "line 3"


def test_colours_bold_and_inverse_are_runs_of_one_style():
    s = fed(b"\x1b[1;31mred\x1b[0m \x1b[7minv\x1b[0m \x1b[38;5;208mx")
    runs = s.snapshot()["runs"][0]
    assert runs[0] == {**runs[0], "text": "red", "fg": "red", "bold": True}
    assert any(r["text"] == "inv" and r["reverse"] for r in runs)
    assert runs[-1]["fg"] == "ff8700"


@pytest.mark.parametrize("cut", range(1, 12))
def test_utf8_split_anywhere_is_the_same_screen(cut: int):
    data = "é ü 日本 ok".encode()
    s = Screen(3, 20)
    s.feed(data[:cut])
    s.feed(data[cut:])
    assert s.text()[0] == "é ü 日本 ok"


def test_input_pyte_cannot_take_is_dropped_and_the_rest_is_kept():
    s = fed(b"\x1b[?5Lafter\x1b[?r more \x1b[\xc2\xb2m end")
    assert s.text()[0].replace(" ", "").startswith("after")
    assert "end" in s.text()[0]


def test_resize_keeps_the_screen_at_the_new_size():
    s = fed(b"abcdefghij\n")
    s.resize(4, 5)
    snap = s.snapshot()
    assert (snap["rows"], snap["cols"]) == (4, 5) and snap["lines"][0] == "abcde"


def test_blanks_an_erase_left_at_the_end_of_a_row_are_not_runs():
    s = fed(b"long line here\x1b[2J\x1b[Hshort")
    assert s.snapshot()["runs"][0] == [{**s.snapshot()["runs"][0][0], "text": "short"}]
    s = fed(b"\x1b[7minverse   \x1b[0m")  # blanks a person sees are kept
    assert s.snapshot()["runs"][0][-1]["text"] == "inverse   "


def test_a_shorter_screen_drops_rows_below_the_cursor_first():
    s = fed(b"one\ntwo\nthree")
    s.resize(3, 20)
    snap = s.snapshot()
    assert snap["lines"] == ["one", "two", "three"]
    assert snap["cursor"] == {"row": 2, "col": 5, "visible": True}


def test_a_shorter_screen_keeps_the_cursors_row_in_sight():
    s = fed(b"1\n2\n3\n4\nlast")
    s.resize(2, 20)
    snap = s.snapshot()
    assert snap["lines"] == ["4", "last"] and snap["cursor"]["row"] == 1
    s.resize(4, 20)  # what was dropped does not come back
    assert s.snapshot()["lines"] == ["4", "last", "", ""]


def test_resize_fits_the_primary_screen_behind_the_alternate_one():
    s = fed(b"1\n2\n3\n4\nshell$ \x1b[?1049h\x1b[Hfull")
    s.resize(3, 4)
    assert s.text() == ["full", "", ""]
    s.feed(b"\x1b[?1049l")
    snap = s.snapshot()
    assert snap["lines"] == ["3", "4", "shel"]
    assert snap["cursor"]["row"] == 2 and snap["cursor"]["col"] == 3


def test_screen_text_ends_with_the_cursor_position():
    text = screen_text(fed(b"hi\x1b[?25l").snapshot())
    assert text == "hi\n[screen 20x5; cursor at row 1, column 3 (hidden)]"
