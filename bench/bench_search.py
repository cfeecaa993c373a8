"""Benchmark: conch's Searcher vs running the same ripgrep command directly.

Generates 20,000 small text files across nested directories in a temporary directory (deleted
afterwards), a few hundred of them containing a needle, then times, interleaved and after a
warm-up, ``Searcher.search(pattern=needle, max_matches=1000)`` against
``subprocess.run([rg, "--json", "--no-config", "--fixed-strings", "-e", needle, "--", dir])``
capturing its output. Prints the medians and their ratio (target: Searcher ≤ 1.1x direct rg).

    uv run python bench/bench_search.py [--files 20000] [--reps 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from conch.core.requests import SearchRequest
from conch.core.search import Searcher, find_rg

NEEDLE = "xq_needle_7f3a"


def make_corpus(root: str, n_files: int, needle_every: int) -> int:
    """n_files small files, 50 per directory, directories nested two levels deep."""
    with_needle = 0
    per_dir = 50
    for i in range(n_files):
        d = i // per_dir
        sub = os.path.join(root, f"pkg{d // 20:03d}", f"mod{d:04d}")
        if i % per_dir == 0:
            os.makedirs(sub, exist_ok=True)
        lines = [f"# file {i}", "def handler(request):", "    return request.body", ""]
        if i % needle_every == 0:
            lines.insert(2, f"    token = '{NEEDLE}'  # marker")
            with_needle += 1
        with open(os.path.join(sub, f"file{i % per_dir:02d}.py"), "w") as f:
            f.write("\n".join(lines) * 3)
    return with_needle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--needle-every", type=int, default=80)
    ap.add_argument("--quick", action="store_true", help="2,000 files, 5 repetitions")
    args = ap.parse_args()
    if args.quick:
        args.files, args.reps = 2000, 5

    rg = find_rg()
    if rg is None:
        print("ripgrep not found; install conch[mcp] or ripgrep", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="conch-bench-search-")
    try:
        t0 = time.perf_counter()
        n_needle = make_corpus(tmp, args.files, args.needle_every)
        print(
            f"corpus: {args.files} files ({n_needle} with the needle) in "
            f"{time.perf_counter() - t0:.1f} s; rg {rg.version} at {rg.path}"
        )
        direct_argv = [rg.path, "--json", "--no-config", "--fixed-strings", "-e", NEEDLE, "--", tmp]
        env = {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}
        searcher = Searcher(tmp, rg=rg)

        def run_direct() -> float:
            t = time.perf_counter()
            proc = subprocess.run(direct_argv, capture_output=True, env=env, check=False)
            elapsed = time.perf_counter() - t
            assert proc.returncode == 0, proc.stderr
            return elapsed * 1000

        async def run_searcher() -> float:
            t = time.perf_counter()
            result = await searcher.search(
                SearchRequest(pattern=NEEDLE, path=tmp, max_matches=1000)
            )
            elapsed = time.perf_counter() - t
            # Each needle file holds the needle once per copy of its text (3 copies).
            assert len(result["matches"]) == 3 * n_needle, len(result["matches"])
            assert not result["truncated"]
            return elapsed * 1000

        async def bench() -> tuple[list[float], list[float]]:
            for _ in range(3):  # warm-up: page cache, rg startup, import paths
                run_direct()
                await run_searcher()
            direct: list[float] = []
            ours: list[float] = []
            for i in range(args.reps):
                if i % 2 == 0:
                    direct.append(run_direct())
                    ours.append(await run_searcher())
                else:
                    ours.append(await run_searcher())
                    direct.append(run_direct())
            return direct, ours

        direct, ours = asyncio.run(bench())
        md, mo = statistics.median(direct), statistics.median(ours)
        print(f"direct rg (subprocess.run): median {md:.1f} ms  (min {min(direct):.1f})")
        print(f"Searcher.search:            median {mo:.1f} ms  (min {min(ours):.1f})")
        print(f"ratio Searcher/direct: {mo / md:.3f}x  (target <= 1.1x)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
