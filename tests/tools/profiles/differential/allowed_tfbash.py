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
_NOTICE = re.compile(r"(?m)^\[\d+\][+-]? +.*\n")
_PROMPT = re.compile(r"__TFBASH_PROMPT_[0-9a-f]{32}__> ")
# its private end-of-command marker (seed-contracts §2.3), which a timeout's output leaks when
# the recovery probe's answer lands in it (a loaded box): like the private prompt, a §4 leak
_END = re.compile(r"\x1eTFBASH_END_[0-9a-f]{32}:-?\d+:[A-Za-z0-9+/=]*\x1f")


def seed_text(text: str) -> str:
    """The original's output as a person reading a `\\n` terminal log would have it: the
    bracketed-paste noise and its prompt line break gone, `\\r\\n` line ends as `\\n`."""
    text = text.replace("\x1b[?2004h\x1b[?2004l\r\r\n", "")
    text = _PROMPT.sub("", _PASTE.sub("", text))
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
    if c_head.endswith("No output captured.") and not c_tail:  # ours printed nothing
        return o_head.endswith("\n\n") and seed_text(o_tail.rsplit("\n```", 1)[0]).strip() in (
            "",
            "exit",
        )
    if o_head != c_head:
        return False
    o_body = seed_text(o_tail.rsplit("\n```", 1)[0]).strip("\n")
    c_body = c_tail.rsplit("\n```", 1)[0].strip("\n")
    return c_body.endswith(o_body[-100:]) if o_body else not c_body


def same_text_head(original: Any, ours: Any) -> bool:
    """A window cut by a byte budget from the same cursor: the original's text (less its
    `\r` and noise) starts ours, which fits the same budget."""
    if not (isinstance(original, str) and isinstance(ours, str)):
        return False
    return ours.startswith(seed_text(original)) and len(ours.encode()) <= len(original.encode())


def same_syntax_error(original: Any, ours: Any) -> bool:
    """bash's own syntax-error diagnostic, worded for a script line instead of typed input."""
    if not (isinstance(original, str) and isinstance(ours, str)):
        return False
    first = seed_text(original).strip()
    return "syntax error" in first and ours.startswith(first.replace("bash: ", "bash: line 1: "))


def only_noise(original: Any, ours: Any) -> bool:
    """The original's output is nothing but line breaks once its prompt and noise are gone;
    ours is empty (bash's own line break for the interrupted command line is noise too)."""
    if not isinstance(original, str):
        return False
    return not seed_text(_END.sub("", original)).strip() and ours == ""


def signal_notice(original: Any, ours: Any) -> bool:
    """The original's bash notice for a foreground command killed by the signal; ours ends
    the command line as Ctrl-C does, and prints nothing (bash's line break is noise)."""
    return (
        isinstance(original, str)
        and seed_text(original).strip() in ("Terminated", "Killed")
        and ours == ""
    )


def exit_notice(original: Any, ours: Any) -> bool:
    """Interactive bash's `exit` notice as the shell ends."""
    return isinstance(original, str) and seed_text(original) == "exit\n" and ours == ""


def streams_sooner(original: Any, ours: Any) -> bool:
    """A running execution's output so far: ours shows what the original still holds back."""
    return (
        isinstance(original, str) and isinstance(ours, str) and ours.startswith(seed_text(original))
    )


def any_cursor(original: Any, ours: Any) -> bool:
    return isinstance(original, int) and isinstance(ours, int) and ours >= 0


_OUTPUT = r"(structuredContent|content\[0\]\.json)\.output"
_CURSORS = r"(structuredContent|content\[0\]\.json)\.(next_cursor|buffer_start_cursor)"
_NOISE = (
    "docs/spec.md §4: shell output is 'exactly what the command printed: no echoed command, no "
    "prompt, no private marker, no bracketed-paste or other terminal noise, `\\n` line ends'; "
    "seed-contracts §4 lists 'the private prompt and bracketed-paste noise leak into output' "
    "as a tfbash bug to avoid"
)

_FOLLOWS = (
    "follows from the output difference allowed above: seed-contracts §2.3 'Cursors count "
    "normalized UTF-8 bytes' of that output"
)

ALLOWED: list[Allowed] = [
    Allowed("*", _OUTPUT, _NOISE, same_text),
    Allowed(r"window.*", _OUTPUT, _NOISE, same_text_tail),
    Allowed(r"read_.*", _OUTPUT, _NOISE, same_text_head),
    Allowed(
        r"syntax",
        _OUTPUT,
        "seed-contracts §2.5: 'A syntax error gives exited, 2, with `bash: syntax error…` in the "
        "output' — bash's own diagnostic; docs/spec.md §4 runs the command without typing it into "
        "the terminal ('no echoed command'), so bash words it for a script line (`bash: line 1: "
        "…` and the offending line); status and exit code are compared exactly",
        same_syntax_error,
    ),
    Allowed(r"syntax", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        r"list_[tki]|single_i",
        _OUTPUT,
        "docs/spec.md §2: if the job has not ended by yield_ms, exec 'returns `state: running` "
        "with the output so far' (the original holds a running command's output back until it "
        "ends)",
        streams_sooner,
    ),
    Allowed(r"list_[tki]|single_i", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        r"timeout",
        _OUTPUT,
        "seed-contracts §2.5: after a timeout 'The output again contains the private prompt'; "
        "seed-contracts §4 lists the prompt leak as a tfbash bug to avoid (so is its end "
        "marker, §2.3, which a loaded box's timeout output also leaks)",
        only_noise,
    ),
    Allowed(
        r"signalled_(term|kill)",
        _OUTPUT,
        "docs/spec.md §4: signal terminate|kill 'stops the job and the rest of its command line' "
        "(the command line is ended as Ctrl-C ends it) and 'job-control notices … never appear'; "
        "seed-contracts §2.5 lists bash's `Terminated`/`Killed` notices in the output",
        signal_notice,
    ),
    Allowed(r"signalled_(term|kill)", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        r"timeout_int_ignored",
        r"(structuredContent|content\[0\]\.json)\.(shell_rebuilt|cwd)",
        "docs/spec.md §4: 'A deadline does the same (interrupt, then kill the foreground group); "
        "if the shell cannot be brought back it is restarted and the result says so' — Conch "
        "brings it back, where the original rebuilds it when Ctrl-C is ignored (seed-contracts "
        "§2.3 Timeout, step 4)",
        lambda original, ours: (
            (original is True and ours is False) or (isinstance(original, str) and ours == "/")
        ),
    ),
    Allowed(
        r"after_int_ignored",
        _OUTPUT,
        "follows from timeout_int_ignored: the shell kept its state (docs/spec.md §4 'leaves the "
        "shell usable with cwd/env intact'), the original's rebuilt shell lost `Y`",
        lambda original, ours: (
            isinstance(original, str)
            and seed_text(original).startswith("y=\n")
            and ours == "y=7\n/\n"
        ),
    ),
    Allowed(
        r"after_int_ignored",
        _CURSORS + r"|(structuredContent|content\[0\]\.json)\.cwd",
        _FOLLOWS + "; the kept shell is still in its cwd (docs/spec.md §4 'cwd/env intact')",
        lambda original, ours: ours == "/" or isinstance(ours, int),
    ),
    Allowed(
        r"background",
        _OUTPUT,
        "docs/spec.md §4: 'job-control notices (`[1]+ Done …`) never appear'; seed-contracts §2.5: "
        "'Job-control notices (`[1] 13676`, `[1]- Terminated …`) appear in the output'",
        lambda original, ours: (
            isinstance(original, str) and ours == _NOTICE.sub("", seed_text(original))
        ),
    ),
    Allowed(r"background", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        r"after_background",
        _OUTPUT,
        "docs/spec.md §4: 'Background processes the command started with `&` keep running like in "
        "a terminal. What they print later … appears in the output of the job running at that "
        "moment'; the original kills them when the command ends (seed-contracts §2.5: "
        "'`LATE` never appears')",
        lambda original, ours: ours == "LATE\n" + seed_text(original),
    ),
    Allowed(r"after_background", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        r"died",
        _OUTPUT,
        "docs/spec.md §4: output is 'exactly what the command printed: … no … terminal noise' "
        "(interactive bash's `exit` notice is the terminal's, not the command's)",
        exit_notice,
    ),
    Allowed(r"died", _CURSORS, _FOLLOWS, any_cursor),
    Allowed(
        "*",
        _CURSORS,
        _NOISE + "; cursors count the bytes of that output (seed-contracts §2.3: 'Cursors count "
        "normalized UTF-8 bytes'), so they count no `\\r` or noise bytes",
        fewer_bytes,
    ),
    Allowed(r"overview.*", r"result\.contents\[0\]\.text", _NOISE, same_overview),
    Allowed(
        r"list_interrupted.*",
        r"(structuredContent|content\[0\]\.json)\.(status|exit_code|eof|duration_ms|cwd|"
        r"shell_status|shell_rebuilt|output|next_cursor|buffer_start_cursor)",
        "seed-contracts §4 tfbash bug: 'interrupt of a command list leaves the Execution "
        "running until timeout_ms'; docs/spec.md §4: signal interrupt 'stops the job and the rest "
        "of its command line … ends the job within 2 s'",
    ),
    Allowed(
        r"list_(terminated|killed)",
        r"(structuredContent|content\[0\]\.json)\.(exit_code|output|next_cursor|"
        r"buffer_start_cursor)",
        "seed-contracts §4 tfbash bug: 'terminate/kill hit only the current pipeline, so the "
        "rest of the list still runs' (the original's list goes on and exits 0); docs/spec.md §4: "
        "signal stops the job 'and the rest of its command line'",
    ),
    Allowed(
        r"close_.*",
        r"(structuredContent|content\[0\]\.json)\.cleanup_complete",
        "docs/spec.md §4: shell_close 'ends the shell and every process in it … within "
        "close_timeout_ms (default 2000; seed 2 takes 3–5 s here); reports cleanup_complete' — "
        "on a loaded machine the original's close (of a busy or a dead shell) can run out of "
        "time and say false where Conch's completes",
        lambda original, ours: original is False and ours is True,
    ),
]
