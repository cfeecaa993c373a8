"""The benchmarks stay runnable (quick mode); their figures are read by people, not asserted.
Each runs as a test of its own, so they share the workers (bench_fleet with the Ray tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from run_all import scripts  # noqa: E402

EXPECTED = {
    "bench_changes.py",
    "bench_core.py",
    "bench_digest.py",
    "bench_guard.py",
    "bench_fleet.py",
    "bench_mcp.py",
    "bench_screen.py",
    "bench_search.py",
    "bench_shell.py",
    "bench_sandbox.py",
    "soak.py",
    "model_view.py",
}

# smaller still where a script has --smoke (quick mode is for figures people read; bench_mcp's
# is mostly servers starting, 4 s each on a loaded box)
SMOKE = {
    name: ["--smoke"]
    for name in ("bench_mcp.py", "bench_sandbox.py", "bench_core.py", "bench_changes.py")
}


def test_run_all_runs_every_benchmark():
    assert {s.name for s in scripts()} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_benchmark_runs_in_quick_mode(name: str):
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), "--quick", *SMOKE.get(name, [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stdout.strip(), out.stderr[-4000:]
    if name.startswith("bench_"):
        assert "ratio" in out.stdout  # each figure against a baseline of the same run
    if name == "soak.py":
        assert "descriptor drift" in out.stdout and "RSS drift" in out.stdout
