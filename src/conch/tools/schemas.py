"""Input and output JSON schemas of the default (`conch`) tools (docs/spec.md §6)."""

from __future__ import annotations

from typing import Any

from conch.config import (
    ENV_NAME_PATTERN,
    MAX_OUTPUT_BYTES,
    MAX_WAIT_MS,
    NAME_PATTERN,
    TERMINAL_MAX_SIZE,
    TERMINAL_MIN_SIZE,
    MiB,
)
from conch.core import KEY_NAMES
from conch.tools.search_schemas import SEARCH_INPUT
from conch.tools.search_schemas import SEARCH_OUTPUT as _SEARCH_OUTPUT

__all__ = ["SEARCH_INPUT", "SEARCH_OUTPUT"]  # (with every name below: the tools' schemas)

ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
}
NAME = {
    "type": "string",
    "pattern": NAME_PATTERN,
    "description": "Your own name for it (e.g. `web`), usable wherever an id is.",
}
ENV = {
    "type": "object",
    "maxProperties": 256,
    "propertyNames": {"pattern": ENV_NAME_PATTERN},
    "additionalProperties": {"type": "string", "maxLength": 131072},
    "description": "Extra environment variables for the process.",
}
PURPOSE = {
    "type": "string",
    "maxLength": 1000,
    "description": "Why you run this (<= 200 chars); echoed in _meta.summary only.",
}
YIELD = {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS}
TERMINAL_SIZE = {"type": "integer", "minimum": TERMINAL_MIN_SIZE, "maximum": TERMINAL_MAX_SIZE}
# containment (docs/spec.md §9a): the same four arguments on exec and shell_open
FENCE = {
    "sandbox": {
        "enum": ["off", "workspace-write", "read-only"],
        "description": "Filesystem sandbox; may only tighten the server's "
        "(off < workspace-write < read-only).",
    },
    "network": {
        "enum": ["on", "off"],
        "description": "Network access; `off` only tightens the server's setting.",
    },
    "memory_max": {
        "type": "integer",
        "minimum": 1,
        "description": "Memory limit in bytes (cgroup); exceeding it ends the job "
        "with state `limit`.",
    },
    "pids_max": {
        "type": "integer",
        "minimum": 1,
        "description": "Most processes at once (cgroup); further forks fail inside the job.",
    },
}


def obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


EXEC_INPUT = obj(
    {
        "command": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4 * MiB,
            "description": "Shell command line, run by bash (`bash -c`).",
        },
        "argv": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4096,
            "items": {"type": "string", "maxLength": 131072},
            "description": "Program and arguments, executed directly: no shell, all literal.",
        },
        "script": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4 * MiB,
            "description": "Multi-line bash script; syntax-checked with `bash -n` first.",
        },
        "shell_id": {
            **ID,
            "description": "Run `command` in this persistent shell: its id, or a name; the "
            "first exec with a new name opens a shell of that name (in `cwd`).",
        },
        "stdin": {
            "type": "string",
            "maxLength": 16 * MiB,
            "description": "Exact text fed to stdin, then EOF. Absent: stdin is empty.",
        },
        "stdin_open": {"type": "boolean", "description": "Keep stdin open for `write`."},
        "pty": {
            "type": "boolean",
            "description": "Run on a pseudo-terminal (REPLs, prompts, TUIs).",
        },
        "cwd": {
            "type": "string",
            "maxLength": 4096,
            "description": "Working directory: absolute, or relative to the default cwd.",
        },
        "env": ENV,
        "timeout_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": 7 * 86400 * 1000,
            "description": "Deadline; the whole process tree is killed. 0 = none; at most "
            "604800000 (7 days). Default 1800000 (30 min).",
        },
        "yield_ms": {
            **YIELD,
            "description": "How long to wait before returning with the job still "
            "running in the background, 0-600000. Default 10000. Ends sooner (still running, "
            "not an error) before the host's own tool timeout.",
        },
        "max_output_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_OUTPUT_BYTES,
            "description": "Inline output budget (head + tail), 1-1048576. Default 16384.",
        },
        "output_format": {
            "enum": ["text", "json", "jsonl", "auto"],
            "description": "Parse stdout into `data`.",
        },
        "ready": {
            **obj(
                {
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "url": {"type": "string", "pattern": "^https?://", "maxLength": 4096},
                }
            ),
            "description": "Return as soon as the output matches `pattern`, the TCP `port` "
            "accepts or the `url` answers 2xx/3xx.",
        },
        "name": NAME,
        "purpose": PURPOSE,
        "digest": {
            "type": "boolean",
            "description": "false: no `digest` in the result. By default a finished job whose "
            "output did not fit gets one: the lines that say what went wrong, from the whole "
            "log, with their cursors.",
        },
        "changes": {
            "type": "boolean",
            "description": "false: what this job changes in the workspace is not recorded (no "
            "`changes`, no undo). By default it is, where the server tracks changes.",
        },
        **FENCE,
    }
)

_CONDITION = {
    "anyOf": [
        {"enum": ["change", "exit", "quiet", "input"]},
        obj({"pattern": {"type": "string", "minLength": 1, "maxLength": 4096}}, ("pattern",)),
    ]
}

UNTIL = {
    "anyOf": [
        *_CONDITION["anyOf"],
        {"type": "array", "minItems": 1, "maxItems": 5, "items": _CONDITION},
    ],
    "description": "What to wait for: new output (`change`, the default), the end (`exit`), "
    "no output for `quiet_ms` (`quiet`), a prompt waiting for input or a secret (`input`), "
    "a regex (`{pattern}`), or a list of these (the first that holds). Every wait also ends "
    "when the job ends.",
}

READ_INPUT = obj(
    {
        "job_id": {**ID, "description": "Job id or name (or give job_ids)."},
        "job_ids": {
            "type": "array",
            "minItems": 1,
            "maxItems": 32,
            "items": ID,
            "description": "Several jobs (1-32) instead of job_id: returns as soon as any of "
            "them meets `until`, with that job's snapshot (the first listed if none did).",
        },
        "cursor": {
            "type": "integer",
            "minimum": 0,
            "description": "Byte offset to read from; default: where the last read stopped.",
        },
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_OUTPUT_BYTES,
            "description": "Most bytes of text to return, 1-1048576. Default 16384 (less where the "
            "host would cut a larger result).",
        },
        "wait_ms": {
            **YIELD,
            "description": "Wait up to this long for `until`, 0-600000 (ends sooner, the job "
            "still running, where the host would time the call out). Default 0.",
        },
        "until": UNTIL,
        "quiet_ms": {
            "type": "integer",
            "minimum": 10,
            "maximum": 120000,
            "description": "For `until: quiet`: how long without output counts as quiet, "
            "10-120000. Default 1000.",
        },
        "stream": {"enum": ["stdout", "stderr"], "description": "Only one stream (pipe jobs)."},
        "raw": {"type": "boolean", "description": "Bytes as printed (decoded, not normalized)."},
        "tail": {"type": "boolean", "description": "The last `max_bytes` instead of from cursor."},
        "screen": {
            "type": "boolean",
            "description": "pty/shell jobs: output is the terminal's current screen (text, "
            "then the cursor position) instead of the stream; for full-screen programs.",
        },
        "digest": {
            "type": "boolean",
            "description": "true: the finished job's `digest` even when its output fits or a "
            "result already had it; false: none. Default: once, when the window leaves "
            "output out.",
        },
    },
    (),
)

WRITE_INPUT = obj(
    {
        "job_id": ID,
        "text": {"type": "string", "maxLength": 4 * MiB, "description": "Text to send."},
        "keys": {
            "type": "array",
            "maxItems": 256,
            "items": {"enum": KEY_NAMES},
            "description": "Keys to send after text, e.g. enter, ctrl-c, up, tab, esc.",
        },
        "eof": {"type": "boolean", "description": "Close stdin (pipes) / send ctrl-d (terminals)."},
        "resize": {
            **obj({"rows": TERMINAL_SIZE, "cols": TERMINAL_SIZE}, ("rows", "cols")),
            "description": "Set the terminal's size first (pty and shell jobs; the program gets "
            f"SIGWINCH), rows and cols {TERMINAL_MIN_SIZE}-{TERMINAL_MAX_SIZE}. Terminals start "
            "at 50 rows x 200 cols.",
        },
        "yield_ms": {**YIELD, "description": "Wait for output to settle, 0-600000. Default 1000."},
        "purpose": PURPOSE,
    },
    ("job_id",),
)

SIGNAL_INPUT = obj(
    {
        "job_id": {**ID, "description": "The job to signal (or give shell_id)."},
        "shell_id": {**ID, "description": "A persistent shell to close instead of a job."},
        "signal": {
            "enum": [
                "interrupt",
                "terminate",
                "kill",
                "hangup",
                "quit",
                "stop",
                "continue",
                "usr1",
                "usr2",
            ],
            "description": "Default terminate (escalates to kill after the grace period).",
        },
        "wait_ms": {
            **YIELD,
            "description": "Wait this long for the job to end, 0-600000. Default 2000.",
        },
        "purpose": PURPOSE,
    },
)

LIST_INPUT = obj(
    {
        "state": {"enum": ["running", "all"], "description": "Which jobs. Default all."},
        "info": {
            "type": "boolean",
            "description": "true: the result also carries `info`, about this server: version, "
            "platform, shells, ripgrep, containment, change tracking, limits, profiles, "
            "transports, and how long one wait may last for your host.",
        },
    }
)

SHELL_OPEN_INPUT = obj(
    {
        "cwd": {"type": "string", "maxLength": 4096},
        "env": ENV,
        "shell": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "bash or zsh (or an absolute path to one).",
        },
        "startup_command": {
            "type": "string",
            "minLength": 1,
            "maxLength": MiB,
            "description": "Run once when the shell starts (e.g. activate a venv).",
        },
        "name": NAME,
        **FENCE,
    }
)

SHELL_CLOSE_INPUT = obj({"shell_id": ID}, ("shell_id",))
INFO_INPUT = obj({})
#: a path of the workspace as `changes` names it: relative, `/`-separated
_CHANGE_PATH = {"type": "string", "minLength": 1, "maxLength": 4096}
CHANGES_INPUT = obj(
    {
        "job_id": {**ID, "description": "The job (or undo) whose changes to show or take back."},
        "undo": {
            "type": "boolean",
            "description": "true: take the job's changes back (exactly what was there before; "
            "what it added is removed). Refused with `conflict`, naming the paths, when one "
            "was changed again since; the result is the undo's own change set, whose `job_id` "
            "can be undone in turn (a redo).",
        },
        "force": {
            "type": "array",
            "maxItems": 10000,
            "items": _CHANGE_PATH,
            "description": "With undo: paths named by a `conflict` to take back anyway "
            "(what was written there since is lost).",
        },
        "cursor": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1024,
            "description": "`next_cursor` of the previous page.",
        },
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_OUTPUT_BYTES,
            "description": "Budget of the page (file list + diff), 1-1048576. Default 16384.",
        },
    },
    ("job_id",),
)

_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_BOOL = {"type": ["boolean", "null"]}
_FULL_ONLY = "Only in full results (setting result_detail: full); lean results leave it out."


def _d(schema: dict[str, Any], default: Any, description: str) -> dict[str, Any]:
    """A result field with its default: a lean result leaves the field out at that value."""
    return {**schema, "default": default, "description": description}


def _full_only(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "default": None, "description": f"{description} {_FULL_ONLY}"}


_CURSORED = {
    "type": "object",
    "properties": {"cursor": {"type": "integer"}, "text": {"type": "string"}},
    "required": ["cursor", "text"],
}
DIGEST = {
    "type": ["object", "null"],
    "properties": {
        "lines": {
            "type": "array",
            "items": _CURSORED,
            "description": "In log order: each failure (at most 50 lines, their details "
            "after them), lines marked as errors, warnings only when nothing failed, and the "
            "summary lines. `text` is the log's line at `cursor`, normalized, cut at 300 "
            "characters (then ending in …); `read {cursor}` shows it in place. Adjacent "
            "lines are one entry: their texts joined by newlines, at the first one's cursor.",
        },
        "counts": _d(
            {"type": "object", "additionalProperties": {"type": "integer"}},
            {},
            "The totals the program printed in its last summary line, in its words; absent "
            "when it printed none.",
        ),
        "counts_from": _d(_NULLABLE_INT, None, "Cursor of that summary line."),
        "summaries": _d(
            {"type": "integer"},
            1,
            "How many summary-shaped lines the log holds, when more than one (a test can "
            "print one): counts are from the last.",
        ),
        "omitted": _d(
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"enum": ["failure", "flagged", "warning"]},
                        "lines": {"type": "integer"},
                        "first": {"type": "integer"},
                        "last": {"type": "integer"},
                    },
                    "required": ["kind", "lines", "first", "last"],
                },
            },
            [],
            "Lines found but not listed, per kind, with the cursors of the first and last of them.",
        ),
        "incomplete": _d(_NULLABLE_STR, None, "Why the digest does not cover all the job printed."),
    },
    "required": ["lines"],
}
#: on any result of the default profile (tools/hosts.py, mcp/detached.py)
DETACHED = _d(
    _NULLABLE_STR,
    None,
    "Said once, on your next result: a job whose call your host stopped waiting for (its "
    "own timeout, or an interrupt it words the same) kept running in the background; which "
    "job, and how to follow it (`read`) or stop it (`signal`).",
)

SNAPSHOT_OUTPUT = {
    "type": "object",
    "description": "A job snapshot. A field left out has its default.",
    "properties": {
        "job_id": {"type": "string"},
        "name": _d(
            _NULLABLE_STR, None, "The name given at exec (said by exec's result and `list`)."
        ),
        "mode": _d(
            {"enum": ["command", "argv", "script", "pty", "shell"]},
            "command",
            "How the job runs; left out for `command`, for `shell` when shell_id is given, "
            "and in a job snapshot (the call that started the job chose it; `list` says it).",
        ),
        "shell_id": _d(
            _NULLABLE_STR,
            None,
            "The persistent shell the command ran in; in `list` (a job snapshot leaves it out: "
            "the exec named it).",
        ),
        "shell_opened": _d(
            {"type": "boolean"}, False, "This exec opened the shell it named (a new name)."
        ),
        "state": {"enum": ["running", "exited", "timed_out", "cancelled", "output_limit", "limit"]},
        "limit": {
            "enum": ["memory_max", None],
            "default": None,
            "description": "The cgroup limit that ended the job (state `limit`).",
        },
        "exit_code": _d(_NULLABLE_INT, None, "Exit status; present once the job exited."),
        "signal": _d(_NULLABLE_STR, None, "Signal that ended the job, e.g. SIGKILL."),
        "ok": _full_only(
            {"type": "boolean"}, "True exactly when state is exited and exit_code is 0."
        ),
        "started_at": _full_only({"type": "string"}, "Start time, ISO 8601."),
        "duration_ms": _full_only({"type": "integer"}, "Run time (frozen at the end)."),
        "pid": _full_only(_NULLABLE_INT, "Process id of the leader (informational)."),
        "awaiting_input": _d(
            {"type": "boolean"}, False, "The job is blocked reading input: use `write`."
        ),
        "awaiting_secret": _d(
            {"type": "boolean"}, False, "The terminal waits for a password (echo off)."
        ),
        "secret_page": _d(
            _NULLABLE_STR,
            None,
            "With --secret-prompt elicit, where no elicitation reached a person: a one-time "
            "page where your user types the awaited secret (it goes to the terminal, never to "
            "you). Give them the address and wait for the job.",
        ),
        "ready": _d(_NULLABLE_BOOL, None, "Outcome of exec's `ready` wait."),
        "output": {
            "type": "string",
            "description": "Normalized output of this window; a marker line says what was cut.",
        },
        "cursor": _d(
            {"type": "integer"},
            0,
            "Log byte offset where this window starts; said when the window left output out "
            "(a tail read starts there) and it is not 0; else left out: it is the `cursor` "
            "you gave, or where the job's last read stopped (next_cursor when empty).",
        ),
        "next_cursor": _d(
            {"type": "integer"},
            None,
            "Where the next `read` continues; present whenever eof is false.",
        ),
        "total_bytes": _d(
            {"type": "integer"},
            None,
            "Bytes in the log so far; when eof is false and it is left out, it is next_cursor "
            "(everything printed so far was read).",
        ),
        "stdout_bytes": _full_only({"type": "integer"}, "Bytes the job wrote to stdout."),
        "stderr_bytes": _full_only({"type": "integer"}, "Bytes the job wrote to stderr."),
        "truncated": _d(
            {"type": "boolean"}, False, "Some output was left out of `output` (see the marker)."
        ),
        "omitted_bytes": _d({"type": "integer"}, 0, "Bytes of the log left out of `output`."),
        "lost_bytes": _d(
            {"type": "integer"},
            0,
            "Output bytes the log could not keep (a full disk): counted, and named by a marker.",
        ),
        "eof": _d(
            {"type": "boolean"},
            True,
            "The job ended and everything was read; when false, next_cursor is present. Left "
            "out while the job runs (it is then false: `state` says it has not ended).",
        ),
        "log_path": _full_only({"type": "string"}, "The job's full log on disk."),
        "cwd": _d(
            _NULLABLE_STR,
            None,
            "Working directory: a shell job's is the shell's after the command, said only when "
            "the command changed it; a one-shot job's is left out when it is the default "
            "working directory.",
        ),
        "started_cwd": _full_only({"type": "string"}, "The directory the job started in."),
        "data": _d({}, None, "stdout parsed by output_format json/jsonl/auto."),
        "parse_error": _d(_NULLABLE_STR, None, "Why stdout did not parse as output_format."),
        "lingering_pids": _d(
            {"type": "array", "items": {"type": "integer"}},
            [],
            "Processes still running after the job's leader exited.",
        ),
        "restarted": _d(
            {"type": "boolean"}, False, "The shell had exited and was started afresh first."
        ),
        "attended": _d(
            {"type": "boolean"},
            False,
            "A person is typing into the job's terminal from the dashboard: `write` is busy "
            "until they hand back or stop typing.",
        ),
        "human_input": _d(
            {
                "type": ["object", "null"],
                "properties": {"at": {"type": "string"}, "bytes": {"type": "integer"}},
                "required": ["at", "bytes"],
            },
            None,
            "A person typed into the job's terminal since your last result for it, or ran a "
            "command in its shell since your last command there: when (ISO 8601) and how "
            "many bytes; what they typed is never shown.",
        ),
        "screen": _d(
            {"type": ["object", "null"]},
            None,
            "read {screen: true}: the terminal `output` shows: rows, cols, cursor {row, col} "
            "(0-based), alternate (a full-screen program).",
        ),
        "changes": _d(
            {
                "type": ["object", "null"],
                "properties": {
                    "added": _d({"type": "integer"}, 0, "Paths the job created."),
                    "modified": _d({"type": "integer"}, 0, "Paths it changed."),
                    "deleted": _d({"type": "integer"}, 0, "Paths it removed."),
                },
            },
            None,
            "A finished job's changes to the workspace, counted (left out when none): the "
            "list, the diff and undo are `changes {job_id}`.",
        ),
        "digest": _d(
            DIGEST,
            None,
            "A finished job's digest when its output did not fit (or on request): the lines "
            "that say what went wrong, from the whole log. No status of its own: `exit_code` "
            "says how the job ended. Beside it, a job that did not exit 0 shows only a short "
            "tail of its output after the marker (unless the call set its own window).",
        ),
        "note": _d(
            _NULLABLE_STR,
            None,
            "`still running — not an error; read to wait on`: an exec whose wait ended with "
            "the job running, or a read whose wait ended early before the host's own timeout.",
        ),
        "detached": DETACHED,
    },
    "required": ["job_id", "state", "output"],
}

JOB_SUMMARY = {
    "type": "object",
    "properties": {
        k: SNAPSHOT_OUTPUT["properties"][k]  # type: ignore[index]
        for k in (
            "job_id",
            "name",
            "mode",
            "shell_id",
            "state",
            "limit",
            "exit_code",
            "signal",
            "limit",
            "ok",
            "started_at",
            "duration_ms",
            "pid",
            "cwd",
        )
    }
    | {"total_bytes": _d({"type": "integer"}, 0, "Bytes in the job's log.")},
    "required": ["job_id", "state"],
}

SHELL_SUMMARY = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "name": _d(_NULLABLE_STR, None, "The name given at shell_open."),
        "shell": {"type": "string"},
        "state": {"type": "string"},
        "cwd": _d(_NULLABLE_STR, None, "The shell's working directory."),
        "job_id": _d(_NULLABLE_STR, None, "The job running in the shell now."),
        "last_job_id": _d(_NULLABLE_STR, None, "The last job the shell ran."),
        "created_at": _full_only({"type": "string"}, "When the shell was opened, ISO 8601."),
    },
    "required": ["shell_id", "shell", "state"],
}

_COUNT = {"type": "integer", "minimum": 0}
CHANGES_OUTPUT = {
    "type": "object",
    "description": "A job's change set (or an undo's). A field left out has its default.",
    "properties": {
        "job_id": {
            "type": "string",
            "description": "The job; after an undo, the undo's own id (undo it to redo).",
        },
        "added": _d(_COUNT, 0, "Paths the job created."),
        "modified": _d(_COUNT, 0, "Paths whose content, mode or type the job changed."),
        "deleted": _d(_COUNT, 0, "Paths the job removed."),
        "files": _d(
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "change": {"enum": ["added", "modified", "deleted", "type_changed"]},
                        "type": {"type": "string"},
                        "size": _d(_NULLABLE_INT, None, "Size after (before, if deleted)."),
                        "mode": _d(_NULLABLE_STR, None, "Permission bits, octal (`0644`)."),
                    },
                    "required": ["path", "change", "type"],
                },
            },
            [],
            "This page of changed paths (relative to the workspace).",
        ),
        "diff": _d({"type": "string"}, "", "A bounded unified diff of the text files."),
        "next_cursor": _d(_NULLABLE_STR, None, "More on the next page: `changes {cursor}`."),
        "not_covered": _d(
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "reason": {"type": "string"}},
                    "required": ["path", "reason"],
                },
            },
            [],
            "What the record does not cover, said rather than silent: files over the size "
            "cap, excluded paths, special files, writes outside the workspace.",
        ),
        "overlapping_jobs": _d(
            {"type": "array", "items": {"type": "string"}},
            [],
            "Jobs that ran at the same time in the same workspace (a path two of them changed "
            "is a conflict for undo).",
        ),
        "undo_of": _d(_NULLABLE_STR, None, "This change set is the undo of that job."),
        "undone_by": _d(_NULLABLE_STR, None, "The undo that took this job's changes back."),
        "detached": DETACHED,
    },
    "required": ["job_id"],
}

LIST_OUTPUT = {
    "type": "object",
    "properties": {
        "jobs": {"type": "array", "items": JOB_SUMMARY},
        "shells": {"type": "array", "items": SHELL_SUMMARY},
        "info": _d({"type": ["object", "null"]}, None, "With `info: true`: about this server."),
        "detached": DETACHED,
    },
    "required": ["jobs", "shells"],
}

SHELL_OPEN_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "name": _d(_NULLABLE_STR, None, "The name given at shell_open."),
        "shell": {"type": "string"},
        "version": _d(_NULLABLE_STR, None, "The shell's version."),
        "cwd": {"type": "string"},
        "state": {"type": "string"},
        "detached": DETACHED,
    },
    "required": ["shell_id", "shell", "cwd", "state"],
}

SHELL_CLOSE_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "state": {"const": "closed"},
        "cleanup_complete": _d(
            {"type": "boolean"}, True, "Every process of the shell is gone (false: some linger)."
        ),
        "detached": DETACHED,
    },
    "required": ["shell_id", "state"],
}

SIGNAL_OUTPUT = {
    "type": "object",
    "description": "The job snapshot; closing a shell: the shell's `{shell_id, state}`.",
    "anyOf": [SNAPSHOT_OUTPUT, SHELL_CLOSE_OUTPUT],
}

INFO_OUTPUT = {
    "type": "object",
    "properties": {
        "version": {"type": "string"},
        "platform": {"type": "string"},
        "shells": {"type": "array"},
        "rg": {"type": "object"},
        "containment": {"enum": ["process-group", "subreaper", "cgroup"]},
        "limits": {"type": "object"},
        "changes": {
            "type": "object",
            "description": "Whether each job's changes to the workspace are recorded, and why.",
        },
        "profiles": {"type": "array"},
        "transports": {"type": "array"},
        "host": {
            "type": "object",
            "description": "The calling host and how long one wait may last for it: "
            "`horizon_ms` (null: no limit), from `timeout_ms`, whose `source` is the "
            "host_timeout_ms `setting`, the `known host`'s default, the `default` of an "
            "unknown host, or `none` (in process).",
        },
        "detached": DETACHED,
    },
    "required": ["version", "containment", "limits"],
}

ERROR_OUTPUT = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
            },
            "required": ["code", "message", "retryable"],
        },
        "detached": DETACHED,
    },
    "required": ["error"],
}

SEARCH_OUTPUT: dict[str, Any] = {
    **_SEARCH_OUTPUT,
    "properties": {**_SEARCH_OUTPUT["properties"], "detached": DETACHED},
}
