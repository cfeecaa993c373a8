"""tfbash-mcp 0.2.0's limits and defaults, in one place: argument validation, the handlers and
the execution window all hold to the same numbers (the descriptors in ``tools.json`` publish
them too)."""

from __future__ import annotations

import sys

OUTPUT_BUFFER_BYTES = 4 * 1024 * 1024
MAX_READ_BYTES = 65536
MAX_COMMAND_BYTES = 262144
MAX_WRITE_BYTES = 65536
MAX_ENV_VALUE_BYTES = 32768
MAX_SHELLS = 8  # the original's --max-command-shells default
TERMINAL_SIZE = (24, 80)  # the original's PTY (pexpect's default dimensions)
MAX_ID_BYTES = 128


def platform_name() -> str:
    """The platform as the original names it (descriptors, shell_list, validation messages)."""
    return "macos" if sys.platform == "darwin" else "linux"
