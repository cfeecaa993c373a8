"""Differences between ai-device-bash 0.2.0 and `conch serve --profile ai-device-bash` that are
accepted, each citing a bug listed in the reference (seed-contracts.md §4, "Bugs and
limitations seen, to avoid in the superset") or a SPEC sentence. Everything else must match."""

from __future__ import annotations

from harness import Allowed

ALLOWED: list[Allowed] = [
    # A negative exec timeout: the seed runs the command and waits forever; Conch refuses it.
    Allowed(
        r"timeout_negative",
        r"content\[0\]\.json\.(success|code|message|exit_code)",
        'seed-contracts §4, ai-device bugs: "a negative timeout is not validated" (the profile '
        "keeps the contract and drops the bug, SPEC §7: it answers INVALID_TIMEOUT)",
    ),
]
