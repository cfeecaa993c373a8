"""Regular expressions a caller sends (``read`` ``until: {pattern}``, ``exec`` ``ready``):
matched by RE2, in time linear in the text whatever the pattern, so no pattern can stall the
event loop (Python's backtracking ``re`` took 4.5 s on ``(a+)+$`` against 26 characters, every
client waiting). The syntax is RE2's: Python's ``re`` less backreferences and lookaround; an
unsupported construct is ``invalid_argument`` naming it."""

from __future__ import annotations

from typing import Any, Protocol

import re2

from conch.errors import ConchError

MAX_MEM = 8 << 20  # the compiled program's memory (RE2's own bound; a larger one is refused)
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print parse errors to the server's stderr
_OPTIONS.max_mem = MAX_MEM

# RE2's words for what it leaves out, and what a caller should read instead
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "lookahead (?=…)"),
    ("invalid perl operator: (?!", "negative lookahead (?!…)"),
    ("invalid perl operator: (?<=", "lookbehind (?<=…)"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!…)"),
)


class Pattern(Protocol):
    def search(self, text: str) -> object: ...


class _Compiled:
    """An RE2 program searched as Python's ``re`` searches: ``$`` also matches before a
    final line break (RE2's ``$`` is the end of the text only), so ``ready: "up$"`` still
    matches a line ``up``."""

    def __init__(self, program: Any) -> None:
        self._program = program

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
        return _Compiled(re2.compile(pattern, _OPTIONS))
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
