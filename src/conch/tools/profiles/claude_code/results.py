"""The text results of Claude Code 2.1.197's shell tools, worded and sized as the original's
(measured with the real CLI: /work/shared/reference/hosts.md and the differential test,
tests/hosts/claude/test_claude_dialect.py).

Every result is ``{"text": ..., "is_error": bool}``: the profile sends the text as the one
text block of the MCP result, with ``isError`` from ``is_error``."""

from __future__ import annotations

import json
from typing import Any

# Bash: an output longer than this is saved to a file, the result shows a preview
MAX_INLINE_CHARS = 30000
PREVIEW_CHARS = 2000
# an error's text longer than this keeps its head and tail (the original's tool errors)
MAX_ERROR_CHARS = 10000
ERROR_KEEP = 5000
# TaskOutput: an output longer than this shows its tail after a pointer to the file
MAX_TASK_OUTPUT_CHARS = 32000
NO_OUTPUT = "(Bash completed with no output)"
TASK_TYPE = "local_bash"


def result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"text": text, "is_error": is_error}


def tool_use_error(message: str) -> dict[str, Any]:
    return result(f"<tool_use_error>{message}</tool_use_error>", True)


def no_task(task_id: str) -> dict[str, Any]:
    return tool_use_error(f"No task found with ID: {task_id}")


def clean(output: str) -> str:
    """The output as Bash shows it: the blank lines it starts with dropped, the whitespace it
    ends with trimmed (the first line's own indentation is kept)."""
    lines = output.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    return "\n".join(lines[start:]).rstrip()


def duration(ms: float) -> str:
    """A duration the way the original words its timeouts: ``1s``, ``59s``, ``1m 5s``,
    ``10m 0s``, ``1h 0m 0s``."""
    if ms < 60000:
        if ms == 0:
            return "0s"
        if ms < 1:
            return f"{ms / 1000:.1f}s"
        return f"{int(ms // 1000)}s"
    days = int(ms // 86400000)
    hours = int(ms % 86400000 // 3600000)
    minutes = int(ms % 3600000 // 60000)
    seconds = _js_round(ms % 60000 / 1000)
    if seconds == 60:
        seconds, minutes = 0, minutes + 1
    if minutes == 60:
        minutes, hours = 0, hours + 1
    if hours == 24:
        hours, days = 0, days + 1
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {seconds}s"
    return f"{minutes}m {seconds}s"


def _js_round(x: float) -> int:
    """JavaScript's Math.round (halves up), not Python's banker's rounding."""
    return int(x + 0.5)


def file_size(n: int) -> str:
    """A size the way the original words it: ``512 bytes``, ``29.3KB``, ``30KB``, ``1.2MB``."""
    kb = n / 1024
    if kb < 1:
        return f"{n} bytes"
    for unit, value in (("KB", kb), ("MB", kb / 1024), ("GB", kb / 1024 / 1024)):
        if value < 1024 or unit == "GB":
            text = f"{value:.1f}"
            return (text[:-2] if text.endswith(".0") else text) + unit
    raise AssertionError("unreachable")


def _error_text(text: str) -> str:
    """An error's text as the model gets it: over 10000 characters, its head and tail."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    cut = len(text) - MAX_ERROR_CHARS
    return f"{text[:ERROR_KEEP]}\n\n... [{cut} characters truncated] ...\n\n{text[-ERROR_KEEP:]}"


def exit_error(
    code: int, output: str, message: str | None = None, *, cut: bool = True
) -> dict[str, Any]:
    """A failed command: ``Exit code N``, a message (a timeout's), then at most the first
    30000 characters of its output; over 10000 characters in all, its head and tail, unless
    the host cuts error texts itself (``cut=False``: Claude Code does, MCP results included)."""
    body = clean(output)[:MAX_INLINE_CHARS]
    text = "\n".join(p for p in (f"Exit code {code}", message, body) if p)
    return result(_error_text(text) if cut else text, True)


def timed_out(timeout_ms: int, output: str, *, cut: bool = True) -> dict[str, Any]:
    message = f"Command timed out after {duration(timeout_ms)}"
    return exit_error(143, output, message, cut=cut)


def success(output: str, size: int, path: str, note: str | None = None) -> dict[str, Any]:
    """A command that exited 0: its output, or (over 30000 bytes) where it was saved and a
    2 KB preview; ``note`` follows on a line of its own (the cwd reset)."""
    if size > MAX_INLINE_CHARS:
        text = persisted(output, size, path)
    else:
        text = clean(output) or ("" if note else NO_OUTPUT)
    return result("\n".join(p for p in (text, note) if p))


def persisted(output: str, size: int, path: str) -> str:
    head = output[:PREVIEW_CHARS]
    more = len(output) > PREVIEW_CHARS
    if more:
        newline = head.rfind("\n")
        head = head[: newline if newline > PREVIEW_CHARS * 0.5 else PREVIEW_CHARS]
    return (
        "<persisted-output>\n"
        f"Output too large ({file_size(size)}). Full output saved to: {path}\n\n"
        f"Preview (first {file_size(PREVIEW_CHARS)}):\n"
        f"{head}{chr(10) + '...' + chr(10) if more else chr(10)}"
        "</persisted-output>"
    )


def background(task_id: str, path: str, interim: str = "") -> dict[str, Any]:
    text = (
        f"Command running in background with ID: {task_id}. Output is being written to: "
        f"{path}. You will be notified when it completes. To check interim output, use Read "
        "on that file path."
    )
    return result(f"{interim}\n{text}" if interim else text)


def task_status(
    retrieval: str,
    task_id: str,
    status: str,
    exit_code: int | None,
    output: str,
    path: str,
) -> dict[str, Any]:
    """TaskOutput's tags: the retrieval status, the task, its status, then its exit code
    (once it has ended) and its output (when there is any)."""
    parts = [
        f"<retrieval_status>{retrieval}</retrieval_status>",
        f"<task_id>{task_id}</task_id>",
        f"<task_type>{TASK_TYPE}</task_type>",
        f"<status>{status}</status>",
    ]
    if exit_code is not None:
        parts.append(f"<exit_code>{exit_code}</exit_code>")
    if len(output) > MAX_TASK_OUTPUT_CHARS:
        header = f"[Truncated. Full output: {path}]\n\n"
        output = header + output[-(MAX_TASK_OUTPUT_CHARS - len(header)) :]
    shown = output.rstrip()
    if shown:
        parts.append(f"<output>\n{shown}\n</output>")
    return result("\n\n".join(parts))


def stopped(task_id: str, command: str) -> dict[str, Any]:
    return result(
        json.dumps(
            {
                "message": f"Successfully stopped task: {task_id} ({command})",
                "task_id": task_id,
                "task_type": TASK_TYPE,
                "command": command,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )
    )
