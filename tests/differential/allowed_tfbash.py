"""Differences between tfbash-mcp 0.2.0 and `conch serve --profile tfbash` that are accepted.

Every entry names the recorded call (a regular expression over the call labels of
test_tfbash_diff.py, ``*`` for any), the JSON path of the difference, and the reason: a seed
bug listed in /work/shared/reference/seed-contracts.md or a sentence of SPEC.md. An entry with a
check accepts only the difference the check describes (e.g. "equal once the seed's terminal
noise is removed"), nothing else at that path.
"""

from __future__ import annotations

import re
from typing import Any

from harness import Allowed

# What tfbash-mcp's interactive bash adds to every output on Linux (seed-contracts §2.5):
# bracketed-paste mode toggles and the prompt's line break.
_PASTE = re.compile(r"\x1b\[\?2004[hl]")


def seed_text(text: str) -> str:
    """The original's output as a person reading a `\\n` terminal log would have it: the
    bracketed-paste noise and its prompt line break gone, `\\r\\n` line ends as `\\n`."""
    text = text.replace("\x1b[?2004h\x1b[?2004l\r\r\n\x1b[?2004h", "")
    text = _PASTE.sub("", text)
    return text.replace("\r\r\n", "\n").replace("\r\n", "\n")


def same_text(original: Any, ours: Any) -> bool:
    return isinstance(original, str) and isinstance(ours, str) and seed_text(original) == ours


def same_text_tail(original: Any, ours: Any) -> bool:
    """A window of the newest bytes: ours holds the same text, and may reach further back
    (the original's window of the same size also spends bytes on `\\r` and noise)."""
    if not (isinstance(original, str) and isinstance(ours, str)):
        return False
    cleaned = seed_text(original).lstrip("\n")
    return ours.endswith(cleaned) and len(ours.encode()) <= len(original.encode())


def fewer_bytes(original: Any, ours: Any) -> bool:
    """A cursor over our output: the original's also counts its `\\r` and noise bytes."""
    return isinstance(original, int) and isinstance(ours, int) and 0 <= ours <= original


def same_overview(original: Any, ours: Any) -> bool:
    """The overview Markdown: equal once each output block's noise is removed (the tail is
    the last 500 characters of each side's own output, so it is compared as a suffix)."""
    if not (isinstance(original, str) and isinstance(ours, str)):
        return False
    o_head, _, o_tail = original.partition("```text\n")
    c_head, _, c_tail = ours.partition("```text\n")
    o_head = o_head.replace("_Earlier output was truncated._\n\n", "")
    c_head = c_head.replace("_Earlier output was truncated._\n\n", "")
    if o_head != c_head:
        return False
    o_body = seed_text(o_tail.rsplit("\n```", 1)[0])
    c_body = c_tail.rsplit("\n```", 1)[0]
    return c_body.endswith(o_body.lstrip("\n")[-100:]) if o_body else not c_body


_OUTPUT = r"(structuredContent|content\[0\]\.json)\.output"
_CURSORS = r"(structuredContent|content\[0\]\.json)\.(next_cursor|buffer_start_cursor)"
_NOISE = (
    "SPEC §4: shell output is 'exactly what the command printed: no echoed command, no prompt, "
    "no private marker, no bracketed-paste or other terminal noise, `\\n` line ends'; "
    "seed-contracts §4 lists 'the private prompt and bracketed-paste noise leak into output' "
    "as a tfbash bug to avoid"
)

ALLOWED: list[Allowed] = [
    Allowed("*", _OUTPUT, _NOISE, same_text),
    Allowed(r"window.*", _OUTPUT, _NOISE, same_text_tail),
    Allowed(
        "*",
        _CURSORS,
        _NOISE + "; cursors count the bytes of that output (seed-contracts §2.3: 'Cursors count "
        "normalized UTF-8 bytes'), so they count no `\\r` or noise bytes",
        fewer_bytes,
    ),
    Allowed(r"overview.*", r"result\.contents\[0\]\.text", _NOISE, same_overview),
    Allowed(
        r"list_interrupted",
        r"(structuredContent|content\[0\]\.json)\.(status|exit_code|eof|duration_ms|cwd|"
        r"shell_status|shell_rebuilt)",
        "seed-contracts §4 tfbash bug: 'interrupt of a command list leaves the Execution "
        "running until timeout_ms'; SPEC §4: signal interrupt 'stops the job and the rest of "
        "its command line … ends the job within 2 s'",
    ),
    Allowed(
        r"list_(terminated|killed)",
        r"(structuredContent|content\[0\]\.json)\.exit_code",
        "seed-contracts §4 tfbash bug: 'terminate/kill hit only the current pipeline, so the "
        "rest of the list still runs' (the original's list goes on and exits 0); SPEC §4: "
        "signal stops the job 'and the rest of its command line'",
    ),
]
