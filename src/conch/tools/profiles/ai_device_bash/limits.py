"""ai-device-bash 0.2.0's limits, in one place: the argument checks, the previews and the waits
all hold to the same numbers."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 8192
MAX_ARGV_COUNT = 4096
MAX_ARGV_BYTES = 262144
MAX_SCRIPT_BYTES = 1024 * 1024
MAX_STDIN_BYTES = 4 * 1024 * 1024
MAX_SYNTAX_OUTPUT_BYTES = 65536
PURPOSE_MAX_CHARS = 200
FOREVER_S = 1e9  # a timeout this long (or inf) waits like no timeout at all
