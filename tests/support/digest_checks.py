"""What every digest must hold to (core/output/digest.py): each line is what the log holds
at its cursor, and every count is in the summary line it came from."""

from __future__ import annotations

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
