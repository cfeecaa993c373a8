"""Tests for conch.core.output.normalize: terminal output becomes what a person saw."""

from __future__ import annotations

import itertools
import random

import pytest

from conch.core.output.normalize import (
    MAX_SEQUENCE_BODY,
    WINDOW_ESCAPE_LOOKBACK,
    Normalizer,
    normalize,
    safe_window_end,
)
from conch.core.output.utf8 import boundary_at_or_before

ESC = b"\x1b"

MIXED_INPUTS: list[bytes] = [
    # OSC title, colours, CRLF, a progress bar, emoji and CJK, invalid bytes, a charset switch,
    # a tab, a backspace overwrite and a partial last line rewritten by \r.
    b"\x1b]0;title\x07\x1b[1;31mred\x1b[0m plain\r\n10%\r50%\r100%\r\n"
    + "emoji 😀 é 你".encode()
    + b" bad\xff\xfe byte\x1b(B\tTab\x08X\r\nlast\rL",
    # DCS, hyperlink OSCs with ST, APC, an 8-bit CSI (decoded U+009B), a lone trailing ESC.
    b"\x1bP1$r0m\x1b\\a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
    + "\x9b31mc1\n".encode()
    + b"\x1b_apc\x1b\\z\x1b",
    # A long CSI parameter list, then an unterminated OSC that swallows a newline.
    b"abc\x1b[" + b"1;" * 10 + b"\nline\x1b]unterminated osc with\nnewline",
    # Invalid and truncated UTF-8 around newlines, an encoded surrogate, a cut-off emoji.
    b"\xe4\xbd\n\xf0\x9f\x98A\xed\xa0\x80" + "😀".encode()[:3],
    # Escapes that interrupt each other, stray ST, cursor keys, a backspaced partial line.
    b"\x1b\x1b[1m\x1b\\x\x1b]a\x1b[2mb\x1bPq\x1b7c\r\x08\x08d\n\x1bOA\x1b[?25l\x00\x07\x7fe\x08f",
]

SHORT_INPUT = b"\x1b[1mA\r\n\xc3\xa9\xff\x1b]t\x07B\rC\x08D\n\xf0\x9f\x98\x80e"


def stream(chunks: list[bytes]) -> str:
    normalizer = Normalizer()
    return "".join(normalizer.feed(chunk) for chunk in chunks) + normalizer.flush()


def chunks_at(data: bytes, points: list[int]) -> list[bytes]:
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


# --- decoding -----------------------------------------------------------------------------


def test_plain_text_passes_through_unchanged() -> None:
    assert normalize(b"hello world\n\tindented  \nno newline") == (
        "hello world\n\tindented  \nno newline"
    )


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert normalize(b"a\xffb\xfe\n") == "a\ufffdb\ufffd\n"
    assert normalize(b"\xe4\xbdA") == "\ufffdA"  # one per maximal invalid subpart


@pytest.mark.parametrize("char", ["é", "你", "😀"])
def test_multibyte_characters_survive_every_chunk_split(char: str) -> None:
    data = f"x{char}y\n".encode()
    for cut in range(len(data) + 1):
        normalizer = Normalizer()
        first = normalizer.feed(data[:cut])
        assert "\ufffd" not in first + normalizer.pending()
        assert first + normalizer.feed(data[cut:]) + normalizer.flush() == f"x{char}y\n"


def test_truncated_utf8_at_end_of_input_becomes_one_replacement() -> None:
    assert normalize("ok😀".encode()[:-1]) == "ok\ufffd"


def test_accepts_bytearray_and_memoryview() -> None:
    assert normalize(bytearray(b"\x1b[1mx")) == "x"
    assert normalize(memoryview(b"\x1b[1mx")) == "x"


# --- escape sequences ---------------------------------------------------------------------


def test_sgr_colour_sequences_are_removed() -> None:
    assert normalize(b"\x1b[1;31mred\x1b[0m and \x1b[38;5;208morange\x1b[m") == "red and orange"


def test_csi_with_private_parameters_and_intermediates_is_removed() -> None:
    assert normalize(b"a\x1b[?25lb\x1b[2J\x1b[10;20Hc\x1b[0 qd\x1b[>4;1me") == "abcde"


def test_eight_bit_csi_is_removed_only_as_decoded_character() -> None:
    assert normalize("\x9b31mred".encode()) == "red"
    assert normalize(b"\x9b31mred") == "\ufffd31mred"  # a raw 0x9b byte is invalid UTF-8


def test_osc_terminated_by_bel_is_removed() -> None:
    assert normalize(b"\x1b]0;window title\x07text") == "text"


def test_osc_terminated_by_st_is_removed() -> None:
    assert normalize(b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\") == "link"


def test_osc_body_may_span_newlines() -> None:
    assert normalize(b"a\x1b]1337;x\ny\x07b\n") == "ab\n"


def test_osc_interrupted_by_another_escape_is_dropped_up_to_it() -> None:
    assert normalize(b"a\x1b]0;title\x1b[1mb") == "ab"


@pytest.mark.parametrize("introducer", [b"P", b"X", b"^", b"_"])
def test_dcs_sos_pm_apc_strings_are_removed(introducer: bytes) -> None:
    assert normalize(b"a" + ESC + introducer + b"payload\x07 still\x1b\\b") == "ab"


@pytest.mark.parametrize(
    "sequence", [b"\x1b(B", b"\x1b)0", b"\x1b=", b"\x1b>", b"\x1b7", b"\x1b8", b"\x1bM", b"\x1b#8"]
)
def test_short_escape_sequences_are_removed(sequence: bytes) -> None:
    assert normalize(b"a" + sequence + b"b") == "ab"


def test_lone_escape_at_end_of_input_is_dropped() -> None:
    assert normalize(b"done\x1b") == "done"


def test_escape_followed_by_a_non_sequence_character_is_dropped_alone() -> None:
    assert normalize(b"a\x1b\nb\x1b\x1b[1mc\x1b\xc3\xa9\x1b\x7f") == "a\nbcé"


def test_unfinished_sequence_at_end_of_input_is_dropped() -> None:
    assert normalize(b"abc\x1b[31") == "abc"
    assert normalize(b"abc\x1b]0;tit") == "abc"
    assert normalize(b"abc\x1b(") == "abc"


def test_malformed_csi_is_dropped_up_to_the_offending_character() -> None:
    assert normalize(b"a\x1b[12\nb") == "a\nb"
    assert normalize("a\x1b[1éb".encode()) == "aéb"


def test_unterminated_string_longer_than_cap_is_dropped_and_text_resumes() -> None:
    body = b"x" * (MAX_SEQUENCE_BODY + 10)
    assert normalize(b"a\x1b]" + body + b"\nz") == "a" + "x" * 10 + "\nz"
    assert normalize(b"a\x1bP" + body + b"\x1b\\z") == "a" + "x" * 10 + "z"


def test_string_exactly_at_cap_is_still_removed_when_terminated() -> None:
    body = b"x" * MAX_SEQUENCE_BODY
    assert normalize(b"a\x1b]" + body + b"\x07z") == "az"
    assert normalize(b"a\x1b]" + body + b"\x1b\\z") == "az"


# --- control characters -------------------------------------------------------------------


def test_c0_controls_bel_and_del_are_removed_but_tab_and_newline_kept() -> None:
    moving = b"\x08\r\x1b"  # these move the cursor or start sequences; tested elsewhere
    data = bytes(c for c in [*range(0x20), 0x7F] if c not in moving)
    assert normalize(b"[" + data + b"]") == "[\t\n]"
    assert normalize(b"ding\x07 \x00nul\x7f\x0c") == "ding nul"


def test_c1_controls_are_removed() -> None:
    assert normalize("a\x85b\x90c\x9fd".encode()) == "abcd"


def test_tabs_and_trailing_spaces_are_kept() -> None:
    assert normalize(b"a\tb   \n  \t\n") == "a\tb   \n  \t\n"


# --- carriage return and backspace --------------------------------------------------------


def test_crlf_becomes_lf() -> None:
    assert normalize(b"one\r\ntwo\r\n") == "one\ntwo\n"


def test_carriage_return_overwrites_from_line_start() -> None:
    assert normalize(b"hello\rHi\n") == "Hillo\n"


def test_progress_bar_rewrites_collapse_to_final_text() -> None:
    assert normalize(b"10%\r20%\r100%\n") == "100%\n"
    assert normalize(b"[##   ]\r[#### ]\r[#####]\r\ndone\n") == "[#####]\ndone\n"


def test_carriage_return_before_newline_leaves_line_intact() -> None:
    assert normalize(b"abc\r\n") == "abc\n"
    assert normalize(b"abc\r\r\n") == "abc\n"


def test_carriage_return_only_affects_the_current_line() -> None:
    assert normalize(b"first line\nab\rX\n") == "first line\nXb\n"


def test_backspace_moves_left_and_text_overwrites() -> None:
    assert normalize(b"abc\x08\x08X\n") == "aXc\n"
    assert normalize(b"ab\x08\n") == "ab\n"


def test_backspace_stops_at_column_zero() -> None:
    assert normalize(b"\x08\x08ab\x08\x08\x08\x08c") == "cb"


def test_partial_last_line_is_kept_and_rendered() -> None:
    assert normalize(b"line\nabc\rX") == "line\nXbc"
    assert normalize(b"line\nabc\r") == "line\nabc"


def test_escape_sequences_do_not_take_columns() -> None:
    assert normalize(b"\x1b[32mabc\x1b[0m\r\x1b[1mX\n") == "Xbc\n"


def test_plain_megabyte_takes_the_fast_path_unchanged() -> None:
    data = b"The quick brown fox jumps over the lazy dog.\n" * (1024 * 1024 // 45)
    assert normalize(data) == data.decode()


# --- Normalizer ---------------------------------------------------------------------------


def test_feed_returns_only_complete_lines_and_pending_shows_the_rest() -> None:
    normalizer = Normalizer()
    assert normalizer.feed(b"one\ntw") == "one\n"
    assert normalizer.pending() == "tw"
    assert normalizer.feed(b"o\nthree") == "two\n"
    assert normalizer.pending() == "three"
    assert normalizer.flush() == "three"
    assert normalizer.pending() == ""


def test_pending_shows_the_latest_progress_bar_state() -> None:
    normalizer = Normalizer()
    assert normalizer.feed(b"10%") == ""
    assert normalizer.pending() == "10%"
    assert normalizer.feed(b"\r55%") == ""
    assert normalizer.pending() == "55%"
    assert normalizer.feed(b"\r100%\r\n") == "100%\n"
    assert normalizer.pending() == ""


def test_pending_omits_an_unfinished_escape_sequence() -> None:
    normalizer = Normalizer()
    assert normalizer.feed(b"ok\x1b[3") == ""
    assert normalizer.pending() == "ok"
    assert normalizer.feed(b"1mred\n") == "okred\n"


def test_normalizer_is_reusable_after_flush() -> None:
    normalizer = Normalizer()
    normalizer.feed(b"a\x1b]0;t")
    normalizer.feed(b"\xe4")
    assert normalizer.flush() == "a"
    assert normalizer.feed(b"b\n") == "b\n"
    assert normalizer.flush() == ""


def test_feed_accepts_bytearray_and_memoryview() -> None:
    normalizer = Normalizer()
    assert normalizer.feed(bytearray(b"a\n")) == "a\n"
    assert normalizer.feed(memoryview(b"b\n")) == "b\n"


@pytest.mark.parametrize("data", MIXED_INPUTS)
def test_stream_equals_whole_for_every_single_split(data: bytes) -> None:
    expected = normalize(data)
    for cut in range(len(data) + 1):
        assert stream([data[:cut], data[cut:]]) == expected, cut


@pytest.mark.parametrize("data", MIXED_INPUTS)
def test_stream_equals_whole_when_fed_byte_by_byte(data: bytes) -> None:
    assert stream([data[k : k + 1] for k in range(len(data))]) == normalize(data)


def test_stream_equals_whole_for_every_pair_of_split_points() -> None:
    expected = normalize(SHORT_INPUT)
    for first, second in itertools.combinations(range(len(SHORT_INPUT) + 1), 2):
        chunks = [SHORT_INPUT[:first], SHORT_INPUT[first:second], SHORT_INPUT[second:]]
        assert stream(chunks) == expected, (first, second)


@pytest.mark.parametrize("data", [*MIXED_INPUTS, SHORT_INPUT])
def test_stream_equals_whole_for_random_chunkings(data: bytes) -> None:
    rng = random.Random(20240611)
    expected = normalize(data)
    for _ in range(300):
        points = sorted(rng.sample(range(len(data) + 1), rng.randint(0, min(8, len(data)))))
        chunks = chunks_at(data, points)
        assert stream(chunks) == expected, points


def test_stream_equals_whole_for_random_escape_soup() -> None:
    rng = random.Random(7)
    pieces = [
        b"a",
        b"\n",
        b"\r",
        b"\x08",
        b"\x1b",
        b"[",
        b"]",
        b"P",
        b"\\",
        b"\x07",
        b"1;",
        b"m",
        b"(",
        b"\xc2\x9b",
        "é".encode(),
        b"\xff",
        b"\t",
        b"\x00",
    ]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        points = sorted(rng.sample(range(len(data) + 1), rng.randint(0, min(5, len(data)))))
        chunks = chunks_at(data, points)
        assert stream(chunks) == normalize(data), data


def test_stream_agrees_on_strings_around_the_cap() -> None:
    for extra in (-1, 0, 1):
        body = b"y" * (MAX_SEQUENCE_BODY + extra)
        for tail in (b"\x07after\n", b"\x1b\\after\n", b"more\n", b""):
            data = b"a\x1b]" + body + tail
            expected = normalize(data)
            for cut in range(len(data) - len(tail) - 3, len(data) + 1):
                assert stream([data[:cut], data[cut:]]) == expected


def test_unterminated_string_holds_back_bounded_state() -> None:
    normalizer = Normalizer()
    data = b"a\x1b]" + b"z" * (3 * MAX_SEQUENCE_BODY) + b"\n"
    out = []
    for k in range(0, len(data), 7):
        out.append(normalizer.feed(data[k : k + 7]))
        assert normalizer.held <= MAX_SEQUENCE_BODY + 3
    assert "".join(out) + normalizer.flush() == normalize(data)
    assert normalize(data) == "a" + "z" * (2 * MAX_SEQUENCE_BODY) + "\n"


def test_long_progress_line_is_held_as_rendered_text() -> None:
    normalizer = Normalizer()
    for pct in range(1000):
        assert normalizer.feed(f"\r{pct:3d}%".encode()) == ""
    assert normalizer.pending() == "999%"
    assert normalizer.flush() == "999%"


# --- safe_window_end ----------------------------------------------------------------------


def test_window_end_in_plain_text_is_unchanged() -> None:
    assert safe_window_end(b"hello world", 5) == 5
    assert safe_window_end(b"hello world", 11) == 11


def test_window_end_does_not_split_a_character() -> None:
    data = "a你b".encode()
    assert safe_window_end(data, 2) == 1
    assert safe_window_end(data, 3) == 1
    assert safe_window_end(data, 4) == 4
    assert safe_window_end(data[:3], 3) == 1  # the rest of the character is beyond the data


def test_window_end_backs_off_an_unfinished_csi() -> None:
    assert safe_window_end(b"hello\x1b[31", 8) == 5
    assert safe_window_end(b"ab\x1b[31mcd", 4) == 2
    assert safe_window_end(b"hello\x1b[31mx", 10) == 10


def test_window_end_backs_off_an_unfinished_osc_but_not_a_finished_one() -> None:
    assert safe_window_end(b"x\x1b]0;title", 10) == 1
    assert safe_window_end(b"x\x1b]0;title\x07", 11) == 11
    assert safe_window_end(b"x\x1b]0;title\x1b\\", 12) == 12
    assert safe_window_end(b"x\x1b]0;title\x1b\\", 11) == 1


def test_window_end_backs_off_a_lone_escape_and_a_short_sequence() -> None:
    assert safe_window_end(b"abc\x1b", 4) == 3
    assert safe_window_end(b"abc\x1b(B", 5) == 3
    assert safe_window_end(b"abc\x1b(B", 6) == 6


def test_window_end_backs_off_an_unfinished_eight_bit_csi() -> None:
    data = "ab\x9b31".encode()
    assert safe_window_end(data, len(data)) == 2
    assert safe_window_end(data, 3) == 2


def test_window_end_ignores_escapes_starting_before_the_lookback() -> None:
    data = b"\x1b]0;" + b"t" * (WINDOW_ESCAPE_LOOKBACK + 10)
    assert safe_window_end(data, len(data)) == len(data)
    near = b"x" * 100 + b"\x1b]0;" + b"t" * (WINDOW_ESCAPE_LOOKBACK - 5)
    assert safe_window_end(near, len(near)) == 100


def test_window_end_clamps_out_of_range() -> None:
    assert safe_window_end(b"abc", 99) == 3
    assert safe_window_end(b"abc", -1) == 0


@pytest.mark.parametrize("data", MIXED_INPUTS)
def test_window_end_is_always_a_boundary_at_or_before_end(data: bytes) -> None:
    for end in range(len(data) + 1):
        cut = safe_window_end(data, end)
        assert 0 <= cut <= end
        assert boundary_at_or_before(data, cut) == cut
        if (
            ESC not in data[max(0, end - WINDOW_ESCAPE_LOOKBACK) : end]
            and b"\xc2\x9b" not in (data[max(0, end - WINDOW_ESCAPE_LOOKBACK) : end])
        ):
            assert cut == boundary_at_or_before(data, end)


def test_carriage_return_frames_of_any_widths_render_like_the_cell_model() -> None:
    rng = random.Random(8)
    for _ in range(300):
        frames = ["".join(rng.choice("ab ") for _ in range(rng.randint(0, 6))) for _ in range(6)]
        line = "\r".join(frames)
        cells: list[str] = []
        for frame in frames:  # each frame overwrites from column 0
            cells[: len(frame)] = frame
        expected = "".join(cells)
        data = (line + "\n").encode()
        assert normalize(data) == expected + "\n"
        assert stream(chunks_at(data, [rng.randint(0, len(data))])) == expected + "\n"
