"""The environment a job's processes get (docs/spec.md §2 "Environment")."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from conch.config import ENV_NAME_PATTERN
from conch.errors import ConchError

ENV_NAME = re.compile(ENV_NAME_PATTERN)
CALLER_SESSION_VAR = "AI_ASSISTANT_CALLER_SESSION_ID"
# never inherited: they change how bash starts, or they are Conch's own secrets
_DROPPED = (
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "CONCH_AUTH_TOKEN",
    "CONCH_CALLER_CONTEXT_TOKEN",
)


def check_env(env: Mapping[str, object] | None, what: str = "env") -> dict[str, str]:
    """Validate names and values of an environment mapping given by a caller."""
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise ConchError("invalid_argument", f"{what} must be an object of strings", field=what)
    out: dict[str, str] = {}
    for k, v in env.items():
        if not isinstance(k, str) or not ENV_NAME.match(k):
            raise ConchError(
                "invalid_argument", f"{what}: invalid variable name {k!r}", field=what, value=k
            )
        if not isinstance(v, str) or "\x00" in v:
            raise ConchError(
                "invalid_argument",
                f"{what}: value of {k} must be a string without NUL",
                field=what,
                value=k,
            )
        out[k] = v
    return out


_cache: tuple[dict[bytes, bytes], tuple[str, ...], dict[str, str]] | None = None


def _filtered(env: dict[str, str], secrets: tuple[str, ...]) -> dict[str, str]:
    for k in _DROPPED:
        env.pop(k, None)
    if secrets:
        for k, v in list(env.items()):
            if v and v in secrets:
                del env[k]
    return env


def _inherited(secrets: tuple[str, ...]) -> dict[str, str]:
    """A copy of the server's environment, minus what children must not inherit.

    Decoding os.environ costs more than the rest of a spawn's bookkeeping, so the filtered copy
    is kept and reused for as long as the process environment is unchanged.
    """
    global _cache
    raw = getattr(os.environ, "_data", None)
    if raw is None:
        return _filtered(dict(os.environ), secrets)
    if _cache is not None and _cache[1] == secrets and _cache[0] == raw:
        return dict(_cache[2])
    base = _filtered(dict(os.environ), secrets)
    _cache = (dict(raw), secrets, base)
    return dict(base)


def build_env(
    *,
    base: Mapping[str, str] | None = None,
    agent_env: bool,
    pty: bool,
    secrets: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    shell_env: Mapping[str, str] | None = None,
    caller_session_id: str = "",
    tag: tuple[str, str] | None = None,
    inherit_not: tuple[str, ...] = (),
    pwd: str | None = None,
) -> dict[str, str]:
    """``inherit_not``: more server variables the child must not inherit (a profile's own
    list, e.g. bash-mcp's ``JEST_WORKER_ID``); explicit ``env``/``shell_env`` still apply.
    ``pwd``: the child's working directory, which ``PWD`` then names (as a shell sets it for
    what it runs; the server's own ``PWD`` names the server's) unless ``env`` or ``shell_env``
    gives one."""
    out = _inherited(secrets) if base is None else _filtered(dict(base), secrets)
    for k in inherit_not:
        out.pop(k, None)
    if agent_env:
        out.update(
            PAGER="cat",
            GIT_PAGER="cat",
            GIT_TERMINAL_PROMPT="0",
            TERM="xterm-256color" if pty else "dumb",
        )
    if env:
        out.update(env)
    if shell_env:
        out.update(shell_env)
    if pwd is not None and "PWD" not in (env or {}) and "PWD" not in (shell_env or {}):
        out["PWD"] = pwd
    out[CALLER_SESSION_VAR] = caller_session_id
    if tag:
        out[tag[0]] = tag[1]
    return out
