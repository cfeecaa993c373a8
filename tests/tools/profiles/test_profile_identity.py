"""A seed profile served alone announces the original's MCP identity (docs/spec.md §7); Conch's own
profile, or a mix, keeps Conch's."""

from __future__ import annotations

from conch.tools.profiles import server_identity


def test_a_single_seed_profile_has_the_originals_name_version_and_instructions():
    name, version, instructions = server_identity(["tfbash"]) or ("", "", None)
    assert (name, version) == ("tfbash-mcp", "0.2.0")
    assert instructions is not None and "{shell_version}" in instructions


def test_conch_or_a_mix_of_profiles_keeps_conchs_identity():
    assert server_identity(["conch"]) is None
    assert server_identity(["tfbash", "conch"]) is None
    assert server_identity(["tfbash", "ai-device-bash"]) is None
    assert server_identity(["tfbash", "tfbash"]) is not None
