"""Tool profiles: `conch` (default); the seed-compatible ones map onto the same runtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from conch.errors import ConfigError

if TYPE_CHECKING:
    from conch.tools.catalogue import Tool


def _conch() -> tuple[Tool, ...]:
    from conch.tools.catalogue import conch_tools

    return conch_tools()


def _ai_device_bash() -> tuple[Tool, ...]:
    from conch.tools.compat.ai_device_bash import tools

    return tools()


def _tfbash() -> tuple[Tool, ...]:
    from conch.tools.compat.tfbash import tools

    return tools()


def _bash_mcp() -> tuple[Tool, ...]:
    from conch.tools.compat.bash_mcp import tools

    return tools()


PROFILES: dict[str, Callable[[], tuple[Tool, ...]]] = {
    "conch": _conch,
    "ai-device-bash": _ai_device_bash,
    "tfbash": _tfbash,
    "bash-mcp": _bash_mcp,
}


def profile_tools(name: str) -> tuple[Tool, ...]:
    try:
        return PROFILES[name]()
    except KeyError:
        raise ConfigError(
            f"profiles: unknown profile {name!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None
