"""The end-of-command protocol's pure parts: the trigger line's echo filter, fed at every byte
split, and which channel message ends a command (docs/spec.md §1, §4)."""

from __future__ import annotations

from conch.core.shell.markers import Done, EchoFilter, Markers

NONCE = "a1b2c3d4e5f6"
ECHO = b"__conch_n=a1b2c3d4e5f6;. '/tmp/x.cmd' 8>&-\n"


def run(chunks: list[bytes], *, echo: bytes | None = ECHO) -> bytes:
    f = EchoFilter()
    f.expect(echo)
    return b"".join(f.feed(c) for c in chunks) + f.flush()


def every_split(stream: bytes, **kw: object) -> bytes:
    """The output of feeding stream whole; asserts every 2- and 3-way split gives the same."""
    whole = run([stream], **kw)  # type: ignore[arg-type]
    for i in range(len(stream) + 1):
        assert run([stream[:i], stream[i:]], **kw) == whole, i  # type: ignore[arg-type]
    step = max(1, len(stream) // 40)
    for i in range(0, len(stream) + 1, step):
        for j in range(i, len(stream) + 1, step):
            parts = [stream[:i], stream[i:j], stream[j:]]
            assert run(parts, **kw) == whole, (i, j)  # type: ignore[arg-type]
    assert run([bytes([b]) for b in stream], **kw) == whole  # type: ignore[arg-type]
    return whole


def test_the_echo_is_dropped_at_every_split() -> None:
    assert every_split(ECHO + b"hello\n") == b"hello\n"


def test_marker_lookalikes_and_prompts_are_output() -> None:
    # what used to be an end marker on the terminal is output like any other byte now
    fake = b"\x1e0123456789abcdef:" + NONCE.encode() + b":0\x1f" + NONCE.encode() + b":0"
    prompt = b"\x1b[32muser@host\x1b[0m:~$ "
    payload = "héllo 😀 \x1b]0;title\x07\x1b[1mbold\x1b[0m\n".encode()
    assert every_split(ECHO + payload + fake + prompt) == payload + fake + prompt


def test_background_output_before_the_echo_is_kept() -> None:
    assert every_split(b"late from bg\n" + ECHO + b"mine\n") == b"late from bg\nmine\n"


def test_the_echo_is_dropped_once_only() -> None:
    assert every_split(ECHO + ECHO) == ECHO


def test_a_partial_echo_lookalike_is_output() -> None:
    assert every_split(ECHO[:10] + b"X" + ECHO + b"ok") == ECHO[:10] + b"X" + b"ok"


def test_no_echo_expected() -> None:
    assert every_split(ECHO + b"abc", echo=None) == ECHO + b"abc"


def test_a_missing_echo_holds_back_only_a_possible_start_of_it() -> None:
    f = EchoFilter()
    f.expect(ECHO)
    assert f.feed(b"xyz\n" + ECHO[:5]) == b"xyz\n"
    assert f.flush() == ECHO[:5]  # (the command ended: it was output after all)
    assert f.feed(ECHO) == ECHO  # nothing is expected any more


def test_large_output_streams_without_holding_much() -> None:
    f = EchoFilter()
    f.expect(ECHO)
    total = 0
    for _ in range(1000):
        total += len(f.feed(b"x" * 1000 + ECHO[:3]))
        assert f.held < len(ECHO)
    assert total + len(f.flush()) == 1000 * 1003


def test_the_marker_of_the_running_command_ends_it_once() -> None:
    m = Markers()
    m.expect(NONCE)
    assert m.pending
    assert m.take(f"{NONCE}:7".encode()) == Done(NONCE, 7)
    assert not m.pending
    assert m.take(f"{NONCE}:0".encode()) is None  # (its prompt again: typed-ahead input)


def test_other_messages_end_nothing() -> None:
    m = Markers()
    m.expect(NONCE)
    for message in (
        b"0dd0dd0dd0dd:0",  # an earlier command's
        f"{NONCE}:x".encode(),
        f"{NONCE}:0\n".encode(),
        f"{NONCE}:1234".encode(),
        f"x{NONCE}:0".encode(),
        b"",
        b"\x1e" + NONCE.encode() + b":0\x1f",
    ):
        assert m.take(message) is None, message
    assert m.pending
    assert m.take(f"{NONCE}:130".encode()) == Done(NONCE, 130)


def test_nothing_ends_while_no_command_runs() -> None:
    assert Markers().take(f"{NONCE}:0".encode()) is None
