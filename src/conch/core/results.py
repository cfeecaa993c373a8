"""The results that cross layers, with the spec's field names (docs/spec.md §6): what the engine
returns and the tool layer, the front ends and embedders read."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypedDict


def timestamp(when: datetime) -> str:
    """A time as results carry it: ISO 8601, UTC, milliseconds (``2026-01-02T03:04:05.678Z``)."""
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(text: str) -> datetime:
    """The time a :func:`timestamp` names."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class JobIdentity(TypedDict):
    """What a job is and how it stands: shared by the snapshot and the ``list`` summary."""

    job_id: str
    name: str | None
    mode: str
    shell_id: str | None
    state: str
    limit: str | None  # the cgroup limit that ended the job (state "limit")
    exit_code: int | None
    signal: str | None
    ok: bool
    started_at: str
    duration_ms: int
    pid: int | None


class JobSummary(JobIdentity):
    """A job as ``list`` shows it."""

    total_bytes: int
    cwd: str


class HumanInput(TypedDict):
    """A person typed into the job's terminal from the dashboard (docs/spec.md §8): when they last
    typed, and how many bytes since the agent's last result for the job; never what."""

    at: str
    bytes: int


class ScreenInfo(TypedDict):
    """The terminal a ``read {screen: true}`` result's ``output`` shows."""

    rows: int
    cols: int
    cursor: dict[str, Any]  # {"row", "col"}: 0-based; "visible"
    alternate: bool  # the program is on the alternate (full-screen) screen


class _JobChanges(TypedDict, total=False):
    # a finished job's changes under the workspace (core/changes): present when any is non-zero
    changes: dict[str, int]


class JobSnapshot(JobIdentity, _JobChanges):
    """The result of ``exec``, ``read``, ``write`` and ``signal``."""

    awaiting_input: bool
    awaiting_secret: bool
    ready: bool | None
    output: str
    cursor: int
    next_cursor: int
    total_bytes: int
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    omitted_bytes: int
    lost_bytes: int
    eof: bool
    log_path: str
    cwd: str
    started_cwd: str  # where it started (a shell job's cwd is the shell's after it)
    data: Any  # the parsed JSON / JSONL output (any JSON value)
    parse_error: str | None
    lingering_pids: list[int]
    restarted: bool
    attended: bool  # a person is typing into the job's terminal (the agent's write is busy)
    human_input: HumanInput | None
    screen: ScreenInfo | None  # read {screen: true}: output is this screen, not the stream
    digest: Any  # a finished job's digest (core/output/digest.py's Digest), or None


class ShellSummary(TypedDict):
    """A shell as ``list`` shows it."""

    shell_id: str
    name: str | None
    shell: str
    state: str
    cwd: str
    job_id: str | None  # the command it runs now
    last_job_id: str | None  # the latest command it was given (running or not)
    created_at: str  # ISO 8601, when it was opened (a restart keeps it)


class ShellOpened(TypedDict):
    shell_id: str
    name: str | None
    shell: str
    version: str
    cwd: str
    state: str


class ShellClosed(TypedDict):
    shell_id: str
    state: str
    cleanup_complete: bool


class ShellAvailable(TypedDict):
    name: str
    path: str
    version: str
    version_line: str  # the first line of `--version` (tfbash reports it)


class ListResult(TypedDict):
    jobs: list[JobSummary]
    shells: list[ShellSummary]


class RgSummary(TypedDict):
    path: str | None
    version: str | None


class Limits(TypedDict):
    max_running: int
    max_jobs: int
    retention_s: int
    max_log_bytes: int
    kill_grace_ms: int
    max_shells: int
    close_timeout_ms: int
    default_yield_ms: int
    default_timeout_ms: int
    default_max_output_bytes: int


class InfoResult(TypedDict):
    """The engine's part of ``info`` (the runtime adds profiles and transports)."""

    version: str
    python: str
    platform: str
    machine: str
    pid: int
    default_cwd: str
    data_dir: str
    bash: str | None
    shells: list[ShellAvailable]
    rg: RgSummary
    containment: str
    cgroup: dict[str, Any]  # the cgroup level: layout, limits available (docs/spec.md §9a)
    sandbox: dict[str, Any]  # the server's sandbox and network settings, the backend
    limits: Limits
    running_jobs: int
    retained_jobs: int
    changes: dict[str, Any]  # change tracking: {state: on|off|building, reason, workspace, ...}


class _SearchResult(TypedDict):
    mode: str
    matches: list[dict[str, Any]]  # {path, line, column, text, submatches, before, after}
    files: list[str]
    counts: dict[str, int]
    truncated: bool
    timed_out: bool
    elapsed_ms: int


class SearchResult(_SearchResult, total=False):
    """The result of ``search``; ``files_base64`` and ``errors`` only when there are any."""

    files_base64: list[str | None]
    errors: list[str]
