"""Test helper: a test body run as a script of its own, in a fresh interpreter (its own limits
and signal state), which prints its findings as JSON on its last line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any


def run_child(tmp_path: Path, body: str, timeout: float = 240) -> dict[str, Any]:
    """Run an embedded Runtime in a fresh interpreter (its own limits and signal state)."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
