"""What a front end knows about a tool call besides its arguments."""

from __future__ import annotations

import dataclasses
import hmac
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from conch.config import Config
from conch.core import CALLER_SESSION_VAR, CallContext, JobLabel, JobView, check_env
from conch.errors import ConchError
from conch.tools.hosts import Horizon, HostFacts, horizon
from conch.tools.state import ProfileState

T = TypeVar("T")

SESSION_ID = re.compile(r"^ses-[0-9]+$")
CALLER_CONTEXT_HEADER = "x-ai-assistant-caller-context"


@dataclass
class ToolContext:
    """What a front end knows about a tool call besides its arguments. meta: the request's
    ``_meta``; trusted: the transport may project caller context (stdio, in-process, or HTTP
    with the caller-context header matching the token); progress: async fn(message) the tool
    may call while it waits; started: the job this call started (set by the engine through
    :meth:`job_started`, read by progress reporting); state: the runtime's profile state
    (``conch.Runtime.call_tool`` passes its registry's); label: what the call runs, for the
    dashboard (set by the call path)."""

    meta: Mapping[str, Any] | None = None
    trusted: bool = True
    progress: Callable[[str], Awaitable[None]] | None = None
    started: JobView | None = None
    state: ProfileState | None = None
    label: JobLabel | None = None
    on_started: Callable[[JobView], None] | None = None  # the front end's own hook
    # the MCP host calling (its timeout and where it cuts a result: tools/hosts.py); None:
    # in process or over the HTTP invoke API, where nothing times a call out
    host: HostFacts | None = None
    # after a cancellation: whether it was the host's own timeout (tools/hosts.py)
    host_gave_up: Callable[[], Awaitable[bool]] | None = None

    def engine_context(
        self, *, inherit_not: tuple[str, ...] = (), warm: bool = False
    ) -> CallContext:
        """The engine's context of this call: the caller's session and shell environment
        from ``_meta`` (as far as the transport is trusted), the job hook, the label."""
        return CallContext(
            caller_session_id=self.caller_session_id(),
            shell_env=self.shell_env(),
            inherit_not=inherit_not,
            on_start=self.job_started,
            warm=warm,
            label=self.label,
            keep_on_cancel=self.host_gave_up,
        )

    def wait_horizon(self, cfg: Config) -> Horizon:
        """How long a wait of this call may last (tools/hosts.py): the calling host's
        horizon; in process, the ``host_timeout_ms`` setting's (none without it)."""
        return horizon(self.host, cfg.host_timeout_ms)

    def within_horizon(self, wait_ms: int, cfg: Config) -> int:
        """``wait_ms``, ended before the calling host gives up on the call."""
        limit = self.wait_horizon(cfg).ms
        return wait_ms if limit is None else min(wait_ms, limit)

    def for_call(self) -> ToolContext:
        """A copy for one call: what one call learns (its job) never leaks into another."""
        return dataclasses.replace(self, started=None, label=None)

    def with_state(self, state: ProfileState) -> ToolContext:
        """This context for a call on the runtime whose profile state is ``state``."""
        return dataclasses.replace(self, state=state)

    def profile_state(self, cls: type[T]) -> T:
        """The runtime's instance of a profile's state class."""
        if self.state is None:
            raise RuntimeError(
                "profile tools are called through conch.Runtime (it owns their state)"
            )
        return self.state.get(cls)

    def job_started(self, job: JobView) -> None:
        """``on_start`` of ``Engine.exec``: remember the job this call started."""
        self.started = job
        if self.on_started is not None:
            self.on_started(job)

    def shell_env(self) -> dict[str, str]:
        raw = (self.meta or {}).get("shell_env")
        if raw is None:
            return {}
        env = check_env(raw, "_meta.shell_env")
        env.pop(CALLER_SESSION_VAR, None)
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
    hidden = sorted({f"U+{ord(c):04X}" for c in text if invisible(c)})
    if hidden:
        raise ConchError(
            "invalid_argument",
            "purpose must not contain invisible or bidi format characters ("
            + ", ".join(hidden)
            + "): a person reads it beside the command",
        )
    return text


def invisible(c: str) -> bool:
    """A character that is not seen but changes how the text around it reads: Unicode format
    characters (Cf: bidi embeddings, overrides and isolates, zero-width joiners and spaces, the
    BOM) and the line and paragraph separators."""
    return unicodedata.category(c) == "Cf" or c in "\u2028\u2029"


def caller_context_trusted(cfg: Config, headers: Mapping[str, str]) -> bool:
    """An HTTP request may project caller context only when it carries the configured
    caller-context token (constant-time compare); without a configured token, never."""
    token = cfg.caller_context_token
    given = headers.get(CALLER_CONTEXT_HEADER)
    return bool(token) and given is not None and hmac.compare_digest(given.encode(), token.encode())
