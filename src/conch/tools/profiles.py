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


PROFILES: dict[str, Callable[[], tuple[Tool, ...]]] = {"conch": _conch}


def profile_tools(name: str) -> tuple[Tool, ...]:
    try:
        return PROFILES[name]()
    except KeyError:
        raise ConfigError(
            f"profiles: unknown profile {name!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None
