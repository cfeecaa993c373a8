"""``conch install HOST``: register this Conch with an MCP host in the host's own config file,
in place (command.py does the work; the parser is here so that ``conch --help`` stays fast).
"""

from __future__ import annotations

import argparse

# the keys of hosts.HOSTS (checked by the tests), named here to keep that module off startup
HOST_NAMES = (
    "codex",
    "claude-code",
    "claude-desktop",
    "vscode",
    "cursor",
    "gemini",
    "antigravity",
    "goose",
    "opencode",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The ``install`` subcommand; its setting flags (``--profile``, ``--data-dir``, ...) are
    added by the caller, as for ``serve``."""
    hosts = ", ".join(HOST_NAMES)
    p = sub.add_parser(
        "install",
        help="register Conch with an MCP host (Codex, Claude Code, VS Code, ...)",
        description=f"Add Conch to HOST's MCP config ({hosts}), in place, keeping the rest of "
        "the file and its comments: an entry that starts this installation's `conch serve` "
        "with the settings given here and --host-timeout-ms set from the host's call timeout "
        "(for Codex, Gemini CLI and Goose also raised to 700 s, so a 10-minute wait fits). "
        "Running it again changes nothing; --remove takes the entry out again.",
    )
    p.add_argument("host", metavar="HOST", choices=HOST_NAMES, help=f"one of: {hosts}")
    p.add_argument(
        "--scope",
        choices=("user", "project"),
        default="user",
        help="the user's config (default) or the project's, in the current directory",
    )
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="show the change as a diff; write nothing",
    )
    p.add_argument("--remove", action="store_true", help="take Conch's entry out")
    p.add_argument(
        "--force",
        action="store_true",
        help="remove an entry that is no longer what install wrote; rewrite one that cannot be "
        "changed in place",
    )
    p.add_argument("--env-file", metavar="FILE", help="CONCH_* settings file the server reads")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from conch.cli.install.command import run

    return run(args)
