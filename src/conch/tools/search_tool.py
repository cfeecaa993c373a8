"""The ``search`` tool's description and JSON schemas (SPEC §6). Plain data; no MCP import."""

from __future__ import annotations

from typing import Any

__all__ = ["SEARCH_DESCRIPTION", "SEARCH_INPUT_SCHEMA", "SEARCH_OUTPUT_SCHEMA"]

SEARCH_DESCRIPTION = (
    "Search file contents with ripgrep and get structured results: path, 1-based line, "
    "matching text and submatches. The pattern is a literal string by default; set "
    "regex=true for a (linear-time, non-PCRE) regular expression. Like rg, it skips "
    "hidden files (unless hidden=true), binary files and anything ignored by .gitignore/.ignore. "
    "column and submatch start/end are byte offsets into the line; mode=files or mode=count "
    "list matching files or per-file counts of matching lines instead."
)

SEARCH_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["pattern"],
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "maxLength": 65536,
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
            "maxItems": 64,
            "description": (
                "Only search files matching these globs (e.g. '*.py'); a leading '!' excludes."
            ),
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "default": 0,
            "description": "Lines of context to return before and after each match.",
        },
        "mode": {
            "type": "string",
            "enum": ["matches", "files", "count"],
            "default": "matches",
            "description": (
                "matches: matching lines; files: only the paths of matching files; "
                "count: number of matching lines per file."
            ),
        },
        "max_matches": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "default": 100,
            "description": (
                "Most results to return (matching lines, or files in files/count mode); "
                "truncated is true when there were more."
            ),
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": 300000,
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

SEARCH_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A field left out has its default.",
    "properties": {
        "mode": {"type": "string", "enum": ["matches", "files", "count"], "default": "matches"},
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
            "default": None,
            "items": {"type": ["string", "null"]},
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
