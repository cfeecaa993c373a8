"""What a front end knows about a tool call besides its arguments."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conch.core.env import check_env
from conch.errors import ConchError

SESSION_ID = re.compile(r"^ses-[0-9]+$")


@dataclass
class CallContext:
    """meta: the request's ``_meta``; trusted: the transport may project caller context
    (stdio, in-process, or HTTP with the caller-context header matching the token);
    progress: async fn(message) the tool may call while it waits."""

    meta: Mapping[str, Any] | None = None
    trusted: bool = True
    progress: Callable[[str], Awaitable[None]] | None = None

    def shell_env(self) -> dict[str, str]:
        raw = (self.meta or {}).get("shell_env")
        if raw is None:
            return {}
        env = check_env(raw, "_meta.shell_env")
        env.pop("AI_ASSISTANT_CALLER_SESSION_ID", None)
        return env

    def caller_session_id(self) -> str:
        if not self.trusted or not self.meta:
            return ""
        assistant = self.meta.get("assistant")
        if not isinstance(assistant, Mapping):
            return ""
        sid = assistant.get("session_id")
        return sid if isinstance(sid, str) and SESSION_ID.match(sid) else ""


def check_purpose(purpose: Any) -> str | None:
    if purpose is None:
        return None
    if not isinstance(purpose, str):
        raise ConchError("invalid_argument", "purpose must be a string")
    text = purpose.strip()
    if not text or len(text) > 200:
        raise ConchError("invalid_argument", "purpose must be 1-200 characters after trimming")
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text):
        raise ConchError("invalid_argument", "purpose must not contain control characters")
    return text
