"""What Conch knows of the MCP hosts that call it (SPEC §2 "Host timeouts never lose a job",
§6 "What the real hosts show"; measured in ``reference/hosts.md``).

A host cancels a tool call when its own timeout hits, and some cut a result that is too large
(Codex: in the middle, with the JSON and Conch's own marker). So every wait of the ``conch``
profile ends (with ``state: running``) before the host's timeout — the *horizon* — and every
inline window stays below the host's cut, with Conch's marker and cursors intact. A cancel the
host sends for its own timeout leaves the job running; a person's cancel stops it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HostFacts:
    """``timeout_ms``: the host's own tool-call timeout (None: it has none worth planning
    for); ``max_output_bytes``: the most output bytes an inline window may carry so that the
    host shows the whole result."""

    name: str
    timeout_ms: int | None
    max_output_bytes: int


# clientInfo.name -> facts. Codex: 60 s per tool by default (`tool_timeout_sec`), results
# over 10k tokens cut mid-JSON (about 12 KB under its fallback model metadata); Claude Code:
# no timeout by default (MCP_TOOL_TIMEOUT, 1e8 ms), results over 25k tokens saved to a file.
KNOWN_HOSTS: dict[str, HostFacts] = {
    "codex-mcp-client": HostFacts("Codex", 60_000, 8192),
    "claude-code": HostFacts("Claude Code", None, 32768),
}
# a host Conch does not know: assume the shortest known timeout, and no cut
UNKNOWN_HOST = HostFacts("an unknown host", 60_000, 1 << 20)
IN_PROCESS = HostFacts("in-process", None, 1 << 20)  # the embedded API, the HTTP invoke API

_TIMEOUT_REASON = re.compile(r"time[ds]?[ _-]?out|deadline", re.IGNORECASE)


def facts_for(client_name: str | None) -> HostFacts:
    if client_name is None:
        return UNKNOWN_HOST
    return KNOWN_HOSTS.get(client_name.strip().lower(), UNKNOWN_HOST)


def horizon_ms(facts: HostFacts, setting_ms: int = 0) -> int | None:
    """How long a wait may last so that it ends before the host gives up (None: no limit).
    ``setting_ms`` (``host_timeout_ms``) overrides the host's own timeout."""
    timeout = setting_ms or facts.timeout_ms
    if not timeout:
        return None
    return max(250, timeout - max(1000, timeout // 10))


def is_host_timeout(reason: object, elapsed_ms: float, facts: HostFacts, setting_ms: int) -> bool:
    """Whether a cancellation is the host's own timeout (the job then keeps running) rather
    than a person's cancel: its reason says so, or it came when the host's timeout ran out."""
    if isinstance(reason, str) and _TIMEOUT_REASON.search(reason):
        return True
    timeout = setting_ms or facts.timeout_ms
    return timeout is not None and timeout > 0 and elapsed_ms >= 0.95 * timeout
