"""The benchmarks stay runnable (quick mode); their figures are read by people, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_runs_in_quick_mode():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    for name in (
        "bench_core.py",
        "bench_fleet.py",
        "bench_mcp.py",
        "bench_search.py",
        "bench_shell.py",
        "bench_sandbox.py",
        "soak.py",
        "model_view.py",
    ):
        assert f"=== {name}" in out.stdout
    assert "ratio" in out.stdout
    assert "descriptor drift" in out.stdout and "RSS drift" in out.stdout
