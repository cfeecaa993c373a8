"""Input and output JSON schemas of the `search` tool (docs/spec.md §6): ripgrep's matches, files or
counts, with byte offsets and base64 for what is not UTF-8."""

from __future__ import annotations

from typing import Any

from conch.config import (
    SEARCH_MAX_CONTEXT,
    SEARCH_MAX_GLOBS,
    SEARCH_MAX_MATCHES,
    SEARCH_MAX_PATTERN_CHARS,
    SEARCH_MAX_TIMEOUT_MS,
)
from conch.core import SEARCH_MODES

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
            "description": "Treat pattern as a regular expression (Rust regex syntax). "
            "Default false.",
        },
        "ignore_case": {
            "type": "boolean",
            "default": False,
            "description": "Match case-insensitively. Default false.",
        },
        "hidden": {
            "type": "boolean",
            "default": False,
            "description": "Also search hidden files and directories (names starting with '.'). "
            "Default false.",
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
            "description": "Lines of context to return before and after each match, 0-100. "
            "Default 0.",
        },
        "mode": {
            "type": "string",
            "enum": list(SEARCH_MODES),
            "default": "matches",
            "description": (
                "matches: matching lines; files: only the paths of matching files; "
                "count: number of matching lines per file. Default matches."
            ),
        },
        "max_matches": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX_MATCHES,
            "default": 100,
            "description": (
                "Most results to return (matching lines, or files in files/count mode), "
                "1-1000; truncated is true when there were more. Default 100."
            ),
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX_TIMEOUT_MS,
            "default": 30000,
            "description": "Stop searching after this many milliseconds (1-300000) and return "
            "what was found. Default 30000.",
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
            "default": None,
            "description": "Raw bytes of the match, present only when they are not UTF-8.",
        },
    },
}

_MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "line", "column", "text", "submatches"],
    "properties": {
        "path": {"type": "string"},
        "path_base64": {
            "type": "string",
            "default": None,
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
            "default": None,
            "description": "Raw bytes of the line, present only when they are not UTF-8.",
        },
        "submatches": {"type": "array", "items": _SUBMATCH_SCHEMA},
        "before": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Context lines before the match (`context`).",
        },
        "after": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Context lines after the match (`context`).",
        },
    },
}

SEARCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "A field left out has its default.",
    "properties": {
        "mode": {"type": "string", "enum": list(SEARCH_MODES), "default": "matches"},
        "matches": {
            "type": "array",
            "items": _MATCH_SCHEMA,
            "default": [],
            "description": "Matching lines (mode matches only).",
        },
        "files": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Files with matches, in the order rg reported them (in mode "
            "matches lean results give it only when truncated: the matches name the files).",
        },
        "files_base64": {
            "type": "array",
            "items": {"type": ["string", "null"]},
            "default": None,
            "description": (
                "Parallel to files: raw bytes of each path that is not UTF-8, else null. "
                "Present only when some path is not UTF-8."
            ),
        },
        "counts": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "default": {},
            "description": "Matching lines per file (modes matches and count; in mode matches "
            "lean results give it only when truncated).",
        },
        "truncated": {
            "type": "boolean",
            "default": False,
            "description": "True whenever the lists are incomplete (cap, timeout, size limit).",
        },
        "timed_out": {"type": "boolean", "default": False},
        "elapsed_ms": {
            "type": "integer",
            "default": None,
            "description": "Search time. Only in full results (setting result_detail: full).",
        },
        "errors": {
            "type": "array",
            "default": [],
            "items": {"type": "string"},
            "description": "Problems rg reported while searching (e.g. unreadable files).",
        },
    },
}
