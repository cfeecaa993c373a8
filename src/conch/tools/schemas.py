"""Input and output JSON schemas of the default (`conch`) tools (SPEC §6)."""

from __future__ import annotations

from typing import Any

from conch.config import (
    ENV_NAME_PATTERN,
    MAX_OUTPUT_BYTES,
    MAX_WAIT_MS,
    NAME_PATTERN,
    SEARCH_MAX_CONTEXT,
    SEARCH_MAX_GLOBS,
    SEARCH_MAX_MATCHES,
    SEARCH_MAX_PATTERN_CHARS,
    SEARCH_MAX_TIMEOUT_MS,
    MiB,
)
from conch.core.process.keys import KEY_NAMES
from conch.core.requests import SEARCH_MODES

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
# containment (SPEC §9a): the same four arguments on exec and shell_open
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
        "shell_id": {**ID, "description": "Run `command` in this persistent shell (shell_open)."},
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
            "description": "Deadline; the whole process tree is killed. 0 = none. Default 1800000.",
        },
        "yield_ms": {
            **YIELD,
            "description": "How long to wait before returning with the job still "
            "running in the background. Default 10000.",
        },
        "max_output_bytes": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_OUTPUT_BYTES,
            "description": "Inline output budget (head + tail). Default 16384.",
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
        **FENCE,
    }
)

UNTIL = {
    "anyOf": [
        {"enum": ["change", "exit"]},
        obj({"pattern": {"type": "string", "minLength": 1, "maxLength": 4096}}, ("pattern",)),
    ],
    "description": "What to wait for: new output (`change`), the end (`exit`), or a regex.",
}

READ_INPUT = obj(
    {
        "job_id": {**ID, "description": "Job id or name."},
        "cursor": {
            "type": "integer",
            "minimum": 0,
            "description": "Byte offset to read from; default: where the last read stopped.",
        },
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_OUTPUT_BYTES,
            "description": "Most bytes of text to return. Default 16384.",
        },
        "wait_ms": {**YIELD, "description": "Wait up to this long for `until`. Default 0."},
        "until": UNTIL,
        "stream": {"enum": ["stdout", "stderr"], "description": "Only one stream (pipe jobs)."},
        "raw": {"type": "boolean", "description": "Bytes as printed (decoded, not normalized)."},
        "tail": {"type": "boolean", "description": "The last `max_bytes` instead of from cursor."},
    },
    ("job_id",),
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
        "yield_ms": {**YIELD, "description": "Wait for output to settle. Default 1000."},
        "purpose": PURPOSE,
    },
    ("job_id",),
)

SIGNAL_INPUT = obj(
    {
        "job_id": ID,
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
        "wait_ms": {**YIELD, "description": "Wait this long for the job to end. Default 2000."},
        "purpose": PURPOSE,
    },
    ("job_id",),
)

LIST_INPUT = obj({"state": {"enum": ["running", "all"]}})

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

_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_BOOL = {"type": ["boolean", "null"]}

SNAPSHOT_OUTPUT = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string"},
        "name": _NULLABLE_STR,
        "mode": {"enum": ["command", "argv", "script", "pty", "shell"]},
        "shell_id": _NULLABLE_STR,
        "state": {"enum": ["running", "exited", "timed_out", "cancelled", "output_limit", "limit"]},
        "limit": {
            "enum": ["memory_max", None],
            "default": None,
            "description": "The cgroup limit that ended the job (state `limit`).",
        },
        "exit_code": _NULLABLE_INT,
        "signal": _NULLABLE_STR,
        "ok": {"type": "boolean"},
        "started_at": {"type": "string"},
        "duration_ms": {"type": "integer"},
        "pid": _NULLABLE_INT,
        "awaiting_input": {"type": "boolean"},
        "awaiting_secret": {"type": "boolean"},
        "ready": _NULLABLE_BOOL,
        "output": {"type": "string"},
        "cursor": {"type": "integer"},
        "next_cursor": {"type": "integer"},
        "total_bytes": {"type": "integer"},
        "stdout_bytes": {"type": "integer"},
        "stderr_bytes": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "omitted_bytes": {"type": "integer"},
        "eof": {"type": "boolean"},
        "log_path": {"type": "string"},
        "cwd": _NULLABLE_STR,
        "data": {},
        "parse_error": _NULLABLE_STR,
        "lingering_pids": {"type": "array", "items": {"type": "integer"}},
        "restarted": {"type": "boolean"},
    },
    "required": [
        "job_id",
        "state",
        "exit_code",
        "ok",
        "output",
        "cursor",
        "next_cursor",
        "total_bytes",
        "eof",
    ],
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
            "ok",
            "started_at",
            "duration_ms",
            "pid",
            "total_bytes",
            "cwd",
        )
    },
}

SHELL_SUMMARY = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "name": _NULLABLE_STR,
        "shell": {"type": "string"},
        "state": {"type": "string"},
        "cwd": _NULLABLE_STR,
        "job_id": _NULLABLE_STR,
        "last_job_id": _NULLABLE_STR,
        "created_at": {"type": "string"},
    },
}

LIST_OUTPUT = {
    "type": "object",
    "properties": {
        "jobs": {"type": "array", "items": JOB_SUMMARY},
        "shells": {"type": "array", "items": SHELL_SUMMARY},
    },
    "required": ["jobs", "shells"],
}

SHELL_OPEN_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "name": _NULLABLE_STR,
        "shell": {"type": "string"},
        "version": {"type": "string"},
        "cwd": {"type": "string"},
        "state": {"type": "string"},
    },
    "required": ["shell_id", "shell", "cwd", "state"],
}

SHELL_CLOSE_OUTPUT = {
    "type": "object",
    "properties": {
        "shell_id": {"type": "string"},
        "state": {"const": "closed"},
        "cleanup_complete": {"type": "boolean"},
    },
    "required": ["shell_id", "state", "cleanup_complete"],
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
        "profiles": {"type": "array"},
        "transports": {"type": "array"},
    },
    "required": ["version", "containment", "limits"],
}

# -- search ------------------------------------------------------------------------------

SEARCH_INPUT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["pattern"],
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "maxLength": SEARCH_MAX_PATTERN_CHARS,
            "description": "Text to search for: a literal string unless regex is true.",
        },
        "path": {
            "type": "string",
            "description": (
                "File or directory to search; relative paths are resolved against the default "
                "working directory (the default)."
            ),
        },
        "regex": {
            "type": "boolean",
            "default": False,
            "description": "Treat pattern as a regular expression (Rust regex syntax).",
        },
        "ignore_case": {
            "type": "boolean",
            "default": False,
            "description": "Match case-insensitively.",
        },
        "hidden": {
            "type": "boolean",
            "default": False,
            "description": "Also search hidden files and directories (names starting with '.').",
        },
        "glob": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": SEARCH_MAX_GLOBS,
            "description": (
                "Only search files matching these globs (e.g. '*.py'); a leading '!' excludes."
            ),
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": SEARCH_MAX_CONTEXT,
            "default": 0,
            "description": "Lines of context to return before and after each match.",
        },
        "mode": {
            "type": "string",
            "enum": list(SEARCH_MODES),
            "default": "matches",
            "description": (
                "matches: matching lines; files: only the paths of matching files; "
                "count: number of matching lines per file."
            ),
        },
        "max_matches": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX_MATCHES,
            "default": 100,
            "description": (
                "Most results to return (matching lines, or files in files/count mode); "
                "truncated is true when there were more."
            ),
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX_TIMEOUT_MS,
            "default": 30000,
            "description": "Stop searching after this many milliseconds and return what was found.",
        },
    },
}

_SUBMATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["start", "end", "text"],
    "properties": {
        "start": {"type": "integer", "description": "Byte offset of the match in the line."},
        "end": {"type": "integer", "description": "Byte offset just after the match."},
        "text": {"type": "string"},
        "text_base64": {
            "type": "string",
            "description": "Raw bytes of the match, present only when they are not UTF-8.",
        },
    },
}

_MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "line", "column", "text", "submatches", "before", "after"],
    "properties": {
        "path": {"type": "string"},
        "path_base64": {
            "type": "string",
            "description": "Raw bytes of the path, present only when it is not UTF-8.",
        },
        "line": {"type": "integer", "description": "1-based line number."},
        "column": {
            "type": "integer",
            "description": "1-based byte column of the first submatch.",
        },
        "text": {"type": "string", "description": "The line, without its line ending."},
        "text_base64": {
            "type": "string",
            "description": "Raw bytes of the line, present only when they are not UTF-8.",
        },
        "submatches": {"type": "array", "items": _SUBMATCH_SCHEMA},
        "before": {"type": "array", "items": {"type": "string"}},
        "after": {"type": "array", "items": {"type": "string"}},
    },
}

SEARCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "matches", "files", "counts", "truncated", "timed_out", "elapsed_ms"],
    "properties": {
        "mode": {"type": "string", "enum": list(SEARCH_MODES)},
        "matches": {
            "type": "array",
            "items": _MATCH_SCHEMA,
            "description": "Matching lines (mode matches only).",
        },
        "files": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Files with matches, in the order rg reported them.",
        },
        "files_base64": {
            "type": "array",
            "items": {"type": ["string", "null"]},
            "description": (
                "Parallel to files: raw bytes of each path that is not UTF-8, else null. "
                "Present only when some path is not UTF-8."
            ),
        },
        "counts": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "Matching lines per file (modes matches and count).",
        },
        "truncated": {
            "type": "boolean",
            "description": "True whenever the lists are incomplete (cap, timeout, size limit).",
        },
        "timed_out": {"type": "boolean"},
        "elapsed_ms": {"type": "integer"},
        "errors": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Problems rg reported while searching (e.g. unreadable files).",
        },
    },
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
        }
    },
    "required": ["error"],
}
