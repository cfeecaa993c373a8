"""Profile ``claude-code``: Claude Code's ``Bash`` / ``TaskOutput`` / ``TaskStop`` on Conch's
engine (SPEC §7, dialect profiles). Being built (issue 20.3): no tools yet."""

from __future__ import annotations

from conch.tools.profiles._common import Profile
from conch.tools.tool import Tool


def tools() -> tuple[Tool, ...]:
    return ()


PROFILE = Profile("claude-code", tools)
