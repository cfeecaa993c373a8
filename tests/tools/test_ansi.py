"""conch.tools.ansi: raw terminal text to styled segments for the dashboard, byte-exact rules."""

from __future__ import annotations

from conch.tools.ansi import Style, apply_sgr, colour, render, style_from_token


def texts(rendered) -> list[list[tuple[str, str, str, str]]]:
    return [[(s["text"], s["cls"], s["fg"], s["bg"]) for s in line] for line in rendered["lines"]]


def test_sgr_colours_become_segments_with_css_colours():
    r = render("a\x1b[1;31mred\x1b[0m b\n")
    assert texts(r) == [[("a", "", "", ""), ("red", "b", "#e05a5a", ""), (" b", "", "", "")], []]
    assert r["style"] == ""


def test_256_colour_truecolour_bright_and_background():
    r = render("\x1b[38;5;46mg\x1b[48;2;1;2;3mh\x1b[0m\x1b[94mi\x1b[39;49;104mj")
    assert texts(r) == [
        [
            ("g", "", "#00ff00", ""),
            ("h", "", "#00ff00", "#010203"),
            ("i", "", colour(12), ""),
            ("j", "", "", colour(12)),
        ]
    ]


def test_every_other_escape_and_control_is_dropped():
    raw = "x\x1b]0;title\x07y\x1b[?25l\x1b[2J\x1b[Hz\x07\x00\x1b(B!\x1bP+q\x1b\\"
    assert texts(render(raw)) == [[("xyz!", "", "", "")]]


def test_carriage_return_rewrites_show_the_final_content():
    assert texts(render("10%\r55%\r100%\nok\r\n")) == [
        [("100%", "", "", "")],
        [("ok", "", "", "")],
        [],
    ]
    assert texts(render("abcd\rX\n")) == [[("Xbcd", "", "", "")], []]
    assert texts(render("ab\x08\x08X\n")) == [[("Xb", "", "", "")], []]


def test_reset_first_only_when_a_chunk_rewrites_the_line_it_continues():
    assert render("\rnew")["reset_first"] is True
    assert render("\r\nnext")["reset_first"] is False
    assert render("more\nthen\rx")["reset_first"] is False


def test_style_carries_across_chunks_through_its_token():
    first = render("\x1b[1;4;38;5;200;48;2;9;8;7mhead")
    assert first["style"] == "1;4;38;5;200;48;2;9;8;7"
    second = render("tail", style_from_token(first["style"]))
    assert texts(second) == [[("tail", "b u", colour(200), "#090807")]]
    assert style_from_token("<script>") == Style()
    assert style_from_token("1;31" * 100) == Style()  # over-long: ignored


def test_inverse_swaps_colours_and_markup_is_plain_text():
    assert texts(render("\x1b[7m<b>&amp;</b>")) == [[("<b>&amp;</b>", "", "#111111", "#dddddd")]]


def test_apply_sgr_handles_malformed_parameters():
    assert apply_sgr(Style(), "38;5") == Style()
    assert apply_sgr(Style(), "38;5;999") == Style()
    assert apply_sgr(Style(bold=True), "") == Style()
    assert apply_sgr(Style(), "1;22") == Style()
