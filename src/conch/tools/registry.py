"""The tool registry of a runtime: the active profiles' tools by name (built once), their
resources, and the per-runtime state they keep. When two profiles share a tool name, the one
listed first wins (docs/spec.md §7)."""

from __future__ import annotations

from collections.abc import Sequence

from conch.errors import ConfigError
from conch.tools.profiles import ai_device_bash, bash_mcp, claude_code, codex, conch, tfbash
from conch.tools.profiles._common import Profile, Resource
from conch.tools.state import ProfileState
from conch.tools.tool import ErrorResult, Tool

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        conch.PROFILE,
        ai_device_bash.PROFILE,
        tfbash.PROFILE,
        bash_mcp.PROFILE,
        codex.PROFILE,
        claude_code.PROFILE,
    )
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"profiles: unknown profile {name!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None


def catalogue(profiles: Sequence[str] = ("conch",)) -> list[Tool]:
    """The tools of the given profiles; when two share a name, the first listed wins."""
    seen: dict[str, Tool] = {}
    for name in profiles:
        for tool in profile(name).tools():
            seen.setdefault(tool.name, tool)
    return list(seen.values())


class ToolRegistry:
    """The tools, resources and profile state of one runtime."""

    def __init__(self, profiles: Sequence[str] = ("conch",)) -> None:
        self.profiles = tuple(profiles)
        self.tools = catalogue(self.profiles)
        self._by_name = {t.name: t for t in self.tools}
        # each tool's profile: the first listed that has a tool of that name
        self._profile_of: dict[str, Profile] = {}
        for name in self.profiles:
            for tool in profile(name).tools():
                self._profile_of.setdefault(tool.name, profile(name))
        # tools callable by name but not listed, where no listed one has the name
        self.unlisted: list[Tool] = []
        for name in self.profiles:
            for tool in profile(name).unlisted():
                if tool.name not in self._by_name:
                    self._by_name[tool.name] = tool
                    self._profile_of[tool.name] = profile(name)
                    self.unlisted.append(tool)
        self.resources: tuple[Resource, ...] = tuple(
            r for name in self.profiles for r in profile(name).resources
        )
        self.state = ProfileState()

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def profile_of(self, tool: Tool) -> Profile:
        """The profile the tool comes from (its error results, isError, text block)."""
        return self._profile_of[tool.name]

    def error_result_of(self, tool: Tool) -> ErrorResult | None:
        """How a failed call of the tool is shaped: the tool's own way, else its profile's;
        None for Conch's error envelope."""
        return tool.wire.error_result or self.profile_of(tool).error_result

    def resource(self, uri: str) -> Resource | None:
        return next((r for r in self.resources if r.uri == uri), None)
