"""What every digest must hold to (core/output/digest.py): each line is what the log holds
at its cursor, and every count is in the summary line it came from."""

from __future__ import annotations

import random

from conch.core.output.digest import ELLIPSIS, LINE_CHARS, PIECE_BYTES, Digest, _cut
from conch.core.output.normalize import normalize


def unit_at(log: bytes, cursor: int) -> bytes:
    """The raw unit that starts at ``cursor`` (a line, or a piece of a long one), found
    independently of the digester's scan: from the start of the cursor's line, in pieces."""
    start = log.rfind(b"\n", 0, cursor) + 1
    nl = log.find(b"\n", cursor)
    end = len(log) if nl < 0 else nl + 1
    while end - start > PIECE_BYTES:
        cut = _cut(log, start)
        if start == cursor:
            return log[start:cut]
        start = cut
    assert start == cursor, "a digest cursor is where a line or a piece starts"
    return log[start:end]


def check_faithful(log: bytes, d: Digest | None) -> None:
    """Every line is what the log holds at its cursor, normalized; counts are in it."""
    if d is None:
        return
    for e in d["lines"]:
        whole = normalize(unit_at(log, e["cursor"]))
        whole = whole[:-1] if whole.endswith("\n") else whole
        if len(whole) <= LINE_CHARS:
            assert e["text"] == whole
        else:
            assert e["text"] == whole[:LINE_CHARS] + ELLIPSIS
    cursors = [e["cursor"] for e in d["lines"]]
    assert cursors == sorted(cursors)
    if "counts_from" in d:
        assert d["counts_from"] in cursors
        i = cursors.index(d["counts_from"])
        # the summary line (and, for unittest's verdict, its `Ran N tests` line before it)
        summary = " ".join(e["text"] for e in d["lines"][max(0, i - 1) : i + 1])
        for n in d.get("counts", {}).values():
            assert str(n) in summary


# random output built of what digests look for and what trips parsers up
ATOMS = [
    b"error: e\n",
    b"a.c:1:2: error: x\n",
    b"warning: w\n",
    b"FAILED t::x - y\n",
    b"\n",
    b"=== 1 failed, 2 passed in 0.1s ===\n",
    b"Traceback (most recent call last):\n",
    b'  File "x.py", line 1, in f\n',
    b"KeyError: 'k'\n",
    b" --> src/a.rs:1:2\n",
    b"\x1b[31m",
    b"\x1b]0;t\x07",
    b"\x1b[",
    b"\r",
    b"\r\n",
    b"\xff\xfe",
    b"\xe2\x82",
    b"\xc3\xa9",
    b"ERROR collecting x\n",
    b"_ ERROR collecting t.py _\n",
    b"E   Boom\n",
    b"Ran 2 tests in 1s\n",
    b"OK\n",
    b"FAILED (failures=1)\n",
    b"--- FAIL: T\n",
    b"panic: p\n",
    b"npm ERR! x\n",
    b"\xe2\x97\x8f t\n",
    b"  at f (x.js:1:1)\n",
    b"x" * 7000,
    b"\x00\x07\x08",
    b"Tests: 1 failed\n",
]


def adversarial(rng: random.Random, size: int) -> bytes:
    out = []
    n = 0
    while n < size:
        if rng.random() < 0.1:
            piece = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        else:
            piece = rng.choice(ATOMS)
        out.append(piece)
        n += len(piece)
    return b"".join(out)
