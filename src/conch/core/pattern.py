"""Regular expressions a caller sends (``read`` ``until: {pattern}``, ``exec`` ``ready``): RE2
(Python's backtracking ``re`` took 4.5 s on ``(a+)+$`` against 26 characters, every client
waiting). RE2's time is linear in the text, but its constant is the pattern's: where its DFA
gives up (a counted repetition of a class, ``[^x]{50}``, after a class that can start anywhere)
it simulates the program, a few nanoseconds per instruction per character (measured here: up to
8; 3 s per MiB at 400 instructions, 50 s at 24,000). So:

* a pattern whose program has more than :data:`MAX_PROGRAM` instructions is
  ``invalid_argument`` naming its size (a legitimate one is far smaller: ``(?i)listening on
  port \\d+`` has 26, ``[^\\n]{0,200}`` 1,804, ``\\pL`` 1,200);
* every search runs beside the event loop, on worker threads (RE2 releases the GIL while it
  searches) at the lowest CPU priority, in steps: the caller (core/jobs/ready.py) sizes each
  step's text to take about :data:`STEP_S` of CPU time at the rate the pattern showed so far
  (at first its worst, :attr:`Pattern.cost`: the worst seen per instruction times the
  program's size), and never more than :data:`MAX_STEP_S` at its worst, whatever the text
  holds; a worker rests after a long step as long as it searched, so it searches half the
  time at most; a wait that ends stops the search after the step that runs.

The syntax is RE2's: Python's ``re`` less backreferences and lookaround; an unsupported
construct is ``invalid_argument`` naming it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import re2

from conch.errors import ConchError

MAX_MEM = 8 << 20  # the compiled program's memory (RE2's own bound; a larger one is refused)
#: the largest program accepted (a search of it can take 40 µs of CPU a character here)
MAX_PROGRAM = 5000
#: what one search step should take, at the rate its pattern showed (CPU time of a worker
#: thread, never the event loop's)
STEP_S = 0.02
#: what one search step can take at most, at its pattern's worst
MAX_STEP_S = 1.0
#: steps that cannot take longer than this go to a worker of their own, never queued behind
#: the long steps of slow patterns
QUICK_S = 0.005
#: a worker whose step searched longer than this rests as long before its next
REST_AFTER_S = 0.002
#: the worst CPU time per character per program instruction (RE2's simulation of the program,
#: where its DFA gives up: 8 ns measured on this box; room for a slower CPU)
_WORST_S = 25e-9
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print parse errors to the server's stderr
_OPTIONS.max_mem = MAX_MEM
_OPTIONS.never_capture = True  # (only whether it matches counts: no submatches to track)

# RE2's words for what it leaves out, and what a caller should read instead
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "lookahead (?=…)"),
    ("invalid perl operator: (?!", "negative lookahead (?!…)"),
    ("invalid perl operator: (?<=", "lookbehind (?<=…)"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!…)"),
)


_T = TypeVar("_T")


def _yield_the_cpu() -> None:
    """The pattern workers run at the lowest priority (their own threads only), so a search
    takes the CPU time no request wants (on this 2-core box, another client's `exec true`
    beside two reads searching a slow pattern: p50 1.9x its quiet figure at 0, 1.4x at 19)."""
    with contextlib.suppress(OSError, AttributeError):  # (per thread: Linux)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


_QUICK, _SLOW = (
    ThreadPoolExecutor(
        max_workers=1, thread_name_prefix=f"conch-{name}", initializer=_yield_the_cpu
    )
    for name in ("pattern-quick", "pattern")
)


_rest = {id(_QUICK): 0.0, id(_SLOW): 0.0}  # what each worker owes before its next step


def _rested(pool: ThreadPoolExecutor, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn`` on ``pool``'s one thread, after resting as long as its last step searched (when
    that was over REST_AFTER_S): a worker searches half the time at most, however many waits
    give it steps."""
    time.sleep(_rest[id(pool)])
    t0 = time.thread_time()
    try:
        return fn(*args)
    finally:
        took = time.thread_time() - t0
        _rest[id(pool)] = took if took > REST_AFTER_S else 0.0


def beside_loop(bound_s: float, fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run one search step (which cannot take longer than ``bound_s``) on a pattern worker:
    one thread for steps within QUICK_S and one for the rest, each shared by all callers (so
    patterns take at most those two threads, and steps of different waits take turns)."""
    pool = _QUICK if bound_s <= QUICK_S else _SLOW
    return asyncio.get_running_loop().run_in_executor(pool, _rested, pool, fn, *args)


class Pattern(Protocol):
    #: the most seconds a search can take per character (of an idle machine)
    cost: float

    def search(self, text: str) -> object: ...


class _Compiled:
    """An RE2 program searched as Python's ``re`` searches: ``$`` also matches before a
    final line break (RE2's ``$`` is the end of the text only), so ``ready: "up$"`` still
    matches a line ``up``."""

    def __init__(self, program: Any) -> None:
        self._program = program
        self.cost = 2 * _WORST_S * program.programsize  # (2: the second search, below)

    def search(self, text: str) -> object:
        found = self._program.search(text)
        if found is None and text.endswith("\n"):
            found = self._program.search(text[:-1])
        return found


def compile_pattern(pattern: object, field: str) -> Pattern:
    """The compiled pattern, or ``invalid_argument`` naming ``field`` and what is wrong."""
    if not isinstance(pattern, str):
        raise ConchError("invalid_argument", f"{field} must be a string", field=field)
    try:
        program = re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        raw = e.args[0] if e.args else b""
        why = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        construct = next((c for words, c in _UNSUPPORTED if why.startswith(words)), None)
        if why.startswith("invalid escape sequence: \\") and why[-1:].isdigit():
            construct = "backreferences (\\1 … \\9)"
        elif why.startswith("invalid perl operator: (?P") and "(?P=" in pattern:
            construct = "named backreferences (?P=…)"  # (RE2 cuts its words at "(?P")
        if construct is not None:
            why = f"{construct} are not supported: patterns use RE2 syntax (linear time)"
        elif "pattern too large" in why:
            why = f"the pattern needs more than {MAX_MEM >> 20} MiB to run: {why}"
        raise ConchError(
            "invalid_argument", f"{field} is not a valid regex: {why}", field=field
        ) from None
    if program.programsize > MAX_PROGRAM:
        raise ConchError(
            "invalid_argument",
            f"{field} is too costly to search: its RE2 program has {program.programsize} "
            f"instructions, at most {MAX_PROGRAM} are allowed (a counted repetition such as "
            "[^x]{1000} or .{500} repeats what it counts: use + or *, or a smaller count)",
            field=field,
        )
    return _Compiled(program)
