"""Run every benchmark in bench/ in turn (bench_*.py, then the soak):
`uv run python bench/run_all.py [--quick]`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts() -> list[Path]:
    """The benchmarks, in the order they run."""
    return [*sorted(HERE.glob("bench_*.py")), HERE / "soak.py", HERE / "model_view.py"]


def main() -> int:
    failed = []
    for script in scripts():
        print(f"\n=== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script), *sys.argv[1:]]).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
