"""Digests of a job's output: the lines that say what went wrong, found in the whole log.

A head-and-tail window hides the middle of a long output: the two errors among 300 warnings of
a compiler, the failures of a test run whose tail is a coverage table. A digest lists those
lines, each with its cursor (the byte offset of its start in the raw log, which ``read``
takes), the totals the program printed in its last summary line, and what it left out.

Rules (tests/core/output/test_digest.py holds each to a test):

* Nothing is invented. Every line's ``text`` is what the log holds at its ``cursor``,
  normalized as output is (core/output/normalize.py: ANSI stripped, ``\\r`` rewrites
  collapsed, invalid UTF-8 as U+FFFD), up to the end of that line, and cut at
  ``LINE_CHARS`` characters (a cut line ends in ``…``). ``counts`` are numbers the program
  printed, parsed from its *last* summary-shaped line (a test can print a line shaped like a
  summary; the last one is the program's, and every summary-shaped line is listed, so a
  reader sees them all). The keys are the program's words (a singular noun in its plural:
  ``1 error`` is ``errors: 1``); a program that prints no totals (gcc, make) has no counts.
  No status of its own: whether the job passed is its exit code, which the result carries
  beside the digest.
* Every failure is kept, up to ``LINE_BOUND`` lines (the lines naming a failure first, then
  their details: a Rust error's ``-->`` location, a traceback's last frame), with the number
  and the cursors of the rest in ``omitted``. Warnings are listed only when nothing failed;
  otherwise they are counted in ``omitted``. Lines a program merely marks as errors
  (``error:``, ``ERROR``, ``FATAL``, ``fatal:``) fill what room the families leave.
* Families recognised without configuration: ``file:line[:col]: error|warning`` diagnostics
  (gcc, clang, mypy), rustc/cargo (``error[E..]: msg`` and its `` --> file:line:col``), ruff,
  tsc (both formats), eslint's stylish format, ``go build``/``go vet``, Python tracebacks
  (the last frame and the exception line), pytest (the short summary's FAILED/ERROR lines,
  ``ERROR collecting`` with its ``E`` line, ``Interrupted: …``, the final ``=== … ===``),
  unittest, ``go test``, npm and node (``Error: …`` with its first ``at`` line), jest, make,
  cargo test, linker ``undefined reference`` errors.

How: :class:`Digester` is a pure state machine fed byte chunks (no I/O; the same result for
any split of the same bytes, tested at every split). It cuts the stream into *units*: lines,
or pieces of ``PIECE_BYTES`` of a longer line (cut where no character or escape sequence is
split; a piece's cursor is where it starts). A prefilter (one RE2 program of the families'
keywords, run over whole blocks: measured ~600 MB/s here, Python's ``re`` 10-35x slower,
and RE2 releases the GIL while it scans) skips to the units that may matter; only those are
decoded, normalized and classified, with Python's ``re`` on at most ``CLASSIFY_CHARS``
characters. A few families need the lines after a hit (a traceback's frames, a pytest
collection error's section, node's ``at`` line): the digester then follows line by line for
a bounded number of lines.

When: a job whose output fits its window costs nothing (most jobs): the digest is built
only when a result needs one, from the log Conch already has, and kept, so a later result
continues where it stopped. A job whose log passes 1 MiB will need one (no window holds
it), so core/output/digest_log.py digests its log while it prints, in a worker thread
beside the job, and its result only has the last part left, with a time budget. The scan
costs ~1.5-2 ms of CPU per MB of plain output here (the prefilter most of it); measured
figures: docs/tools.md.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Final, TypedDict

import re2

from conch.core.output.normalize import normalize, safe_window_end

__all__ = [
    "CLASSIFY_CHARS",
    "LINE_BOUND",
    "LINE_CHARS",
    "PIECE_BYTES",
    "Digest",
    "DigestLine",
    "Digester",
    "Omitted",
    "digest_bytes",
    "unit_text",
]

LINE_BOUND: Final = 50
"""Most failure lines a digest lists (flagged lines and warnings share what is left)."""

LINE_CHARS: Final = 300
"""Most characters of a digest line's text; a longer line is cut and ends in ``…``."""

PIECE_BYTES: Final = 16384
"""Longest unit: a longer line is digested in pieces of at most this many bytes."""

CLASSIFY_CHARS: Final = 1024
"""Characters of a unit's text that the family patterns look at."""

SUMMARY_BOUND: Final = 10
"""Summary-shaped lines listed (the last ones); the counts come from the very last."""

ELLIPSIS: Final = "…"


class DigestLine(TypedDict):
    cursor: int
    text: str


class Omitted(TypedDict):
    """Lines of one kind the digest found but does not list."""

    kind: str  # "failure", "flagged" (marked as an error, no family) or "warning"
    lines: int
    first: int  # cursor of the first of them
    last: int  # cursor of the last of them


class _DigestBase(TypedDict):
    lines: list[DigestLine]


class Digest(_DigestBase, total=False):
    """What a result's ``digest`` holds; keys other than ``lines`` only when they say
    something."""

    counts: dict[str, int]  # the totals of the last summary line, in the program's words
    counts_from: int  # the cursor of that line (it is in ``lines``)
    summaries: int  # how many summary-shaped lines the log holds, when more than one
    omitted: list[Omitted]
    incomplete: str  # why the digest did not see the whole output (set by the reader)


# -- the prefilter ---------------------------------------------------------------------------

_KEYWORDS = (
    "error",
    "Error",
    "ERROR",
    "warning",
    "Warning",
    "WARN",
    "FAIL",
    "fatal",
    "FATAL",
    "panic",
    "Traceback",
    "passed",
    "failed",
    "skipped",
    "deselected",
    "no tests ran",
    "-->",
    "npm ERR!",
    "\u25cf",  # jest's ●
    "\u2716",  # eslint's ✖
    "Tests:",
    "Test Suites:",
    "Ran ",
    "*** ",
    "test result",
    "undefined reference",
    "Found ",
    "Exception",
    "Interrupted",
)
_PREFILTER_PATTERN = (
    "|".join(re.escape(k) for k in _KEYWORDS)
    # unittest's verdict, go build/vet (no severity word), ruff/flake8's concise format
    + r"|(?m:^OK(?:\r?$| \())"
    + r"|\.go:\d+:\d+: "
    + r"|:\d+:\d+: [A-Z]{1,4}\d{1,4}\b"
)


def _prefilter() -> Callable[[bytes, int, int], int]:
    """``search(data, pos, end)``: where the first keyword in ``data[pos:end]`` starts, or
    -1. RE2's own matcher on the bytes (the wrapper's ``search`` adds a generator and
    offset bookkeeping per call); a line holds no match that spans a line break."""
    options = re2.Options()
    options.max_mem = 64 << 20
    options.log_errors = False
    options.encoding = re2.Options.Encoding.LATIN1  # any bytes: no UTF-8 validity needed
    program = re2.compile(_PREFILTER_PATTERN.encode("utf-8"), options)
    raw = getattr(program, "_regexp", None)
    match = getattr(raw, "Match", None)
    if match is None:  # another google-re2 build: the public API, slower per call

        def public(data: bytes, pos: int, end: int) -> int:
            m = program.search(data, pos, end)
            return -1 if m is None else int(m.start())

        return public
    unanchored = re2._re2.RE2.Anchor.UNANCHORED

    def search(data: bytes, pos: int, end: int) -> int:
        return int(match(unanchored, data, pos, end)[0][0])

    return search


_search = _prefilter()


# -- the families ----------------------------------------------------------------------------

_DIAG = re.compile(r"[^\s:][^:]*:\d+(?::\d+)?:\s*(?:fatal )?(error|warning)\b")
_TSC_PRETTY = re.compile(r"[^\s:][^:]*:\d+:\d+ - (error|warning) TS\d")
_TSC_PLAIN = re.compile(r"[^\s(][^(]*\(\d+,\d+\): (error|warning) TS\d")
_ESLINT = re.compile(r"\s+\d+:\d+\s+(error|warning)\s+\S")
_CODE_DIAG = re.compile(r"[^\s:][^:]*:\d+:\d+: [A-Z]{1,4}\d{1,4}\b")  # ruff, flake8
_GO_DIAG = re.compile(r"[^\s:][^:]*\.go:\d+:\d+: \S")
_RUST_HEAD = re.compile(r"(error|warning)(?:\[[A-Za-z]*\d+\])?: \S")
_CODE_HEAD = re.compile(r"[A-Z]{1,4}\d{1,4} (?:\[\*\] )?\S")  # ruff's full format
_ARROW = re.compile(r"\s*--> \S+:\d")
_PYTEST_ITEM = re.compile(r"(?:FAILED|ERROR) \S")
_PYTEST_COLLECT = re.compile(r"_+ ERROR collecting \S")
_PYTEST_SECTION_END = re.compile(r"(?:_{3}|={3}|!{3})")
_PYTEST_E = re.compile(r"E\s+\S")
_PYTEST_WHERE = re.compile(r"[^\s:][^:]*:\d+: in ")
_INTERRUPTED = re.compile(r"!*\s*Interrupted: ")
_UNITTEST_ITEM = re.compile(r"(?:FAIL|ERROR): \S+ \(")
_UNITTEST_RAN = re.compile(r"Ran (\d{1,18}) tests? in \d")
_UNITTEST_VERDICT = re.compile(r"(?:(OK)|FAILED)(?: \(([^)]*)\))?\s*$")
_GO_FAIL = re.compile(r"\s*--- FAIL: \S")
_GO_PKG_FAIL = re.compile(r"FAIL(?:\s|$)")
_GO_MESSAGE = re.compile(r"\s+[^\s:]+\.go:\d+: ")
_GO_FRAME = re.compile(r"\s+\S+\.go:\d")
_PANIC = re.compile(r"panic: ")
_NPM = re.compile(r"npm (?:ERR!|error)(?:\s|$)")
_THROWN = re.compile(r"(?:[A-Z][A-Za-z0-9_]*)?(?:Error|Exception)(?: \[\w+\])?: \S")
_AT = re.compile(r"\s+at \S")
_JEST = re.compile(r"\s*\u25cf (?!Console\b)\S")
_MAKE = re.compile(r"g?make(?:\[\d+\])?: \*\*\* ")
_CARGO_TEST = re.compile(r"test \S+ \.\.\. FAILED\s*$")
_CARGO_PANIC = re.compile(r"thread '[^']*'(?: \(\d+\))? panicked at ")  # (its id: Rust 1.9x)
_FLAGGED = re.compile(r"\b(?:error|fatal):|\b(?:ERROR|FATAL)\b")
_WARNED = re.compile(r"\b[Ww]arning:|\bWARN(?:ING)?\b")

# summaries: the program's totals
_PYTEST_SUMMARY = re.compile(r"=*\s*(.*?) in \d+(?:\.\d+)?s(?: \([^)]*\))?[\s=]*$")
_PYTEST_WORDS = frozenset(
    [
        "failed",
        "passed",
        "skipped",
        "deselected",
        "xfailed",
        "xpassed",
        "warning",
        "warnings",
        "error",
        "errors",
        "rerun",
    ]
)
_PAIR = re.compile(r"(\d{1,18}) ([a-z][a-z ]*)")
_JEST_SUMMARY = re.compile(r"(Tests|Test Suites):\s+(\d.*)")
_CARGO_RESULT = re.compile(r"test result: (?:FAILED|ok)\. (.*)")
_RUST_SUMMARY = re.compile(
    r"error: (?:could not compile .*?|aborting) due to (\d{1,18}) previous (errors?)"
    r"(?:; (\d{1,18}) (warnings?) emitted)?"
)
_RUST_WARNED = re.compile(r"warning: .* generated (\d{1,18}) (warnings?)")
_FOUND = re.compile(r"Found (\d{1,18}) (errors?|problems?)(?: in (\d{1,18}) (files?))?")
_ESLINT_SUMMARY = re.compile(
    r"\u2716 (\d{1,18}) (problems?) \((\d{1,18}) (errors?), (\d{1,18}) (warnings?)\)"
)

_PLURAL = {
    "error": "errors",
    "warning": "warnings",
    "failure": "failures",
    "problem": "problems",
    "file": "files",
    "test": "tests",
}


def _key(word: str) -> str:
    word = word.strip()
    return _PLURAL.get(word, word)


def _pairs(*groups: str | None) -> dict[str, int]:
    """``(number, word, number, word, …)`` as counts (pairs whose number is None dropped)."""
    out: dict[str, int] = {}
    for i in range(0, len(groups) - 1, 2):
        n, word = groups[i], groups[i + 1]
        if n is not None and word is not None:
            out[_key(word)] = int(n)
    return out


def _listed(body: str, sep: str, words: frozenset[str] | None = None) -> dict[str, int] | None:
    """``"2 failed, 3 passed"`` as counts; None unless every item is ``N word``."""
    out: dict[str, int] = {}
    for item in body.split(sep):
        m = _PAIR.fullmatch(item.strip())
        if m is None:
            return None
        word = m.group(2).strip()
        if words is not None and word not in words:
            return None
        out[_key(word)] = int(m.group(1))
    return out


def _keyed(body: str) -> dict[str, int] | None:
    """unittest's ``failures=1, errors=2`` as counts."""
    out: dict[str, int] = {}
    for item in body.split(","):
        name, eq, value = item.strip().partition("=")
        if not eq or not value.isdigit() or len(value) > 18:
            return None
        out[name.strip()] = int(value)
    return out


def _summary(text: str) -> dict[str, int] | None:
    """The counts of a summary-shaped line (maybe none: ``no tests ran``), or None."""
    m = _PYTEST_SUMMARY.match(text)
    if m is not None:
        body = m.group(1).strip()
        if body == "no tests ran":
            return {}
        counts = _listed(body, ",", _PYTEST_WORDS)
        if counts is not None:
            return counts
    m = _JEST_SUMMARY.match(text)
    if m is not None:
        return _listed(m.group(2).strip(), ",")
    m = _CARGO_RESULT.match(text)
    if m is not None:
        body = m.group(1).split("; finished", 1)[0]
        return _listed(body, ";")
    m = _RUST_SUMMARY.match(text) or _RUST_WARNED.match(text)
    if m is not None:
        return _pairs(*m.groups())
    m = _FOUND.match(text) or _ESLINT_SUMMARY.match(text)
    if m is not None:
        return _pairs(*m.groups())
    m = _UNITTEST_RAN.match(text)
    if m is not None:
        return {"tests": int(m.group(1))}
    return None


# -- what the digester finds -------------------------------------------------------------------

FAILURE, FLAGGED, WARNING = "failure", "flagged", "warning"


class _Group:
    """A failure (or warning) and its details: cursors and texts, the first its head."""

    __slots__ = ("end", "entries")

    def __init__(self, cursor: int, text: str, end: int) -> None:
        self.entries: list[tuple[int, str]] = [(cursor, text)]
        self.end = end  # where the group's last line ends (a detail on the next line joins)


class _Bucket:
    """The groups of one kind: the first ``LINE_BOUND`` kept, the rest counted."""

    __slots__ = ("extra_first", "extra_last", "extra_lines", "groups")

    def __init__(self) -> None:
        self.groups: list[_Group] = []
        self.extra_lines = 0
        self.extra_first = -1
        self.extra_last = -1

    def add(self, group: _Group) -> _Group | None:
        """Keep ``group``; None when it is past the bound (then only counted)."""
        if len(self.groups) < LINE_BOUND:
            self.groups.append(group)
            return group
        self.count(group.entries[0][0])
        return None

    def count(self, cursor: int) -> None:
        self.extra_lines += 1
        if self.extra_first < 0:
            self.extra_first = cursor
        self.extra_last = max(self.extra_last, cursor)

    @property
    def lines(self) -> int:
        return sum(len(g.entries) for g in self.groups) + self.extra_lines


class _Follow:
    """A family that reads the lines after its hit. ``step`` returns False for a line that is
    not its own: the follow ends and that line is digested as any other."""

    left = 2000  # most lines followed

    def step(self, d: Digester, cursor: int, end: int, text: str) -> bool:
        raise NotImplementedError

    def done(self, d: Digester) -> None:
        """The follow ends (by ``step``, its line bound or the end of the input)."""


class _Traceback(_Follow):
    """Python: keep the last frame's ``File …, line N`` and the exception line."""

    left = 5000

    def __init__(self) -> None:
        self.frame: tuple[int, str, int] | None = None

    def step(self, d: Digester, cursor: int, end: int, text: str) -> bool:
        if not text.strip():
            return True
        if text[0] in " \t":
            if text.lstrip().startswith('File "'):
                self.frame = (cursor, text, end)
            return True
        if text.startswith(("During handling of the above", "The above exception")):
            return True
        if text.startswith("Traceback (most recent call last)"):
            self.frame = None
            return True
        group = d.fail(cursor, text, end)
        if group is not None and self.frame is not None:
            group.entries.append(self.frame[:2])
        elif self.frame is not None:
            d.buckets[FAILURE].count(self.frame[0])
        d.end_follow()
        return True


class _Section(_Follow):
    """pytest's ``ERROR collecting`` section: its last ``file:line: in`` and ``E`` lines."""

    left = 2000

    def __init__(self, group: _Group | None) -> None:
        self.group = group
        self.where: tuple[int, str] | None = None
        self.error: tuple[int, str] | None = None

    def step(self, d: Digester, cursor: int, end: int, text: str) -> bool:
        if _PYTEST_SECTION_END.match(text):
            return False
        if _PYTEST_E.match(text):
            self.error = (cursor, text)
        elif _PYTEST_WHERE.match(text):
            self.where = (cursor, text)
        return True

    def done(self, d: Digester) -> None:
        for found in (self.where, self.error):
            if found is None:
                continue
            if self.group is not None:
                self.group.entries.append(found)
            else:
                d.buckets[FAILURE].count(found[0])


class _Details(_Follow):
    """The next lines that ``wanted`` matches join the failure (``once``: the first only),
    while lines match ``within`` (anything, when None)."""

    def __init__(
        self,
        group: _Group | None,
        wanted: re.Pattern[str],
        *,
        left: int,
        once: bool = True,
        within: re.Pattern[str] | None = None,
        stop: re.Pattern[str] | None = None,
    ) -> None:
        self.group = group
        self.wanted = wanted
        self.left = left
        self.once = once
        self.within = within
        self.stop = stop

    def step(self, d: Digester, cursor: int, end: int, text: str) -> bool:
        if self.stop is not None and self.stop.match(text):
            return False
        if self.wanted.match(text):
            d.detail(self.group, cursor, text, end)
            if self.once:
                d.end_follow()
            return True
        return self.within is None or self.within.match(text) is not None


class _NextLine(_Follow):
    """The very next line joins the failure (cargo's panic message), unless blank."""

    left = 1

    def __init__(self, group: _Group | None) -> None:
        self.group = group

    def step(self, d: Digester, cursor: int, end: int, text: str) -> bool:
        if not text.strip() or text.startswith("note:"):
            return False
        d.detail(self.group, cursor, text, end)
        return True


_INDENTED = re.compile(r"\s")


# -- the state machine ---------------------------------------------------------------------------


def unit_text(raw: bytes) -> str:
    """The text a digest line shows for a unit's raw bytes (a line, or a piece of a long
    one): normalized as output is, without its line break, cut at ``LINE_CHARS``."""
    text = _full_text(raw)
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + ELLIPSIS


def _full_text(raw: bytes) -> str:
    text = normalize(raw)
    return text[:-1] if text.endswith("\n") else text


def _cut(buf: bytes, start: int) -> int:
    """Where the piece of a long line that starts at ``start`` ends: ``PIECE_BYTES`` on,
    moved back so that no character or escape sequence is split (decided by those bytes
    alone, so the same for any chunking)."""
    window = buf[start : start + PIECE_BYTES]
    end = safe_window_end(window, PIECE_BYTES)
    return start + (end if end > 0 else PIECE_BYTES)


class Digester:
    """Feed a log's bytes in order (``feed``), then ``close()``; ``digest()`` is what it
    found. Pure: the result depends on the bytes only, not on how they were chunked."""

    def __init__(self) -> None:
        self._carry = b""  # the unfinished last line (pieces of it already cut off)
        self._carry_at = 0  # its cursor
        self._continued = False  # the carry continues a line already cut into pieces
        self._prev: tuple[int, bytes] | None = None  # the last whole line before the unit
        self._follow: _Follow | None = None
        self._last: tuple[str, _Group] | None = None  # the latest group kept, and its kind
        self._eslint_file = -1  # cursor of the eslint file line already listed
        self.buckets = {FAILURE: _Bucket(), FLAGGED: _Bucket(), WARNING: _Bucket()}
        self._summaries: deque[tuple[int, str, dict[str, int]]] = deque(maxlen=SUMMARY_BOUND)
        self._summary_count = 0
        self._ran: tuple[int, int] | None = None  # unittest's `Ran N tests`: (end, N)
        self.fed = 0
        self.closed = False

    # -- input ------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if not data or self.closed:
            return
        data = bytes(data)
        carry, at = self._carry, self._carry_at
        nl = data.find(b"\n") if carry else -1
        if nl >= 0:
            # the unfinished line ends here: that line alone is joined (not the whole chunk,
            # which would copy every byte once more), then the rest is scanned in place
            self._scan(carry + data[: nl + 1], at, 0)
            self._scan(data, at + len(carry), nl + 1)
        elif carry:
            self._scan(carry + data, at, 0)  # no line break: a long line
        else:
            self._scan(data, at, 0)
        self.fed += len(data)  # last: a reader in another thread sees `fed` only when done

    def _scan(self, buf: bytes, base: int, start: int) -> None:
        """``buf[start:]``, the input after every unit digested so far (``base``: the
        cursor of ``buf[0]``); what is left of its last line becomes the carry."""
        whole = buf.rfind(b"\n", start) + 1
        if whole:
            if self._continued:
                first = buf.find(b"\n", start) + 1
                self._line(buf, start, first, base, continued=True)
                self._continued = False
                start = first
            self._lines(buf, start, whole, base)
            start = whole
        while len(buf) - start > PIECE_BYTES:
            cut = _cut(buf, start)
            self._unit(buf, start, cut, base, whole=False)
            start = cut
            self._continued = True
        self._carry = buf[start:]
        self._carry_at = base + start

    def close(self) -> None:
        """The end of the log: digest its unfinished last line, end any follow."""
        if self.closed:
            return
        if self._carry:
            self._line(self._carry, 0, len(self._carry), self._carry_at, self._continued)
            self._carry = b""
        if self._follow is not None:
            self.end_follow()
        self.closed = True

    def _lines(self, buf: bytes, pos: int, end: int, base: int) -> None:
        """Whole lines ``buf[pos:end]``: skip to the lines the prefilter marks, unless a
        family follows every line."""
        while pos < end:
            if self._follow is None:
                hit = _search(buf, pos, end)
                if hit < 0:
                    self._remember(buf, pos, end, base)
                    return
                nl = buf.rfind(b"\n", pos, hit)
                if nl >= 0:
                    self._remember(buf, pos, nl + 1, base)
                    pos = nl + 1
            stop = buf.find(b"\n", pos, end) + 1
            self._line(buf, pos, stop, base)
            pos = stop

    def _remember(self, buf: bytes, pos: int, end: int, base: int) -> None:
        """Skipped lines ``buf[pos:end]`` (whole): the last is the one before what comes."""
        if end <= pos:
            return
        nl = buf.rfind(b"\n", pos, end - 1)
        start = pos if nl < 0 else nl + 1
        self._prev = (base + start, buf[start:end]) if end - start <= PIECE_BYTES else None

    def _line(self, buf: bytes, pos: int, end: int, base: int, continued: bool = False) -> None:
        """One line (its end a line break, or the log's end), in pieces when long."""
        if end - pos <= PIECE_BYTES:
            self._unit(buf, pos, end, base, whole=not continued)
            return
        while end - pos > PIECE_BYTES:
            cut = _cut(buf, pos)
            self._unit(buf, pos, cut, base, whole=False)
            pos = cut
        self._unit(buf, pos, end, base, whole=False)

    def _unit(self, buf: bytes, pos: int, end: int, base: int, *, whole: bool) -> None:
        raw = buf[pos:end]
        cursor = base + pos
        stop = base + end
        follow = self._follow
        if follow is not None:
            follow.left -= 1
            text = _full_text(raw)[:CLASSIFY_CHARS]
            if follow.step(self, cursor, stop, text):
                if self._follow is follow and follow.left <= 0:
                    self.end_follow()
                self._prev = (cursor, raw) if whole else None
                return
            self.end_follow()
        if _search(raw, 0, len(raw)) >= 0:
            self._classify(cursor, stop, _full_text(raw)[:CLASSIFY_CHARS], raw)
        self._prev = (cursor, raw) if whole else None

    # -- what a unit says -------------------------------------------------------------------

    def _classify(self, cursor: int, end: int, text: str, raw: bytes) -> None:
        counts = _summary(text)
        if counts is not None:
            self._summary(cursor, end, text, counts)
            return
        if self._verdict(cursor, end, text):
            return
        self._ran = None  # a verdict comes right after `Ran N tests`, with nothing between
        if text.startswith("Traceback (most recent call last)"):
            self._start(_Traceback())
            return
        m = _DIAG.match(text) or _TSC_PRETTY.match(text) or _TSC_PLAIN.match(text)
        if m is not None:
            self._found(FAILURE if m.group(1) == "error" else WARNING, cursor, text, end)
            return
        m = _ESLINT.match(text)
        if m is not None:
            self._eslint(m.group(1), cursor, text, end)
            return
        if _CODE_DIAG.match(text) or _GO_DIAG.match(text):
            self.fail(cursor, text, end)
            return
        m = _RUST_HEAD.match(text)
        if m is not None:
            self._found(FAILURE if m.group(1) == "error" else WARNING, cursor, text, end)
            return
        if _ARROW.match(text):
            self._arrow(cursor, text, end)
            return
        if _PYTEST_COLLECT.match(text):
            self._start(_Section(self.fail(cursor, text, end)))
            return
        if _PYTEST_ITEM.match(text) or _INTERRUPTED.match(text) or _UNITTEST_ITEM.match(text):
            self.fail(cursor, text, end)
            return
        if _GO_FAIL.match(text):
            group = self.fail(cursor, text, end)
            self._start(
                _Details(group, _GO_MESSAGE, left=50, once=False, within=_INDENTED, stop=_GO_FAIL)
            )
            return
        if _GO_PKG_FAIL.match(text) or _NPM.match(text) or _JEST.match(text):
            self.fail(cursor, text, end)
            return
        if _MAKE.match(text) or _CARGO_TEST.match(text) or "undefined reference to" in text:
            self.fail(cursor, text, end)
            return
        if _PANIC.match(text):
            self._start(_Details(self.fail(cursor, text, end), _GO_FRAME, left=100))
            return
        if _CARGO_PANIC.match(text):
            self._start(_NextLine(self.fail(cursor, text, end)))
            return
        if _THROWN.match(text):
            self._start(_Details(self.fail(cursor, text, end), _AT, left=6, within=_AT))
            return
        if _FLAGGED.search(text):
            self._found(FLAGGED, cursor, text, end)
        elif _WARNED.search(text):
            self._found(WARNING, cursor, text, end)

    def _verdict(self, cursor: int, end: int, text: str) -> bool:
        """unittest's ``OK``/``FAILED (…)``: a summary only right after ``Ran N tests``."""
        m = _UNITTEST_VERDICT.match(text)
        ran = self._ran
        if m is None or ran is None or not 0 <= cursor - ran[0] <= 256:
            return False
        counts = {"tests": ran[1]}
        if m.group(2):
            more = _keyed(m.group(2))
            if more is None:
                return False
            counts.update(more)
        self._summary_count -= 1  # `Ran N tests` and its verdict are one summary
        self._summary(cursor, end, text, counts)
        return True

    def _summary(self, cursor: int, end: int, text: str, counts: dict[str, int]) -> None:
        self._summaries.append((cursor, unit_text_of(text), counts))
        self._summary_count += 1
        self._ran = (end, counts["tests"]) if set(counts) == {"tests"} else None

    def _start(self, follow: _Follow) -> None:
        self._follow = follow

    def end_follow(self) -> None:
        follow, self._follow = self._follow, None
        if follow is not None:
            follow.done(self)

    def _found(self, kind: str, cursor: int, text: str, end: int) -> _Group | None:
        group = self.buckets[kind].add(_Group(cursor, unit_text_of(text), end))
        self._last = (kind, group) if group is not None else None
        return group

    def fail(self, cursor: int, text: str, end: int) -> _Group | None:
        """A failure's head line; None when past the bound (counted)."""
        return self._found(FAILURE, cursor, text, end)

    def detail(self, group: _Group | None, cursor: int, text: str, end: int) -> None:
        """A line that belongs to ``group`` (its location, its message)."""
        if group is None:
            self.buckets[FAILURE].count(cursor)
            return
        group.entries.append((cursor, unit_text_of(text)))
        group.end = end

    def _arrow(self, cursor: int, text: str, end: int) -> None:
        """`` --> file:line:col``: the location of the line before (rustc, ruff)."""
        last = self._last
        if last is not None and last[1].end == cursor:
            self.detail(last[1], cursor, text, end)
            return
        prev = self._prev
        if prev is None or prev[0] + len(prev[1]) != cursor:
            return
        head = _full_text(prev[1])[:CLASSIFY_CHARS]
        if _CODE_HEAD.match(head):
            self.detail(self.fail(prev[0], head, cursor), cursor, text, end)

    def _eslint(self, severity: str, cursor: int, text: str, end: int) -> None:
        """eslint's stylish ``  line:col  error  message  rule``: its file is the last line
        above that is not indented (listed once per file)."""
        group = self._found(FAILURE if severity == "error" else WARNING, cursor, text, end)
        prev = self._prev
        if group is None or prev is None:
            return
        head = _full_text(prev[1])
        if head and not head[0].isspace() and prev[0] != self._eslint_file:
            self._eslint_file = prev[0]
            group.entries.append((prev[0], unit_text_of(head)))

    # -- the result -----------------------------------------------------------------------------

    def digest(self, *, always: bool = False) -> Digest | None:
        """What was found (None when nothing was, unless ``always``)."""
        fail, flag, warn = (self.buckets[k] for k in (FAILURE, FLAGGED, WARNING))
        if not (fail.lines or flag.lines or warn.lines or self._summaries or always):
            return None
        chosen: list[tuple[int, str]] = []
        left: dict[str, list[int]] = {}
        room = LINE_BOUND
        # the head of each failure first, then their details, while there is room
        heads = [g.entries[0] for g in fail.groups]
        details = [e for g in fail.groups for e in g.entries[1:]]
        for kind, entries in ((FAILURE, heads), (FAILURE, details)):
            take = entries[:room]
            chosen += take
            room -= len(take)
            left.setdefault(kind, []).extend(c for c, _ in entries[len(take) :])
        flagged = [e for g in flag.groups for e in g.entries]
        take = flagged[:room]
        chosen += take
        room -= len(take)
        left[FLAGGED] = [c for c, _ in flagged[len(take) :]]
        warnings = [e for g in warn.groups for e in g.entries]
        take = warnings[:room] if not (fail.lines or flag.lines) else []
        chosen += take
        left[WARNING] = [c for c, _ in warnings[len(take) :]]
        # heads of a detail sort before it (a traceback's frame precedes its exception line)
        chosen += [(c, t) for c, t, _ in self._summaries]
        chosen.sort(key=lambda e: e[0])
        out: Digest = {"lines": [{"cursor": c, "text": t} for c, t in chosen]}
        if self._summaries:
            cursor, _, counts = self._summaries[-1]
            if counts:
                out["counts"] = dict(counts)
            out["counts_from"] = cursor
            if self._summary_count > 1:
                out["summaries"] = self._summary_count
        omitted: list[Omitted] = []
        for kind, bucket in ((FAILURE, fail), (FLAGGED, flag), (WARNING, warn)):
            cursors = left.get(kind, [])
            n = len(cursors) + bucket.extra_lines
            if not n:
                continue
            if bucket.extra_lines:
                cursors = [*cursors, bucket.extra_first, bucket.extra_last]
            omitted.append({"kind": kind, "lines": n, "first": min(cursors), "last": max(cursors)})
        if omitted:
            out["omitted"] = omitted
        return out


def unit_text_of(text: str) -> str:
    """A unit's full text cut as a digest line shows it."""
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + ELLIPSIS


def digest_bytes(data: bytes, *, always: bool = False) -> Digest | None:
    """The digest of a whole log held in memory (tests, small logs)."""
    d = Digester()
    d.feed(data)
    d.close()
    return d.digest(always=always)
