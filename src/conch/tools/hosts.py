"""What Conch knows of the MCP hosts that call it (docs/mcp.md "Host timeouts"; the
measurements are kept as tests that drive the real Codex CLI and Claude Code, tests/hosts/).

A host cancels a tool call when its own timeout hits, and some cut a result that is too large
(Codex: in the middle, with the JSON and Conch's own marker). So every wait ends (with
``state: running``) before the host gives up — the *horizon* — and every inline window stays
below the host's cut, with Conch's marker and cursors intact. A cancel that may be the host's
timeout leaves the job running (detached); a cancel that is clearly a person's stops it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: what a host's own timeout may be worded as (the MCP SDKs: "Request timed out", "timed out
#: after 1.0s", "TimeoutError"; deadlines)
_TIMEOUT_WORDS = re.compile(r"time[ds]?[ _-]?out|deadline", re.IGNORECASE)
#: what a person's cancel is worded as (Claude Code's Esc and Ctrl-C: "AbortError: user-cancel";
#: an AbortController aborted without a reason; the Python SDK's "caller cancelled", whose
#: timeouts say "timed out")
_PERSON_WORDS = re.compile(
    r"\buser\b|user[ _-]?cancel|abort|interrupt|\besc\b|^caller cancelled$", re.IGNORECASE
)


@dataclass(frozen=True)
class HostFacts:
    """``timeout_ms``: the host's own tool-call timeout by default (None: none worth planning
    for); ``max_output_bytes``: the most output bytes an inline window may carry so that the
    host shows the whole result."""

    name: str
    timeout_ms: int | None
    max_output_bytes: int = 1 << 20
    #: how long this host let a call last before it cut one (learned from a cut that may be
    #: its own timeout): below what Conch knew, it bounds every later wait of that client
    learned_ms: int | None = None


@dataclass(frozen=True)
class KnownHost:
    """A row of the known-host table: the ``clientInfo.name`` a host sends (compared
    lowercased, spaces as dashes; ``anywhere``: found anywhere in the name, for a host whose
    exact name is not known), the first version the row holds for (a host's rows come newest
    first; None: any version, an unknown one too), and the facts."""

    name: str
    facts: HostFacts
    since: tuple[int, ...] | None = None
    anywhere: bool = False

    def matches(self, key: str) -> bool:
        return self.name in key if self.anywhere else self.name == key


#: the reasons a host gives both for its own timeout and for a person's cancel, so that a
#: cancel worded so never stops a job. Codex (measured with 0.171.0: a `tool_timeout_sec`
#: timeout and a SIGINT of `codex exec` both send it)
CODEX_CANCEL_REASON = "MCP request cancelled by caller"
_AMBIGUOUS_REASONS = frozenset({CODEX_CANCEL_REASON})

# clientInfo.name -> facts, by version where a default changed. Measured here (tests/hosts):
# Codex 0.171.0 cuts a call at 300.0 s (`tool_timeout_sec`; progress does not extend it) and a
# result over 10k tokens mid-JSON (about 12 KB under its fallback model metadata); Claude Code
# 2.1.197 has no per-call limit by default (`MCP_TOOL_TIMEOUT` and a per-server `timeout` are
# hard limits) and saves a result over 25k tokens to a file. From the hosts' sources and issue
# threads (not measured here): Codex before 300 s had 120 s, and 60 s before that (the version
# that changed it is not known: every version below the measured one gets the shortest);
# Claude Desktop and claude.ai ~60 s; Antigravity CLI ~180 s, hard-coded (its clientInfo name is
# not known); opencode 60 s unless progress resets it; Gemini CLI 600 s; Goose 300 s; VS Code
# none.
KNOWN_HOSTS: tuple[KnownHost, ...] = (
    KnownHost("codex-mcp-client", HostFacts("Codex", 300_000, 8192), since=(0, 171, 0)),
    KnownHost("codex-mcp-client", HostFacts("Codex", 60_000, 8192)),
    KnownHost("claude-code", HostFacts("Claude Code", None, 32768)),
    KnownHost("claude-ai", HostFacts("Claude Desktop", 60_000)),
    KnownHost("antigravity", HostFacts("Antigravity", 180_000), anywhere=True),
    KnownHost("opencode", HostFacts("opencode", 60_000)),
    KnownHost("gemini-cli-mcp-client", HostFacts("Gemini CLI", 600_000)),
    KnownHost("goose", HostFacts("Goose", 300_000)),
    KnownHost("visual-studio-code", HostFacts("VS Code", None)),
)
# a host Conch does not know: the shortest timeout of the common hosts, and no cut
UNKNOWN_HOST = HostFacts("an unknown host", 60_000)
IN_PROCESS = HostFacts("in-process", None)  # the embedded API, the HTTP invoke API
#: the front ends a host may call Conch's tools through (``info`` lists them)
TRANSPORTS = ("embedded", "stdio", "streamable-http", "sse", "http-invoke")

# a wait ends this long before the host's timeout: a tenth of it, within these bounds (horizon)
HORIZON_MARGIN_MIN_MS = 1000
HORIZON_MARGIN_MAX_MS = 10_000


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _key(name: str) -> str:
    return "-".join(name.strip().lower().split())


@lru_cache(maxsize=64)  # (once per call: a host sends the same clientInfo every time)
def facts_for(client_name: str | None, client_version: str | None = None) -> HostFacts:
    """The facts of the host that sent ``clientInfo {name, version}``: the row for its name
    whose ``since`` its version reaches (an unknown version: the row without ``since``)."""
    if client_name is None:
        return UNKNOWN_HOST
    key = _key(client_name)
    version = _version(client_version)
    for row in KNOWN_HOSTS:
        if row.matches(key) and (
            row.since is None or (version is not None and version >= row.since)
        ):
            return row.facts
    return UNKNOWN_HOST


@dataclass(frozen=True)
class Horizon:
    """How long a wait may last in a call: ``ms`` (None: no limit), from the host's
    ``timeout_ms`` and where that came from (``setting``: host_timeout_ms; ``known host``;
    ``default``: an unknown host; ``none``: in process)."""

    ms: int | None
    timeout_ms: int | None
    source: str


def horizon(facts: HostFacts | None, setting_ms: int = 0) -> Horizon:
    """The horizon of a call from a host with ``facts`` (None: in process). The setting
    ``host_timeout_ms`` wins (``conch install`` registers Conch with the timeout it wrote
    into the host's config), then the known host's default, then the unknown host's; a
    shorter timeout the host was seen to cut a call at (``learned_ms``) wins over them all. The wait
    ends a margin before the timeout: a tenth of it, between 1 s and 10 s, for the time from the
    host's sending the call to Conch's starting the wait (the spawn of an exec, a loaded event
    loop) and from its end to the result reaching the host."""
    timeout: int | None
    if setting_ms:
        timeout, source = setting_ms, "setting"
    elif facts is None or facts is IN_PROCESS:
        return Horizon(None, None, "none")
    else:
        timeout = facts.timeout_ms
        source = "default" if facts is UNKNOWN_HOST else "known host"
    if facts is not None and facts.learned_ms and (not timeout or facts.learned_ms < timeout):
        timeout, source = facts.learned_ms, "learned"
    if not timeout:
        return Horizon(None, None, source)
    margin = min(HORIZON_MARGIN_MAX_MS, max(HORIZON_MARGIN_MIN_MS, timeout // 10))
    return Horizon(max(250, timeout - margin), timeout, source)


def horizon_ms(facts: HostFacts | None, setting_ms: int = 0) -> int | None:
    """How long a wait may last so that it ends before the host gives up (None: no limit)."""
    return horizon(facts, setting_ms).ms


def is_host_timeout(reason: object, elapsed_ms: float, facts: HostFacts, setting_ms: int) -> bool:
    """Whether a cancellation may be the host's own timeout, so the job must keep running
    (detached), rather than a person's cancel that stops it. By its reason: the host's
    timeout wording, or a reason the host also gives for its timeout (Codex words both alike:
    the job survives); a person's wording stops the job. Without a reason either way, by its
    timing: it may be the timeout once the host's known timeout has (nearly) run out."""
    if isinstance(reason, str):
        if reason.strip() in _AMBIGUOUS_REASONS:
            return True
        if _TIMEOUT_WORDS.search(reason):
            return True
        if _PERSON_WORDS.search(reason):
            return False
    timeout = setting_ms or facts.timeout_ms
    return timeout is not None and timeout > 0 and elapsed_ms >= 0.95 * timeout
