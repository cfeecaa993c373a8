"""The one semantic check of every request (SPEC §6), for callers with a JSON schema in front
(the tools) and without one (the embedded API) alike. Pure: no I/O, no job state; limits come
from conch/config.py. What depends on a job (its streams, its cursor) the engine checks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conch.config import (
    MAX_OUTPUT_BYTES,
    MAX_WAIT_MS,
    NAME_PATTERN,
    SEARCH_MAX_CONTEXT,
    SEARCH_MAX_GLOBS,
    SEARCH_MAX_MATCHES,
    SEARCH_MAX_PATTERN_CHARS,
    SEARCH_MAX_TIMEOUT_MS,
    Config,
)
from conch.core.env import check_env
from conch.core.jobs.ready import ReadySpec, parse_ready
from conch.core.jobs.snapshot import STREAMS
from conch.core.pattern import Pattern, compile_pattern
from conch.errors import ConchError

NAME = re.compile(NAME_PATTERN)
OUTPUT_FORMATS = ("text", "json", "jsonl", "auto")
UNTIL = ("change", "exit")
LIST_STATES = ("all", "running")
SEARCH_MODES = ("matches", "files", "count")
SIGNALS = {
    "interrupt": "SIGINT",
    "terminate": "SIGTERM",
    "kill": "SIGKILL",
    "hangup": "SIGHUP",
    "quit": "SIGQUIT",
    "stop": "SIGSTOP",
    "continue": "SIGCONT",
    "usr1": "SIGUSR1",
    "usr2": "SIGUSR2",
}


def _invalid(field: str, message: str) -> ConchError:
    return ConchError("invalid_argument", message, field=field)


def check_wait(field: str, value: int) -> int:
    if not 0 <= value <= MAX_WAIT_MS:
        raise _invalid(field, f"{field} must be between 0 and {MAX_WAIT_MS}")
    return value


def check_name(name: str | None) -> str | None:
    if name is not None and (not isinstance(name, str) or not NAME.match(name)):
        raise _invalid("name", "name must start with a letter and use letters, digits, . _ -")
    return name


@dataclass(frozen=True)
class ExecRequest:
    command: str | None
    argv: list[str] | None
    script: str | None
    shell_id: str | None
    stdin: str | None
    stdin_open: bool
    pty: bool
    cwd: str | None
    env: dict[str, str]
    shell_env: dict[str, str]
    timeout_ms: int
    yield_ms: int
    budget: int
    output_format: str
    ready: ReadySpec | None
    name: str | None
    # containment (SPEC §9a): checked against the server's settings by the engine
    sandbox: str | None = None
    network: str | None = None
    memory_max: int | None = None
    pids_max: int | None = None


FENCE_FIELDS = ("sandbox", "network", "memory_max", "pids_max")


def exec_request(
    cfg: Config,
    *,
    command: str | None,
    argv: list[str] | None,
    script: str | None,
    shell_id: str | None,
    stdin: str | None,
    stdin_open: bool,
    pty: bool,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout_ms: int | None,
    yield_ms: int | None,
    max_output_bytes: int | None,
    output_format: str,
    ready: Mapping[str, Any] | None,
    name: str | None,
    shell_env: Mapping[str, str] | None,
    sandbox: str | None = None,
    network: str | None = None,
    memory_max: int | None = None,
    pids_max: int | None = None,
) -> ExecRequest:
    if sum(v is not None for v in (command, argv, script)) != 1:
        raise _invalid("command", "give exactly one of command, argv or script")
    yield_ms = check_wait("yield_ms", cfg.default_yield_ms if yield_ms is None else yield_ms)
    timeout_ms = cfg.default_timeout_ms if timeout_ms is None else timeout_ms
    budget = cfg.default_max_output_bytes if max_output_bytes is None else max_output_bytes
    if timeout_ms < 0:
        raise _invalid("timeout_ms", "timeout_ms must be >= 0 (0 = no deadline)")
    if not 0 <= budget <= MAX_OUTPUT_BYTES:
        raise _invalid(
            "max_output_bytes", f"max_output_bytes must be between 0 and {MAX_OUTPUT_BYTES}"
        )
    if output_format not in OUTPUT_FORMATS:
        raise _invalid("output_format", "output_format must be text, json, jsonl or auto")
    checked_env = check_env(env)
    checked_shell_env = check_env(shell_env, "_meta.shell_env")
    ready_spec = parse_ready(ready)
    fence = {"sandbox": sandbox, "network": network, "memory_max": memory_max, "pids_max": pids_max}
    if shell_id is not None:
        given = [k for k in FENCE_FIELDS if fence[k] is not None]
        if given:
            raise _invalid(
                given[0], f"{', '.join(given)} apply to the whole shell: give them to shell_open"
            )
        if command is None:
            raise _invalid("command", "a shell runs `command` (not argv or script)")
        if stdin is not None or stdin_open or pty:
            raise _invalid(
                "stdin", "stdin, stdin_open and pty do not apply to shell jobs; use write"
            )
    return ExecRequest(
        command, argv, script, shell_id, stdin, stdin_open, pty, cwd,
        checked_env, checked_shell_env, timeout_ms, yield_ms, budget, output_format,
        ready_spec, name, sandbox, network, memory_max, pids_max,
    )  # fmt: skip


@dataclass(frozen=True)
class ReadRequest:
    budget: int
    wait_ms: int
    stream: str | None
    cursor: int | None
    until: str  # change | exit | pattern
    pattern: Pattern | None


def read_request(
    cfg: Config,
    *,
    cursor: int | None,
    max_bytes: int | None,
    wait_ms: int,
    until: str | Mapping[str, str],
    stream: str | None,
) -> ReadRequest:
    budget = cfg.default_max_output_bytes if max_bytes is None else max_bytes
    if not 1 <= budget <= MAX_OUTPUT_BYTES:
        raise _invalid("max_bytes", f"max_bytes must be between 1 and {MAX_OUTPUT_BYTES}")
    check_wait("wait_ms", wait_ms)
    if stream not in STREAMS:
        raise _invalid("stream", "stream must be stdout or stderr")
    if cursor is not None and (not isinstance(cursor, int) or cursor < 0):
        raise _invalid("cursor", "cursor must be a non-negative integer")
    pattern = None
    if isinstance(until, Mapping):
        pattern = compile_pattern(until.get("pattern", ""), "until.pattern")
        mode = "pattern"
    elif until in UNTIL:
        mode = until
    else:
        raise _invalid("until", "until must be change, exit or {pattern}")
    return ReadRequest(budget, wait_ms, stream, cursor, mode, pattern)


def write_request(
    *, text: str | None, keys: list[str] | None, eof: bool, yield_ms: int
) -> tuple[str | None, list[str], bool, int]:
    check_wait("yield_ms", yield_ms)
    if text is None and not keys and not eof:
        raise _invalid("text", "give text, keys or eof")
    return text, list(keys or []), eof, yield_ms


def signal_request(signal: str, wait_ms: int) -> tuple[str, int]:
    """(the signal's SIG name, wait_ms)."""
    if signal not in SIGNALS:
        raise _invalid("signal", f"signal must be one of {', '.join(SIGNALS)}")
    return SIGNALS[signal], check_wait("wait_ms", wait_ms)


def shell_open_request(
    env: Mapping[str, str] | None, name: str | None, startup_command: str | None
) -> tuple[dict[str, str], str | None, str | None]:
    """(env, name, startup_command) of a ``shell_open``, checked."""
    checked_env = check_env(env)
    check_name(name)
    if startup_command is not None and (
        not isinstance(startup_command, str) or "\x00" in startup_command
    ):
        raise _invalid("startup_command", "startup_command must be a string without NUL")
    return checked_env, name, startup_command


def list_request(state: str) -> str:
    if state not in LIST_STATES:
        raise _invalid("state", "state must be running or all")
    return state


@dataclass(frozen=True)
class SearchRequest:
    pattern: str
    path: str | None  # None: the default cwd
    regex: bool
    ignore_case: bool
    hidden: bool
    glob: tuple[str, ...]
    context: int
    mode: str
    max_matches: int
    timeout_ms: int


def _text(field: str, value: object, what: str) -> str:
    """A non-empty string without NUL (``what`` names it in the message)."""
    if not isinstance(value, str):
        raise _invalid(field, f"{what} must be a string")
    if value == "":
        raise _invalid(field, f"{what} must not be empty")
    if "\0" in value:
        raise _invalid(field, f"{what} must not contain NUL")
    return value


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(field, f"{field} must be a boolean")
    return value


def _int_in(field: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(field, f"{field} must be an integer")
    if not lo <= value <= hi:
        raise _invalid(field, f"{field} must be between {lo} and {hi}")
    return value


def search_request(
    *,
    pattern: str,
    path: str | None,
    regex: bool,
    ignore_case: bool,
    hidden: bool,
    glob: list[str] | None,
    context: int,
    mode: str,
    max_matches: int,
    timeout_ms: int,
) -> SearchRequest:
    """A ``search``'s arguments, checked (types too: the embedded API has no schema)."""
    _text("pattern", pattern, "pattern")
    if len(pattern) > SEARCH_MAX_PATTERN_CHARS:
        raise _invalid("pattern", f"pattern must be at most {SEARCH_MAX_PATTERN_CHARS} characters")
    if path is not None:
        _text("path", path, "path")
    globs: tuple[str, ...] = ()
    if glob is not None:
        if not isinstance(glob, list):
            raise _invalid("glob", "glob must be a list of strings")
        if len(glob) > SEARCH_MAX_GLOBS:
            raise _invalid("glob", f"glob must have at most {SEARCH_MAX_GLOBS} entries")
        globs = tuple(_text("glob", g, "glob entries") for g in glob)
    if mode not in SEARCH_MODES:
        raise _invalid("mode", f"mode must be one of: {', '.join(SEARCH_MODES)}")
    return SearchRequest(
        pattern, path, _flag("regex", regex), _flag("ignore_case", ignore_case),
        _flag("hidden", hidden), globs, _int_in("context", context, 0, SEARCH_MAX_CONTEXT),
        mode, _int_in("max_matches", max_matches, 1, SEARCH_MAX_MATCHES),
        _int_in("timeout_ms", timeout_ms, 1, SEARCH_MAX_TIMEOUT_MS),
    )  # fmt: skip
