"""How a tfbash call answers when it does not succeed, and its text block: the rejection the
handlers raise (the original's codes, messages and ``retryable``), its ``{"error": {...}}``
envelope, the profile's shaping of Conch's own errors, ``isError`` and the compact-JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from conch.errors import ConchError
from conch.tools.profiles._common import ProfileError

FAILED_TEXT = "The tool failed unexpectedly."

RETRYABLE = {"shell_busy": True, "resource_limit": True}
MESSAGES = {
    "invalid_argument": "The request is invalid.",
    "shell_not_found": "The shell was not found.",
    "shell_busy": "The shell is busy.",
    "shell_closing": "The shell is closing.",
    "shell_unavailable": "The shell is temporarily unavailable.",
    "exec_not_found": "The execution was not found.",
    "exec_not_active": "The execution is not active.",
    "invalid_cursor": "The output cursor is invalid.",
    "resource_limit": "A configured resource limit was reached.",
    "shell_start_failed": "The shell failed to start.",
    "unsupported_shell": "The shell is unsupported.",
}


class Reject(ProfileError):
    """The operation was rejected: becomes ``{"error": {...}}`` with isError."""

    def __init__(
        self,
        code: str,
        message: str | None = None,
        retryable: bool | None = None,
        *,
        ids: bool = True,
    ):
        super().__init__(code, message or MESSAGES[code])
        self.retryable = RETRYABLE.get(code, False) if retryable is None else retryable
        self.ids = ids  # echo the request's shell_id/exec_id (validation errors do not)


def envelope(e: Reject, args: Mapping[str, Any]) -> dict[str, Any]:
    err: dict[str, Any] = {"code": e.code, "message": e.message, "retryable": e.retryable}
    if e.ids:
        for key in ("shell_id", "exec_id"):  # echoed only when given (and so valid)
            v = args.get(key)
            if isinstance(v, str) and v:
                err[key] = v
    return {"error": err}


def error_result(e: ConchError, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if e.code == "invalid_argument":  # the arguments failed validation: no ids echoed
        return envelope(Reject("invalid_argument", e.message, ids=False), args), True
    if e.code == "closed":
        return envelope(Reject("shell_closing"), args), True
    return {}, True  # the original's "The tool failed unexpectedly." (see render_text)


def result_is_error(result: dict[str, Any]) -> bool:
    return "error" in result


def render_text(result: dict[str, Any], is_error: bool) -> str:
    """The original's text block: the structured result as compact JSON."""
    if is_error and not result:
        return FAILED_TEXT
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))
