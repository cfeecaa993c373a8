"""What the model reads: Codex's text result of ``exec_command`` / ``write_stdin`` (one string,
no structured content), and its errors.

``Chunk ID: <6 hex>``, ``Wall time: <s.ssss> seconds``, ``Process exited with code N`` or
``Process running with session ID N``, ``Original token count: N``, ``Output:`` and the output,
one a line. The output is cut as Codex cuts it (truncate.py); when it is, Conch's line under
Codex's warning says where the left-out bytes are in the job's log."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conch.errors import ConchError
from conch.tools.profiles.codex.truncate import Cut, Decoded, approx_tokens, formatted
from conch.tools.tool import ErrorResult

DEFAULT_MAX_OUTPUT_TOKENS = 10_000
WARNING_END = "\n\n"  # Codex's warning header ends with an empty line


@dataclass(frozen=True)
class Chunk:
    """One answer: the output since the last chunk (``raw_start`` is its offset in the job's
    log), how long the call waited, and how the process stands."""

    decoded: Decoded
    raw_start: int
    wall_s: float
    exit_code: int | None
    session_id: int | None
    job_id: str


class CodexError(Exception):
    """A failure in Codex's words: the whole text the model reads."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def chunk_text(chunk: Chunk, max_tokens: int) -> str:
    """The result text, as Codex formats it."""
    text = chunk.decoded.text
    lines = [f"Chunk ID: {secrets.token_hex(3)}", f"Wall time: {chunk.wall_s:.4f} seconds"]
    if chunk.session_id is None:
        lines.append(f"Process exited with code {chunk.exit_code}")
    else:
        lines.append(f"Process running with session ID {chunk.session_id}")
    lines.append(f"Original token count: {approx_tokens(len(text.encode('utf-8')))}")
    lines.append("Output:")
    lines.append(_with_where(formatted(text, max_tokens), chunk))
    return "\n".join(lines)


def _with_where(cut: Cut, chunk: Chunk) -> str:
    """Codex's cut, and Conch's line saying where the bytes left out are kept."""
    if not cut.cut:
        return cut.text
    start = chunk.raw_start + chunk.decoded.raw_offset(cut.start)
    end = chunk.raw_start + chunk.decoded.raw_offset(cut.end)
    where = (
        f"Conch kept every byte: the {end - start} left out are bytes {start}-{end} of job "
        f"{chunk.job_id}'s log (read them with Conch's `read` "
        f'{{"job_id": "{chunk.job_id}", "cursor": {start}}}).'
    )
    head, sep, rest = cut.text.partition(WARNING_END)
    return f"{head}\n{where}{sep}{rest}"


def error_result(tool: str) -> ErrorResult:
    """How ``tool`` words a Conch error: bad arguments as Codex words a call it cannot parse,
    anything else (a refused start, a full runtime) as ``<tool> failed: …``."""

    def shape(error: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        if error.code == "invalid_argument":
            return {"text": f"failed to parse function arguments: {error.message}"}, True
        return {"text": f"{tool} failed: {error.message}"}, True

    return shape


def text_result(text: str) -> dict[str, Any]:
    """A result as the tools return it (the MCP text block is ``text``)."""
    return {"text": text}


def render_text(result: dict[str, Any], is_error: bool) -> str:
    return str(result.get("text", ""))
