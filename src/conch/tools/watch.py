"""What a person beside the agent sees and does (the dashboard's data, docs/spec.md §8), as one
async surface every host gives: ``Host.watch``.

:class:`LocalWatch` builds it from one engine: the job list with what each job runs (its
label, shown here and nowhere else) and what makes it stand out, a log window as styled
lines, a terminal's screen and its replay, and a person's typing, hand-back, size and command
in an idle shell. A fleet gives the same surface by asking each job's node for it
(conch/fleet/watch.py), so its dashboard shows and takes over a terminal on any node. Every
answer is plain data (JSON, picklable): it may cross Ray.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any, Protocol

from conch.core import (
    Engine,
    JobView,
    boundary_at_or_after,
    job_summary,
    log_window,
    normalize,
)
from conch.tools import ansi
from conch.tools.context import invisible
from conch.tools.screen_view import screen_body
from conch.tools.views import jobs_newest_first

FIRST_VIEW_BYTES = 64 * 1024
CHUNK_BYTES = 256 * 1024
SCRIPT_LINES = 4
TERMINAL_MODES = ("pty", "shell")

_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Watch(Protocol):
    async def jobs(self) -> dict[str, Any]:
        """``{"jobs": [...], "shells": [...]}``: every retained job, running first, then
        finished, each newest first, with ``what``/``purpose`` and its attention flags."""
        ...

    async def log(self, job_id: str, cursor: int | None, style: str | None) -> dict[str, Any]:
        """A window of a job's log from ``cursor`` (or its last 64 KiB) as text and styled
        lines, and where to continue."""
        ...

    async def screen(self, job_id: str) -> dict[str, Any]:
        """A terminal job's screen as styled rows, its cursor and size, its state."""
        ...

    async def replay(self, job_id: str, t: float) -> dict[str, Any]:
        """The screen ``t`` seconds into its recording, and the recording's ``duration``."""
        ...

    async def type_human(self, job_id: str, text: str | None, keys: Sequence[str]) -> int:
        """A person's keys into a terminal job (then attended); the byte count, never what."""
        ...

    async def hand_back(self, job_id: str) -> None: ...

    async def resize(self, job_id: str, size: object) -> dict[str, int]:
        """A person sets a terminal's size (``write``'s ``resize`` checks): ``{rows, cols}``."""
        ...

    async def run_human(self, shell_id: str, command: str) -> str:
        """A person's command in an idle shell (attended from its start); its job id."""
        ...


def visible(text: str) -> str:
    """What a person reads of a command: control characters (an ESC) shown as ``\\xNN``, and
    the invisible ones that change how the rest reads (bidi overrides and isolates, zero-width
    characters, BOM: Unicode category Cf; line and paragraph separators) as ``\\uNNNN``: a
    ``rm -rf`` never reads like a comment."""
    text = _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return "".join(f"\\u{ord(c):04x}" if invisible(c) else c for c in text)


def what_it_runs(job: JobView) -> dict[str, Any]:
    """``what`` (display text of the command, argv or the script's first lines), ``what_kind``
    and ``purpose``; empty when the job was not started through a tool call."""
    label = job.label
    if label is None:
        return {}
    out: dict[str, Any] = {"purpose": label.purpose}
    if label.command is not None:
        out.update(what=visible(label.command), what_kind="command")
    elif label.argv is not None:
        out.update(what=visible(shlex.join(label.argv)), what_kind="argv")
    elif label.script is not None:
        lines = visible(label.script.strip("\n")).splitlines()
        head = "\n".join(lines[:SCRIPT_LINES])
        more = len(lines) - SCRIPT_LINES
        out.update(what=head + (f"\n… ({more} more lines)" if more > 0 else ""), what_kind="script")
    return out


def attention(job: JobView) -> dict[str, Any]:
    """What makes a job stand out: it waits for input or a secret, a person types into it."""
    waiting, secret = job.input_state() if not job.terminal else (False, False)
    return {
        "terminal_mode": job.mode in TERMINAL_MODES,
        "awaiting_input": waiting,
        "awaiting_secret": secret,
        "attended": job.attended,
    }


def log_chunk(job: JobView, cursor: int | None, style: str | None = None) -> dict[str, Any]:
    """Log text from ``cursor`` (or the last 64 KiB) and where to continue: ``text`` normalized,
    ``lines`` the same bytes as styled segments (``conch.tools.ansi``)."""
    total = job.log.size()
    start = cursor
    if start is None or start > total or start < 0:
        start = max(0, total - FIRST_VIEW_BYTES)
        if start:
            start += boundary_at_or_after(job.log.read(start, min(total, start + 4)), 0)
        style = None
    w = log_window(job, start, CHUNK_BYTES)
    data = job.log.read(w.cursor, w.next_cursor)
    styled = ansi.render(w.text, ansi.style_from_token(style))
    return {
        "job_id": job.job_id,
        "state": job.state,
        "text": normalize(data),
        "lines": styled["lines"],
        "reset_first": styled["reset_first"],
        "style": styled["style"],
        "cursor": w.cursor,
        "next_cursor": w.next_cursor,
        "total_bytes": total,
        "skipped": start if cursor is None else 0,
        "more": w.next_cursor < total,
    }


class LocalWatch:
    """The watch of one engine (``conch.Runtime.watch``; a fleet node's executor answers the
    fleet's with it)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def jobs(self) -> dict[str, Any]:
        e = self._engine
        return {
            "jobs": [
                {**job_summary(j), **what_it_runs(j), **attention(j)} for j in jobs_newest_first(e)
            ],
            "shells": e.shell_summaries(),
        }

    async def log(self, job_id: str, cursor: int | None, style: str | None) -> dict[str, Any]:
        return log_chunk(self._engine.job(job_id), cursor, style)

    async def screen(self, job_id: str) -> dict[str, Any]:
        job = self._engine.job(job_id)
        body = screen_body(self._engine.screen(job_id))
        body.update(job_id=job.job_id, state=job.state, version=job.version, **attention(job))
        return body

    async def replay(self, job_id: str, t: float) -> dict[str, Any]:
        snap, duration = self._engine.replay(job_id, t)
        return {**screen_body(snap), "t": t, "duration": duration}

    async def type_human(self, job_id: str, text: str | None, keys: Sequence[str]) -> int:
        return await self._engine.type_human(job_id, text, keys)

    async def hand_back(self, job_id: str) -> None:
        self._engine.hand_back(job_id)

    async def resize(self, job_id: str, size: object) -> dict[str, int]:
        rows, cols = self._engine.resize(job_id, size)
        return {"rows": rows, "cols": cols}

    async def run_human(self, shell_id: str, command: str) -> str:
        return await self._engine.run_human(shell_id, command)
