"""The job snapshot: the one result shape of exec, read, write and signal (docs/spec.md §6)."""

from __future__ import annotations

from typing import Any

from conch.core.jobs.job import Job
from conch.core.jobs.outparse import PARSE_LIMIT, parse_output
from conch.core.output.log import STDOUT
from conch.core.output.window import Window
from conch.core.results import JobIdentity, JobSnapshot, JobSummary, timestamp

STREAMS = {None: None, "stdout": 0, "stderr": 1}


def parsed(job: Job) -> tuple[Any, str | None]:
    if job.output_format == "text" or not job.terminal:
        return None, None
    if job.parsed is None:
        size = job.log.size(STDOUT)
        cut = job.state == "output_limit" or size > PARSE_LIMIT
        data = None if cut else job.log.read(0, size, STDOUT)
        job.parsed = parse_output(job.output_format, data, cut=cut)
    return job.parsed


def observe(job: Job) -> None:
    """State and processes agree whenever a call looks: a leader that has died is noticed
    now, so a job is never reported running after its process is gone. Call it before the
    window is cut, so the window and the state describe the same moment."""
    if not job.terminal and job.driver is not None:
        poll = getattr(job.driver, "poll_exit", None)
        if poll is not None:
            poll()


def _identity(job: Job) -> JobIdentity:
    """What a job is and how it stands: shared by the snapshot and the `list` summary."""
    return {
        "job_id": job.job_id,
        "name": job.name,
        "mode": job.mode,
        "shell_id": job.shell_id,
        "state": job.state,
        "limit": job.limit,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "ok": job.ok,
        "started_at": timestamp(job.started_at),
        "duration_ms": job.duration_ms,
        "pid": job.pid,
    }


def snapshot(job: Job, window: Window, *, stream: str | None = None) -> JobSnapshot:
    """The job as it stood when `window` was cut (the caller called observe() first)."""
    awaiting_input = awaiting_secret = False
    if not job.terminal and job.driver is not None:
        awaiting_input, awaiting_secret = job.driver.input_state()
    total = job.log.size(STREAMS[stream])
    data, parse_error = parsed(job)
    snap: JobSnapshot = {
        **_identity(job),
        "awaiting_input": awaiting_input,
        "awaiting_secret": awaiting_secret,
        "ready": job.ready,
        "output": window.text + lost_marker(job),
        "cursor": window.cursor,
        "next_cursor": window.next_cursor,
        "total_bytes": total,
        "stdout_bytes": job.log.stream_bytes[0],
        "stderr_bytes": job.log.stream_bytes[1],
        "truncated": window.truncated,
        "omitted_bytes": window.omitted_bytes,
        "eof": job.terminal and window.next_cursor >= total and job.log.closed,
        "log_path": job.log.path,
        "cwd": job.cwd,
        "started_cwd": job.started_cwd,
        "data": data,
        "parse_error": parse_error,
        "lingering_pids": list(job.lingering_pids),
        "restarted": job.restarted,
        "lost_bytes": job.log.lost_bytes,
        "attended": job.attended,
        "human_input": job.attendance.report() if job.attendance is not None else None,
        "screen": None,
        "digest": None,
    }
    if job.changes:
        snap["changes"] = job.changes
    return snap


def lost_marker(job: Job) -> str:
    """What the output cannot show: bytes the job printed that the log could not keep."""
    log = job.log
    if log.unreadable and log.total:
        return (
            f"\n[... the log file {log.path} cannot be read ({log.unreadable}): its "
            f"{log.total} bytes are gone ...]"
        )
    if not log.lost_bytes:
        return ""
    return (
        f"\n[... {log.lost_bytes} bytes of output lost: the log could not be written: "
        f"{log.lost_reason} ...]"
    )


def summary(job: Job) -> JobSummary:
    """The short form used by `list`."""
    observe(job)
    return {**_identity(job), "total_bytes": job.log.size(), "cwd": job.cwd}
