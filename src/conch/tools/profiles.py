"""Tool profiles: `conch` (default); the seed-compatible ones map onto the same runtime."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from types import ModuleType
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


# The seed profiles' modules. Each may define ``SERVER_NAME``, ``SERVER_VERSION`` and
# ``INSTRUCTIONS`` (the original's MCP identity, SPEC §7: "a profile served alone says what the
# original says"); ``INSTRUCTIONS`` may name ``{dialect}``, ``{platform}``, ``{shell_version}``,
# ``{default_cwd}`` and ``{workspace_root}``, which the MCP server fills in. Served alone, a
# seed profile also has only its own resources (none unless conch.tools.resources lists them),
# and its module may define: ``UNKNOWN_RESOURCE = (code, message)`` (the JSON-RPC error for an
# unknown URI; default Conch's -32002), ``RESOURCE_TEMPLATES`` (a list, default ``[]``; ``None``:
# no resources/templates/list method) and ``UNKNOWN_TOOL_TEXT`` (an unknown tool's plain-text
# error result instead of Conch's envelope); both messages may name ``{uri}`` / ``{name}``.
# ``CAPABILITIES`` (the initialize result's capabilities as the original announces them) and
# ``UNKNOWN_PROMPT = (code, message)`` are applied by conch.mcp.seed_wire.
SEED_MODULES = {
    "ai-device-bash": "conch.tools.compat.ai_device_bash",
    "tfbash": "conch.tools.compat.tfbash",
    "bash-mcp": "conch.tools.compat.bash_mcp",
}


def seed_module(profiles: Iterable[str]) -> ModuleType | None:
    """The module of the one seed profile served alone; None for ``conch`` or a mix."""
    names = list(dict.fromkeys(profiles))
    if len(names) != 1 or names[0] not in SEED_MODULES:
        return None
    return importlib.import_module(SEED_MODULES[names[0]])


def server_identity(profiles: Iterable[str]) -> tuple[str, str, str | None] | None:
    """``(name, version, instructions)`` the MCP server announces when a single seed profile
    that defines ``SERVER_NAME`` is active; None otherwise (Conch's own identity). A missing
    ``SERVER_VERSION`` is ``""`` (the server then uses Conch's version)."""
    mod = seed_module(profiles)
    name = getattr(mod, "SERVER_NAME", None) if mod is not None else None
    if not isinstance(name, str):
        return None
    version = getattr(mod, "SERVER_VERSION", "")
    instructions = getattr(mod, "INSTRUCTIONS", None)
    return name, str(version or ""), instructions
