"""The tool profiles: ``conch`` (the default, one module) and the three seed-compatible ones
(``ai_device_bash``, ``tfbash``, ``bash_mcp``: a package each, with its descriptors as data in
``tools.json``), each exporting ``PROFILE``; what they share is in ``_common.py``. The registry
of profiles is ``conch.tools.registry``."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

# The seed profiles' modules. Each may define ``SERVER_NAME``, ``SERVER_VERSION`` and
# ``INSTRUCTIONS`` (the original's MCP identity, docs/spec.md §7: "a profile served alone says what
# the original says"); ``INSTRUCTIONS`` may name ``{dialect}``, ``{platform}``, ``{shell_version}``,
# ``{default_cwd}`` and ``{workspace_root}``, which the MCP server fills in. Served alone, a
# seed profile also has only its own resources (its PROFILE.resources),
# and its module may define: ``UNKNOWN_RESOURCE = (code, message)`` (the JSON-RPC error for an
# unknown URI; default Conch's -32002), ``RESOURCE_TEMPLATES`` (a list, default ``[]``; ``None``:
# no resources/templates/list method) and ``UNKNOWN_TOOL_TEXT`` (an unknown tool's plain-text
# error result instead of Conch's envelope); both messages may name ``{uri}`` / ``{name}``.
# ``CAPABILITIES`` (the initialize result's capabilities as the original announces them) and
# ``UNKNOWN_PROMPT = (code, message)`` are applied by conch.mcp.seed_wire.
SEED_MODULES = {
    "ai-device-bash": "conch.tools.profiles.ai_device_bash",
    "tfbash": "conch.tools.profiles.tfbash",
    "bash-mcp": "conch.tools.profiles.bash_mcp",
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
