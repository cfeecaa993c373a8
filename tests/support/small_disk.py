"""A small tmpfs of a test's own, for what a full disk does (needs root and mount)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import system_tools


def mounted(d: Path, options: str = "size=1m") -> Iterator[Path]:
    """``d`` made and a tmpfs mounted on it with ``options`` (a fixture's body: yields it,
    then unmounts); skips, naming why, where the test cannot mount."""
    d.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        system_tools.unavailable("a small filesystem of its own", "needs root and mount")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)], capture_output=True, text=True
    )
    if r.returncode != 0:
        system_tools.unavailable("a small filesystem of its own", f"mount: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)
