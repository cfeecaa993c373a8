"""The code stays ruff- and mypy-clean (a failing lint fails the suite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_check():
    r = run("ruff", "check", "src", "tests", "bench")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = run("ruff", "format", "--check", "src", "tests", "bench")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_src():
    r = run("mypy", "src/conch")
    assert r.returncode == 0, r.stdout + r.stderr
