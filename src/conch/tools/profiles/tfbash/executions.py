"""An execution (a command run in a shell) as tfbash shows it: what the profile keeps per
execution that the runtime does not (its ``max_output_bytes``, the last signal sent), the
retained window of its output (the original's ring buffer of ``max_output_bytes``, cut at
character boundaries) and the snapshot ``shell_exec`` / ``shell_read`` return."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from conch.core import Engine, boundary_at_or_after, peek
from conch.tools.profiles.tfbash.limits import OUTPUT_BUFFER_BYTES
from conch.tools.profiles.tfbash.shells import shell_status_of, shell_summaries

if TYPE_CHECKING:
    from conch.core import JobView

# bash's $? for a foreground command ended by the signal (what the original reports)
SIGNAL_STATUS = {"interrupt": 130, "terminate": 143, "kill": 137}


class State:
    """Per-runtime bookkeeping (what the runtime does not track for tfbash). When each shell
    was opened and its latest execution are the shell's own facts, in core."""

    def __init__(self) -> None:
        self.capacity: dict[str, int] = {}  # exec id -> its max_output_bytes
        self.signalled: dict[str, str] = {}  # exec id -> the last signal delivered to it


def buffer_start(job: JobView, capacity: int) -> int:
    """Where the execution's retained window starts: its newest ``capacity`` bytes, never
    starting inside a character (the original's ring buffer evicts whole code points)."""
    total = job.log.size()
    base = total - capacity
    if base <= 0:
        return 0
    head = job.log.read(base, min(total, base + 4))
    return base + boundary_at_or_after(head, 0)


def inside_character(job: JobView, cursor: int) -> bool:
    if cursor <= 0 or cursor >= job.log.size():
        return False
    b = job.log.read(cursor, cursor + 1)
    return bool(b) and (b[0] & 0xC0) == 0x80


def execution_window(
    rt: Engine, st: State, shell_id: str, job: JobView, cursor: int, max_bytes: int
) -> dict[str, Any]:
    """tfbash's execution snapshot of ``[cursor, …)`` (at most ``max_bytes``)."""
    start = buffer_start(job, st.capacity.get(job.job_id, OUTPUT_BUFFER_BYTES))
    truncated = cursor < start
    begin = max(cursor, start)
    s, w = peek(job, begin, max_bytes)
    state = s["state"]
    exit_code = None
    cwd: str | None = s["cwd"]
    sh = shell_summaries(rt).get(shell_id)
    shell_status = shell_status_of(sh)
    if state == "running":
        status = "running"
    elif state == "exited":
        if shell_status == "error" and sh is not None and sh["last_job_id"] == s["job_id"]:
            status, cwd = "shell_error", None  # the shell itself ended during this command
        else:
            status, exit_code = "exited", s["exit_code"]
    elif state == "cancelled" and s["exit_code"] is not None and not s["restarted"]:
        # the shell came back after the signal: bash's $?. The runtime ends a shell command
        # line as Ctrl-C does first, so a status of a signal death is reported as the death by
        # the signal that was asked for (what the original, which sends that one, reports);
        # a command that handled the signal and exited on its own keeps its status
        status, exit_code = "exited", s["exit_code"]
        if exit_code in SIGNAL_STATUS.values():
            exit_code = SIGNAL_STATUS.get(st.signalled.get(job.job_id, ""), exit_code)
    elif state == "timed_out":
        status = "timeout"
    else:
        status = "cancelled"
    out: dict[str, Any] = {
        "shell_id": shell_id,
        "exec_id": s["job_id"],
        "status": status,
        "exit_code": exit_code,
        "output": w.text,
        "buffer_start_cursor": start,
        "next_cursor": w.next_cursor,
        "truncated_before_cursor": truncated,
        "eof": s["eof"],
    }
    if status != "running":
        out["duration_ms"] = s["duration_ms"]
        out["cwd"] = os.path.realpath(cwd) if cwd else cwd
        out["shell_status"] = shell_status
        out["shell_rebuilt"] = bool(s["restarted"]) and status in ("timeout", "cancelled")
    return out
