"""The core's surface: everything the layers above it (tools, runtime, fleet, front ends) may
use of it, and nothing else (an import-linter contract holds them to it).

- the :class:`Engine` and its request objects, each operation's arguments in the tool's own
  field names, plus the :class:`CallContext` a host adds;
- the result types (TypedDicts in docs/spec.md §6's names) and the read-only :class:`JobView`;
- the few pure helpers profiles shape their results with (UTF-8 boundaries, normalization);
- errors.

Everything else in ``conch.core`` is internal: its drivers, processes, fences and files.
"""

from conch.core.engine import Engine
from conch.core.env import CALLER_SESSION_VAR, check_env
from conch.core.jobs.label import JobLabel
from conch.core.jobs.view import JobView, LogView
from conch.core.netaddr import is_loopback
from conch.core.once import Once
from conch.core.ops import job_summary, log_window, peek
from conch.core.output.normalize import normalize
from conch.core.output.screen import ScreenSnapshot, screen_text
from conch.core.output.utf8 import boundary_at_or_after
from conch.core.output.window import Window
from conch.core.process.hygiene import kill_orphans_of_dead_servers
from conch.core.process.keys import KEY_NAMES
from conch.core.process.peer import socket_uid
from conch.core.process.procfs import is_alive as pid_alive
from conch.core.process.procfs import live_start_time
from conch.core.requests import (
    SEARCH_MODES,
    SIGNALS,
    CallContext,
    ExecRequest,
    ReadRequest,
    SearchRequest,
    ShellOpenRequest,
    SignalRequest,
    WriteRequest,
)
from conch.core.results import (
    InfoResult,
    JobSnapshot,
    JobSummary,
    ListResult,
    SearchResult,
    ShellAvailable,
    ShellClosed,
    ShellOpened,
    ShellSummary,
    parse_timestamp,
    timestamp,
)
from conch.errors import ConchError, RuntimeClosedError

__all__ = [
    "CALLER_SESSION_VAR",
    "KEY_NAMES",
    "SEARCH_MODES",
    "SIGNALS",
    "CallContext",
    "ConchError",
    "Engine",
    "ExecRequest",
    "InfoResult",
    "JobLabel",
    "JobSnapshot",
    "JobSummary",
    "JobView",
    "ListResult",
    "LogView",
    "Once",
    "ReadRequest",
    "RuntimeClosedError",
    "ScreenSnapshot",
    "SearchRequest",
    "SearchResult",
    "ShellAvailable",
    "ShellClosed",
    "ShellOpenRequest",
    "ShellOpened",
    "ShellSummary",
    "SignalRequest",
    "Window",
    "WriteRequest",
    "boundary_at_or_after",
    "check_env",
    "is_loopback",
    "job_summary",
    "kill_orphans_of_dead_servers",
    "live_start_time",
    "log_window",
    "normalize",
    "parse_timestamp",
    "peek",
    "pid_alive",
    "screen_text",
    "socket_uid",
    "timestamp",
]
