"""ai-device-bash's argument checks, in the two layers the original has. First what FastMCP
validates before the tool runs: the seed's signatures parsed by pydantic in lax mode (``"5"``
and ``true`` are numbers; a rejection is pydantic's own text, as ``invalid_argument``). Then the
seed's own checks, in its order with its messages, which the handlers run and which fail as
the seed's 12-key result (:class:`~conch.tools.profiles.ai_device_bash.results.Fail`); the
``_meta`` the seed reads (``shell_env``, the caller's session) is checked here too."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Literal, Optional, cast

from conch.config import ENV_NAME_PATTERN
from conch.core import CALLER_SESSION_VAR
from conch.errors import ConchError, ConfigError
from conch.tools.context import ToolContext
from conch.tools.profiles.ai_device_bash.limits import (
    MAX_ARGV_BYTES,
    MAX_ARGV_COUNT,
    MAX_SCRIPT_BYTES,
    MAX_STDIN_BYTES,
    PURPOSE_MAX_CHARS,
)
from conch.tools.profiles.ai_device_bash.results import Fail

_ENV_NAME = re.compile(ENV_NAME_PATTERN)
_SESSION_ID = re.compile(r"^ses-[0-9]+$")

# What FastMCP validates: the seed's signatures, parsed by pydantic in lax mode. The names and
# annotations are the seed's own: pydantic's error text names the function ("call[bash]") and
# the parameter, exactly as the original's answer does.


def bash(
    command: str,
    purpose: Any = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def run(
    argv: list[str],
    purpose: Any = None,
    stdin: Optional[str] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def script(
    script: str,
    purpose: Any = None,
    stdin: Optional[str] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 60,
    bytes: Optional[int] = None,
    timeout_behavior: Literal["background", "kill"] = "background",
) -> dict[str, Any]:
    return dict(locals())


def get(pid: int, timeout: Optional[float] = 0, bytes: int = 200) -> dict[str, Any]:
    return dict(locals())


SIGNATURES: dict[str, Callable[..., dict[str, Any]]] = {
    "bash": bash,
    "run": run,
    "script": script,
    "get": get,
}


@cache
def adapter(name: str) -> Any:
    try:
        from pydantic import TypeAdapter
    except ImportError:  # pragma: no cover - the base install has no pydantic
        raise ConfigError(
            "profiles: ai-device-bash parses arguments as its original (FastMCP/pydantic) "
            "does and needs pydantic: install conch[mcp]"
        ) from None
    return TypeAdapter(cast(Any, SIGNATURES[name]))


def validator(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def validate(args: dict[str, Any]) -> dict[str, Any]:
        from pydantic import ValidationError

        try:
            coerced: dict[str, Any] = adapter(name).validate_python(args)
        except ValidationError as e:
            errors = e.errors()
            loc = errors[0]["loc"] if errors else ()
            field = str(loc[0]) if loc else ""
            raise ConchError("invalid_argument", str(e), field=field) from None
        return coerced

    return validate


# The seed's own checks, in its order, with its messages.


def normalize_purpose(purpose: Any) -> str | None:
    if purpose is None:
        return None
    if not isinstance(purpose, str):
        raise Fail("INVALID_PURPOSE", "purpose 必须是字符串")
    text = purpose.strip()
    if not text:
        raise Fail("INVALID_PURPOSE", "purpose 不能为空")
    if len(text) > PURPOSE_MAX_CHARS:
        raise Fail("INVALID_PURPOSE", f"purpose 不能超过 {PURPOSE_MAX_CHARS} 个字符")
    return text


def purpose_summary(purpose: Any, default: str) -> str:
    try:
        return normalize_purpose(purpose) or default
    except Fail:
        return default


def meta_shell_env(ctx: ToolContext) -> dict[str, str]:
    raw = (ctx.meta or {}).get("shell_env")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise Fail("INVALID_META", "meta.shell_env 必须是对象（key-value map）")
    env: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not _ENV_NAME.fullmatch(k):
            raise Fail("INVALID_META", f"meta.shell_env 包含非法环境变量名: {k!r}")
        if v is None:
            raise Fail("INVALID_META", f"meta.shell_env[{k!r}] 不能为 null")
        env[k] = str(v)
    env.pop(CALLER_SESSION_VAR, None)  # the seed sets it from the caller context alone
    return env


def caller_session_id(ctx: ToolContext) -> str:
    """The seed's projection: only from a trusted transport, ``assistant.session_id`` trimmed
    and matching ``^ses-[0-9]+$``; else empty."""
    if not ctx.trusted or not ctx.meta:
        return ""
    assistant = ctx.meta.get("assistant")
    sid = assistant.get("session_id") if isinstance(assistant, Mapping) else None
    if not isinstance(sid, str):
        return ""
    sid = sid.strip()
    return sid if _SESSION_ID.fullmatch(sid) else ""


def check_argv(argv: list[str]) -> None:
    if not argv:
        raise Fail("INVALID_ARGV", "argv 必须是非空字符串数组")
    if not argv[0]:
        raise Fail("INVALID_ARGV", "argv[0] 必须是非空字符串")
    if any("\x00" in a for a in argv):
        raise Fail("INVALID_ARGV", "argv 元素不能包含空字节")
    if len(argv) > MAX_ARGV_COUNT:
        raise Fail("ARGV_TOO_LARGE", f"argv 参数数量不能超过 {MAX_ARGV_COUNT}")
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in argv) > MAX_ARGV_BYTES:
        raise Fail("ARGV_TOO_LARGE", f"argv UTF-8 总字节数不能超过 {MAX_ARGV_BYTES}")


def check_script(text: str) -> None:
    if not text:
        raise Fail("INVALID_SCRIPT", "script 必须是非空字符串")
    if "\x00" in text:
        raise Fail("INVALID_SCRIPT", "script 不能包含空字节")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCRIPT_BYTES:
        raise Fail("SCRIPT_TOO_LARGE", f"script UTF-8 字节数不能超过 {MAX_SCRIPT_BYTES}")


def check_stdin(stdin: str | None) -> None:
    if stdin is not None and len(stdin.encode("utf-8", "surrogatepass")) > MAX_STDIN_BYTES:
        raise Fail("STDIN_TOO_LARGE", f"stdin UTF-8 字节数不能超过 {MAX_STDIN_BYTES}")
