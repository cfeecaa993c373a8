"""`output_format`: parse a finished job's stdout as JSON or JSON Lines (seed 3)."""

from __future__ import annotations

import json
from typing import Any

PARSE_LIMIT = 8 * 1024 * 1024


def parse_output(fmt: str, stdout: bytes | None, *, cut: bool) -> tuple[Any, str | None]:
    """Returns (data, parse_error). ``cut``: the output is incomplete (cap hit / too large)."""
    if fmt == "text":
        return None, None
    if cut or stdout is None:
        if fmt == "auto":
            return None, None
        return None, "output was truncated (log cap or parse limit); not parsed"
    text = stdout.decode("utf-8", "replace")
    if fmt in ("json", "auto"):
        try:
            return json.loads(text), None
        except ValueError as e:
            if fmt == "auto":
                return None, None
            return None, f"invalid JSON: {e}"
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError as e:
            return None, f"invalid JSON on line {n}: {e}"
    return items, None
