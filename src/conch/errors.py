"""The one error type Conch raises for tool-level failures, with the codes of docs/spec.md §6."""

from __future__ import annotations

# code -> retryable
ERROR_CODES: dict[str, bool] = {
    "invalid_argument": False,
    "not_found": False,
    "busy": True,
    "capacity": True,
    "shell_busy": True,
    "cwd_not_found": False,
    "spawn_failed": False,
    "syntax_error": False,
    "stdin_closed": False,
    "not_running": False,
    "rg_not_found": False,
    "search_failed": False,
    "closed": False,
    "sandbox_unavailable": False,
    # an undo refused: paths changed since it (named), or the job still runs
    "conflict": False,
    # fleet (docs/spec.md §9b): the job's node died; the node did not answer in time (state unknown)
    "node_lost": False,
    "node_unreachable": True,
    "internal": False,
}


class ConchError(Exception):
    """A tool could not do what was asked. Becomes the ``{"error": ...}`` envelope.

    ``field`` names the argument at fault (``cwd``, ``env.FOO``, ``argv[0]``, ``_meta.shell_env``)
    and ``value`` says what about it (``is required``, the missing path): profiles translate
    errors by ``(code, field)``, never by parsing ``message``. Neither is in the envelope.
    """

    def __init__(
        self,
        code: str,
        message: str,
        retryable: bool | None = None,
        *,
        field: str | None = None,
        value: str | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = ERROR_CODES[code] if retryable is None else retryable
        self.field = field
        self.value = value

    def envelope(self) -> dict[str, dict[str, object]]:
        return {"error": {"code": self.code, "message": self.message, "retryable": self.retryable}}

    def __repr__(self) -> str:
        return f"ConchError({self.code!r}, {self.message!r})"


class ConfigError(ValueError):
    """An invalid setting; the message names the setting."""


class RuntimeClosedError(RuntimeError):
    """Raised by every Runtime call after ``aclose()``."""

    def __init__(self) -> None:
        super().__init__("conch Runtime is closed")
