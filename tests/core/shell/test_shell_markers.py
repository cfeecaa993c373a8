"""The completion-marker parser, fed at every byte split (SPEC §1, §4)."""

from __future__ import annotations

from conch.core.shell.markers import Done, MarkerParser, Output

TOKEN = "0123456789abcdef"
NONCE = "a1b2c3d4e5f6"
ECHO = b"__conch_n=a1b2c3d4e5f6; . '/tmp/x.cmd'\n"


def marker(nonce: str = NONCE, status: int = 0, token: str = TOKEN) -> bytes:
    return b"\x1e" + f"{token}:{nonce}:{status}".encode() + b"\x1f"


def run(
    chunks: list[bytes], *, echo: bytes | None = ECHO, old: tuple[str, ...] = ()
) -> tuple[bytes, list[Done]]:
    p = MarkerParser(TOKEN)
    for o in old:
        p.expect(o, None)
    p.expect(NONCE, echo)
    out = b""
    done: list[Done] = []
    for c in chunks:
        for ev in p.feed(c):
            if isinstance(ev, Output):
                assert not done, "output after the end marker"
                out += ev.data
            else:
                done.append(ev)
    return out, done


def every_split(stream: bytes, **kw: object) -> tuple[bytes, list[Done]]:
    """The result of feeding stream whole; asserts every 2- and 3-way split gives the same."""
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


def test_echo_output_and_marker_at_every_split() -> None:
    out, done = every_split(ECHO + b"hello\n" + marker(status=7))
    assert out == b"hello\n"
    assert done == [Done(NONCE, 7)]


def test_fake_marker_with_wrong_nonce_is_output_and_does_not_end() -> None:
    fake = marker(nonce="deadbeef0000", status=0)
    prompt = b"\x1b[32muser@host\x1b[0m:~$ "
    payload = "héllo 😀 \x1b]0;title\x07\x1b[1mbold\x1b[0m\n".encode()
    out, done = every_split(ECHO + payload + fake + prompt + b"tail" + marker(status=23))
    assert out == payload + fake + prompt + b"tail"
    assert done == [Done(NONCE, 23)]


def test_fake_marker_with_wrong_token_is_output() -> None:
    fake = marker(token="ffffffffffffffff", status=0)
    out, done = every_split(ECHO + fake + marker(status=1))
    assert out == fake
    assert done == [Done(NONCE, 1)]


def test_marker_lookalikes_that_break_off_are_output() -> None:
    broken = (
        b"\x1e"
        + TOKEN.encode()
        + b":"
        + NONCE.encode()
        + b":x\x1f"
        + b"\x1e"
        + TOKEN[:5].encode()
        + b"\n"
        + b"\x1e\x1e"
    )
    out, done = every_split(ECHO + broken + marker(status=0))
    assert out == broken
    assert done == [Done(NONCE, 0)]


def test_over_long_marker_body_is_output() -> None:
    body = b"\x1e" + TOKEN.encode() + b":" + b"a" * 100 + b":0\x1f"
    out, done = every_split(ECHO + body + marker())
    assert out == body and done == [Done(NONCE, 0)]


def test_background_output_before_the_echo_is_kept() -> None:
    out, done = every_split(b"late from bg\n" + ECHO + b"mine\n" + marker())
    assert out == b"late from bg\nmine\n"
    assert done == [Done(NONCE, 0)]


def test_echo_is_stripped_once_only() -> None:
    out, done = every_split(ECHO + ECHO + marker())
    assert out == ECHO and done == [Done(NONCE, 0)]


def test_partial_echo_lookalike_is_output() -> None:
    out, _ = every_split(ECHO[:10] + b"X" + ECHO + b"ok" + marker())
    assert out == ECHO[:10] + b"X" + b"ok"


def test_no_echo_expected() -> None:
    out, done = every_split(b"abc" + marker(status=130), echo=None)
    assert out == b"abc" and done == [Done(NONCE, 130)]


def test_missing_echo_does_not_block_completion() -> None:
    out, done = every_split(b"xyz\n" + marker(status=2))
    assert out == b"xyz\n" and done == [Done(NONCE, 2)]


def test_stale_marker_of_an_earlier_command_is_dropped() -> None:
    out, done = every_split(
        ECHO + marker(nonce="0dd0dd", status=0) + b"new" + marker(status=4), old=("0dd0dd",)
    )
    assert out == b"new" and done == [Done(NONCE, 4)]


def test_only_the_first_matching_marker_ends_the_command() -> None:
    p = MarkerParser(TOKEN)
    p.expect(NONCE, None)
    evs = p.feed(marker(status=1) + b"after" + marker(status=0))
    assert evs == [Done(NONCE, 1), Output(b"after")]
    assert not p.pending


def test_large_output_streams_without_holding_much() -> None:
    p = MarkerParser(TOKEN)
    p.expect(NONCE, None)
    total = 0
    for _ in range(1000):
        for ev in p.feed(b"x" * 1000 + b"\x1e"):
            assert isinstance(ev, Output)
            total += len(ev.data)
        assert len(p._buf) < 100
    assert total == 1000 * 1001 - 1 or total == 1000 * 1001


def test_flush_returns_held_bytes() -> None:
    p = MarkerParser(TOKEN)
    p.expect(NONCE, ECHO)
    assert p.feed(b"\x1e" + TOKEN[:4].encode()) == []
    assert p.flush() == [Output(b"\x1e" + TOKEN[:4].encode())]
