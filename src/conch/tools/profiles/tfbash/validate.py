"""tfbash's argument validation: the original checks arguments with pydantic in strict mode
before a tool runs, and rejects them with pydantic's messages (``loc: msg``); these checks give
the same verdicts and the same words, field by field in the original's order, then the checks
across fields. A rejection is ``ConchError("invalid_argument")``, which the profile shapes into
its envelope without the ids."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from conch.errors import ConchError
from conch.tools.profiles.tfbash.limits import (
    MAX_COMMAND_BYTES,
    MAX_ENV_VALUE_BYTES,
    MAX_ID_BYTES,
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    OUTPUT_BUFFER_BYTES,
    platform_name,
)


class _Invalid(Exception):
    def __init__(self, loc: str, msg: str) -> None:
        super().__init__(f"{loc}: {msg}" if loc else msg)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid_utf8(v: str, loc: str) -> None:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _Invalid(
            loc, "Input should be a valid string, unable to parse raw data as a unicode string"
        ) from None


def _string(v: Any, loc: str) -> str:
    if not isinstance(v, str):
        raise _Invalid(loc, "Input should be a valid string")
    _valid_utf8(v, loc)
    return v


def _min1(v: str, loc: str) -> None:
    if not v:
        raise _Invalid(loc, "String should have at least 1 character")


def _identifier(v: Any, loc: str) -> None:
    v = _string(v, loc)
    _min1(v, loc)
    if len(v) > MAX_ID_BYTES:
        raise _Invalid(loc, f"String should have at most {MAX_ID_BYTES} characters")
    if len(v.encode()) > MAX_ID_BYTES:
        raise _Invalid(loc, "Value error, must contain between 1 and 128 UTF-8 bytes")


def _command(v: Any, loc: str) -> None:
    v = _string(v, loc)
    _min1(v, loc)
    if "\x00" in v:
        raise _Invalid(loc, "Value error, must not contain U+0000")
    if len(v.encode()) > MAX_COMMAND_BYTES:
        raise _Invalid(loc, f"Value error, must not exceed {MAX_COMMAND_BYTES} UTF-8 bytes")


def _integer(v: Any, loc: str, lo: int, hi: int | None = None) -> None:
    if not _is_int(v):
        raise _Invalid(loc, "Input should be a valid integer")
    if v < lo:
        raise _Invalid(loc, f"Input should be greater than or equal to {lo}")
    if hi is not None and v > hi:
        raise _Invalid(loc, f"Input should be less than or equal to {hi}")


def _cwd(v: Any, loc: str) -> None:
    v = _string(v, loc)
    if "\x00" in v:
        raise _Invalid(loc, "Value error, must not contain U+0000")
    if not v.startswith("/"):
        raise _Invalid(loc, f"Value error, must be an absolute {platform_name()} path")


_ENV_KEY = "^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NO_NUL = "^[^\\x00]*$"


def _env(v: Any, loc: str) -> None:
    if not isinstance(v, dict):
        raise _Invalid(loc, "Input should be a valid dictionary")
    for key, value in v.items():
        if not _ENV_KEY_RE.fullmatch(key):
            raise _Invalid(f"{loc}.{key}.[key]", f"String should match pattern '{_ENV_KEY}'")
        value = _string(value, f"{loc}.{key}")
        if "\x00" in value:
            raise _Invalid(f"{loc}.{key}", f"String should match pattern '{_NO_NUL}'")
        if len(value.encode()) > MAX_ENV_VALUE_BYTES:
            raise _Invalid(
                f"{loc}.{key}", f"Value error, must not exceed {MAX_ENV_VALUE_BYTES} UTF-8 bytes"
            )
    if len(v) > 256:
        raise _Invalid(
            loc, f"Dictionary should have at most 256 items after validation, not {len(v)}"
        )


def _startup(v: Any, loc: str) -> None:
    if v is not None:
        _command(v, loc)


def _write_text(v: Any, loc: str) -> None:
    v = _string(v, loc)
    if len(v.encode()) > MAX_WRITE_BYTES:
        raise _Invalid(loc, f"Value error, must not exceed {MAX_WRITE_BYTES} UTF-8 bytes")


def _signal_name(v: Any, loc: str) -> None:
    if v not in ("interrupt", "terminate", "kill") or not isinstance(v, str):
        raise _Invalid(loc, "Input should be 'interrupt', 'terminate' or 'kill'")


_Field = tuple[str, Callable[[Any, str], None], bool]  # name, check, required
_FIELDS: dict[str, list[_Field]] = {
    "shell_open": [
        ("cwd", _cwd, False),
        ("env", _env, False),
        ("startup_command", _startup, False),
    ],
    "shell_exec": [
        ("shell_id", _identifier, True),
        ("command", _command, True),
        ("yield_ms", lambda v, loc: _integer(v, loc, 0, 60000), False),
        ("timeout_ms", lambda v, loc: _integer(v, loc, 1, 86400000), False),
        ("max_output_bytes", lambda v, loc: _integer(v, loc, 4096), False),
    ],
    "shell_read": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("cursor", lambda v, loc: _integer(v, loc, 0), True),
        ("max_bytes", lambda v, loc: _integer(v, loc, 4), False),
        ("wait_ms", lambda v, loc: _integer(v, loc, 0, 60000), False),
    ],
    "shell_write": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("text", _write_text, True),
    ],
    "shell_signal": [
        ("shell_id", _identifier, True),
        ("exec_id", _identifier, True),
        ("signal", _signal_name, True),
    ],
    "shell_list": [],
    "shell_close": [("shell_id", _identifier, True)],
}
# checks across fields, after every field passed (pydantic's model validators: no location)
_LIMITS = {
    "shell_exec": ("max_output_bytes", OUTPUT_BUFFER_BYTES),
    "shell_read": ("max_bytes", MAX_READ_BYTES),
}


def validator(name: str) -> Callable[[dict[str, Any]], None]:
    fields = _FIELDS[name]
    known = {f[0] for f in fields}

    def check(args: dict[str, Any]) -> None:
        try:
            for field, fn, required in fields:
                if field in args:
                    fn(args[field], field)
                elif required:
                    raise _Invalid(field, "Field required")
            for key in args:
                if key not in known:
                    raise _Invalid(str(key), "Extra inputs are not permitted")
            if name in _LIMITS:
                field, most = _LIMITS[name]
                if args.get(field, most) > most:
                    raise _Invalid("", f"Value error, {field} must not exceed {most}")
        except _Invalid as e:
            raise ConchError("invalid_argument", str(e)) from None

    return check
