"""The one semantic check of every request (docs/spec.md §6), for callers with a JSON schema in
front (the tools) and without one (the embedded API) alike. Pure: no I/O, no job state; limits come
from conch/config.py. What depends on a job (its streams, its cursor) the engine checks."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import conch.config as limits
from conch.config import Config
from conch.core.env import check_env
from conch.core.jobs.label import JobLabel
from conch.core.jobs.ready import ReadySpec, parse_ready
from conch.core.jobs.snapshot import STREAMS
from conch.core.jobs.waits import KINDS, Until
from conch.core.pattern import compile_pattern
from conch.errors import ConchError

NAME = re.compile(limits.NAME_PATTERN)
OUTPUT_FORMATS = ("text", "json", "jsonl", "auto")
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


# fields a request has beyond its tool's input schema (what profiles and the embedded API may
# also give); tests/core/test_requests.py ties the rest to the schemas
BEYOND_SCHEMA = {"beyond_schema": True}

#: the most jobs one read waits on
MAX_READ_JOBS = 32
MIN_QUIET_MS = 10


def _invalid(field: str, message: str) -> ConchError:
    return ConchError("invalid_argument", message, field=field)


def _check_budget(max_bytes: int | None) -> None:
    if max_bytes is not None and not 1 <= max_bytes <= limits.MAX_OUTPUT_BYTES:
        raise _invalid("max_bytes", f"max_bytes must be between 1 and {limits.MAX_OUTPUT_BYTES}")


def _check_digest(value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise _invalid("digest", "digest must be true or false")


def check_wait(field: str, value: int) -> int:
    if not 0 <= value <= limits.MAX_WAIT_MS:
        raise _invalid(field, f"{field} must be between 0 and {limits.MAX_WAIT_MS}")
    return value


def check_name(name: str | None) -> str | None:
    if name is not None and (not isinstance(name, str) or not NAME.match(name)):
        raise _invalid("name", "name must start with a letter and use letters, digits, . _ -")
    return name


class _Fenced:
    """A request that names containment values (docs/spec.md §9a)."""

    @property
    def fence(self) -> dict[str, Any]:
        """The containment values, as the spawn context's fence takes them."""
        return {k: getattr(self, k) for k in FENCE_FIELDS}


@dataclass(frozen=True, kw_only=True)
class ExecRequest(_Fenced):
    """An ``exec`` as its caller gives it, in the tool's own field names (docs/spec.md §3, §6): the
    embedded API and every tool build it (``ExecRequest(**args)``), ``checked`` resolves it."""

    command: str | None = None
    argv: Sequence[str] | None = None
    script: str | None = None
    shell_id: str | None = None
    stdin: str | None = None
    stdin_open: bool = False
    pty: bool = False
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    timeout_ms: int | None = None
    yield_ms: int | None = None
    max_output_bytes: int | None = None
    output_format: str = "text"
    ready: Mapping[str, Any] | None = None
    name: str | None = None
    # a finished job's digest (core/output/digest.py): None = when the window leaves output
    # out, False = never
    digest: bool | None = None
    # what the job changes under the workspace (core/changes): None = as the server's
    # `changes` setting says, False = not tracked for this call
    changes: bool | None = None
    # containment (docs/spec.md §9a): checked against the server's settings by the engine
    sandbox: str | None = None
    network: str | None = None
    memory_max: int | None = None
    pids_max: int | None = None

    def checked(self, cfg: Config, shell_env: Mapping[str, str] | None = None) -> CheckedExec:
        return _check_exec(cfg, self, shell_env)


@dataclass(frozen=True)
class CallContext:
    """What the host adds to a request, apart from the caller's arguments: the caller's
    session (``AI_ASSISTANT_CALLER_SESSION_ID``), the host's ``_meta.shell_env``, server
    variables a profile keeps from one-shot jobs, a hook called as soon as the job exists
    (progress, tasks), whether a plain command may run in a process started ahead, and what
    the dashboard shows of the call."""

    caller_session_id: str = ""
    shell_env: Mapping[str, str] = field(default_factory=dict)
    inherit_not: tuple[str, ...] = ()
    on_start: Callable[[Any], None] | None = None  # fn(JobView)
    warm: bool = False
    label: JobLabel | None = None
    # when the caller gives up on an exec: whether that was the host's own timeout (the job
    # then keeps running, for a later read); None or False: the job is stopped (cancelled)
    keep_on_cancel: Callable[[], Awaitable[bool]] | None = None


@dataclass(frozen=True)
class CheckedExec:
    """An ExecRequest resolved against the config: defaults filled, values checked."""

    request: ExecRequest
    argv: list[str] | None
    env: dict[str, str]
    shell_env: dict[str, str]
    timeout_ms: int
    yield_ms: int
    budget: int
    ready: ReadySpec | None


FENCE_FIELDS = ("sandbox", "network", "memory_max", "pids_max")


def _check_exec(cfg: Config, req: ExecRequest, shell_env: Mapping[str, str] | None) -> CheckedExec:
    command, argv, script = req.command, req.argv, req.script
    if sum(v is not None for v in (command, argv, script)) != 1:
        raise _invalid("command", "give exactly one of command, argv or script")
    yield_ms = check_wait(
        "yield_ms", cfg.default_yield_ms if req.yield_ms is None else req.yield_ms
    )
    timeout_ms = cfg.default_timeout_ms if req.timeout_ms is None else req.timeout_ms
    budget = cfg.default_max_output_bytes if req.max_output_bytes is None else req.max_output_bytes
    if timeout_ms < 0:
        raise _invalid("timeout_ms", "timeout_ms must be >= 0 (0 = no deadline)")
    if not 0 <= budget <= limits.MAX_OUTPUT_BYTES:
        raise _invalid(
            "max_output_bytes", f"max_output_bytes must be between 0 and {limits.MAX_OUTPUT_BYTES}"
        )
    if req.output_format not in OUTPUT_FORMATS:
        raise _invalid("output_format", "output_format must be text, json, jsonl or auto")
    checked_env = check_env(req.env)
    checked_shell_env = check_env(shell_env, "_meta.shell_env")
    ready_spec = parse_ready(req.ready)
    _check_digest(req.digest)
    if req.changes is not None and not isinstance(req.changes, bool):
        raise _invalid("changes", "changes must be true or false")
    if req.shell_id is not None:
        given = [k for k in FENCE_FIELDS if getattr(req, k) is not None]
        if given:
            raise _invalid(
                given[0], f"{', '.join(given)} apply to the whole shell: give them to shell_open"
            )
        if command is None:
            raise _invalid("command", "a shell runs `command` (not argv or script)")
        if req.stdin is not None or req.stdin_open or req.pty:
            raise _invalid(
                "stdin", "stdin, stdin_open and pty do not apply to shell jobs; use write"
            )
    return CheckedExec(
        request=req,
        argv=list(argv) if argv is not None else None,
        env=checked_env,
        shell_env=checked_shell_env,
        timeout_ms=timeout_ms,
        yield_ms=yield_ms,
        budget=budget,
        ready=ready_spec,
    )


@dataclass(frozen=True)
class ReadRequest:
    """A ``read`` (docs/spec.md §6): a window of a job's output, after an optional wait. ``job_ids``
    instead of ``job_id``: wait on several jobs, the window is of the first that meets
    ``until``."""

    job_id: str | None = None
    _: KW_ONLY
    job_ids: Sequence[str] | None = None
    cursor: int | None = None
    max_bytes: int | None = None
    wait_ms: int = 0
    until: str | Mapping[str, str] | Sequence[str | Mapping[str, str]] = "change"
    quiet_ms: int = 1000
    stream: str | None = None
    raw: bool = False
    tail: bool = False
    screen: bool = False  # a terminal job's current screen instead of its stream
    # a finished job's digest: None = when the window leaves output out (once per job),
    # True = always (even when the output fits), False = never
    digest: bool | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        """The jobs the read is about, in the order given."""
        return (self.job_id,) if self.job_id is not None else tuple(self.job_ids or ())

    def checked(self, cfg: Config) -> CheckedRead:
        if (self.job_id is None) == (self.job_ids is None):
            raise _invalid("job_id", "give job_id or job_ids (one of them)")
        if self.job_ids is not None:
            if not 1 <= len(self.job_ids) <= MAX_READ_JOBS:
                raise _invalid("job_ids", f"job_ids takes 1 to {MAX_READ_JOBS} job ids")
            if len(set(self.job_ids)) != len(self.job_ids):
                raise _invalid("job_ids", "job_ids names a job twice")
            if self.cursor is not None:
                raise _invalid("cursor", "cursor is one job's offset: not with job_ids")
        budget = cfg.default_max_output_bytes if self.max_bytes is None else self.max_bytes
        if not 1 <= budget <= limits.MAX_OUTPUT_BYTES:
            raise _invalid(
                "max_bytes", f"max_bytes must be between 1 and {limits.MAX_OUTPUT_BYTES}"
            )
        check_wait("wait_ms", self.wait_ms)
        if isinstance(self.quiet_ms, bool) or not isinstance(self.quiet_ms, int):
            raise _invalid("quiet_ms", "quiet_ms must be an integer")
        if not MIN_QUIET_MS <= self.quiet_ms <= limits.MAX_WAIT_MS:
            raise _invalid(
                "quiet_ms", f"quiet_ms must be between {MIN_QUIET_MS} and {limits.MAX_WAIT_MS}"
            )
        if self.stream not in STREAMS:
            raise _invalid("stream", "stream must be stdout or stderr")
        if self.screen and (self.stream is not None or self.tail or self.raw):
            raise _invalid(
                "screen", "screen is the terminal as it looks: not with stream, tail, raw"
            )
        if self.cursor is not None and (not isinstance(self.cursor, int) or self.cursor < 0):
            raise _invalid("cursor", "cursor must be a non-negative integer")
        _check_digest(self.digest)
        return CheckedRead(self, budget, self._until())

    def _until(self) -> Until:
        given = self.until
        items = [given] if isinstance(given, (str, Mapping)) else list(given)
        if not items:
            raise _invalid("until", "until lists no condition")
        kinds: set[str] = set()
        pattern = None
        for item in items:
            if isinstance(item, Mapping):
                if pattern is not None:
                    raise _invalid("until", "until takes one pattern (join them with |)")
                pattern = compile_pattern(item.get("pattern", ""), "until.pattern")
            elif item in KINDS:
                kinds.add(item)
            else:
                raise _invalid("until", f"until must be {', '.join(KINDS)} or {{pattern}}")
        return Until(frozenset(kinds), pattern, self.quiet_ms / 1000)


@dataclass(frozen=True)
class CheckedRead:
    request: ReadRequest
    budget: int
    until: Until


@dataclass(frozen=True)
class WriteRequest:
    """A ``write``: text and/or named keys to a job's stdin or terminal, or EOF; ``resize``
    (``{"rows", "cols"}``) first sets a terminal job's size (docs/spec.md §8)."""

    job_id: str
    _: KW_ONLY
    text: str | None = None
    keys: Sequence[str] | None = None
    eof: bool = False
    resize: Mapping[str, int] | None = None
    yield_ms: int = 1000
    # the most bytes of output the result shows (default: the configured inline budget); a
    # profile lowers it below where its host cuts a result
    max_bytes: int | None = field(default=None, metadata=BEYOND_SCHEMA)

    def checked(self) -> WriteRequest:
        check_wait("yield_ms", self.yield_ms)
        _check_budget(self.max_bytes)
        if self.resize is not None:
            terminal_size(self.resize)
        elif self.text is None and not self.keys and not self.eof:
            raise _invalid("text", "give text, keys, eof or resize")
        return self

    @property
    def size(self) -> tuple[int, int] | None:
        """``resize`` as (rows, columns), checked; None without one."""
        return None if self.resize is None else terminal_size(self.resize)


def terminal_size(value: object) -> tuple[int, int]:
    """A terminal size ``{"rows": R, "cols": C}`` as (rows, columns), each within the limits."""
    lo, hi = limits.TERMINAL_MIN_SIZE, limits.TERMINAL_MAX_SIZE
    if not isinstance(value, Mapping) or set(value) != {"rows", "cols"}:
        raise _invalid("resize", 'resize must be {"rows": R, "cols": C}')
    rows, cols = value["rows"], value["cols"]
    for name, n in (("rows", rows), ("cols", cols)):
        if isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi:
            raise _invalid("resize", f"resize.{name} must be an integer from {lo} to {hi}")
    return rows, cols


@dataclass(frozen=True)
class SignalRequest:
    """A ``signal``: a named signal to a job's process tree."""

    job_id: str
    signal: str = "terminate"
    _: KW_ONLY
    wait_ms: int = 2000
    # as WriteRequest.max_bytes
    max_bytes: int | None = field(default=None, metadata=BEYOND_SCHEMA)

    def checked(self) -> str:
        """The signal's SIG name."""
        if self.signal not in SIGNALS:
            raise _invalid("signal", f"signal must be one of {', '.join(SIGNALS)}")
        check_wait("wait_ms", self.wait_ms)
        _check_budget(self.max_bytes)
        return SIGNALS[self.signal]


@dataclass(frozen=True, kw_only=True)
class ShellOpenRequest(_Fenced):
    """A ``shell_open`` (docs/spec.md §4). ``echo=False``: its terminal does not echo what ``write``
    sends; ``size``: the terminal's (rows, columns), default 50 × 200."""

    cwd: str | None = None
    env: Mapping[str, str] | None = None
    shell: str | None = None
    startup_command: str | None = None
    name: str | None = None
    sandbox: str | None = None
    network: str | None = None
    memory_max: int | None = None
    pids_max: int | None = None
    echo: bool = field(default=True, metadata=BEYOND_SCHEMA)
    size: tuple[int, int] | None = field(default=None, metadata=BEYOND_SCHEMA)

    def checked(self) -> dict[str, str]:
        """The checked environment (the other values are checked in place)."""
        checked_env = check_env(self.env)
        check_name(self.name)
        if self.startup_command is not None and (
            not isinstance(self.startup_command, str) or "\x00" in self.startup_command
        ):
            raise _invalid("startup_command", "startup_command must be a string without NUL")
        size = self.size
        if size is not None and not (
            isinstance(size, tuple)
            and len(size) == 2
            and all(isinstance(n, int) and 1 <= n <= 10000 for n in size)
        ):
            raise ConchError("invalid_argument", "size must be (rows, columns), each 1..10000")
        return checked_env


def list_request(state: str) -> str:
    if state not in LIST_STATES:
        raise _invalid("state", "state must be running or all")
    return state


@dataclass(frozen=True)
class SearchRequest:
    """A ``search`` (ripgrep, docs/spec.md §6), checked by ``checked`` (types too: the embedded API
    has no schema in front)."""

    pattern: str
    _: KW_ONLY
    path: str | None = None  # None: the default cwd
    regex: bool = False
    ignore_case: bool = False
    hidden: bool = False
    glob: Sequence[str] | None = None
    context: int = 0
    mode: str = "matches"
    max_matches: int = 100
    timeout_ms: int = 30000

    def checked(self) -> SearchRequest:
        """This request with its values checked and ``glob`` a tuple."""
        _text("pattern", self.pattern, "pattern")
        if len(self.pattern) > limits.SEARCH_MAX_PATTERN_CHARS:
            raise _invalid(
                "pattern", f"pattern must be at most {limits.SEARCH_MAX_PATTERN_CHARS} characters"
            )
        if self.path is not None:
            _text("path", self.path, "path")
        globs: tuple[str, ...] = ()
        if self.glob is not None:
            if not isinstance(self.glob, list | tuple):
                raise _invalid("glob", "glob must be a list of strings")
            if len(self.glob) > limits.SEARCH_MAX_GLOBS:
                raise _invalid("glob", f"glob must have at most {limits.SEARCH_MAX_GLOBS} entries")
            globs = tuple(_text("glob", g, "glob entries") for g in self.glob)
        if self.mode not in SEARCH_MODES:
            raise _invalid("mode", f"mode must be one of: {', '.join(SEARCH_MODES)}")
        _flag("regex", self.regex)
        _flag("ignore_case", self.ignore_case)
        _flag("hidden", self.hidden)
        _int_in("context", self.context, 0, limits.SEARCH_MAX_CONTEXT)
        _int_in("max_matches", self.max_matches, 1, limits.SEARCH_MAX_MATCHES)
        _int_in("timeout_ms", self.timeout_ms, 1, limits.SEARCH_MAX_TIMEOUT_MS)
        return dataclasses.replace(self, glob=globs)


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
