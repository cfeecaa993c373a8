"""The HTTP guard under a descriptor hog: p99 of another client's `exec true` over a new
connection each time (the guard traces every new loopback connection), quiet and while a
sandboxed job holds PROCS x FDS descriptors, in the same run, on each sandbox backend.

    uv run python bench/bench_guard.py [--quick] [--cgroup=off] [bwrap|landlock ...]

Goal: attacked p99 <= 2x the quiet p99, and no request refused. With cgroups the guard
reads the cgroup the kernel recorded for the client's socket (one sock_diag lookup); with
``--cgroup=off`` it searches the sandboxed processes' descriptors, within a budget past
which it refuses (the figures then show what a host without cgroups gets).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

QUICK = "--quick" in sys.argv
N = 30 if QUICK else 200
PROCS, FDS = int(os.environ.get("PROCS", "4")), int(os.environ.get("FDS", "15000"))
CGROUP = "off" if "--cgroup=off" in sys.argv else "auto"
HOG = (
    f"ulimit -n {FDS + 500}; for i in $(seq {PROCS}); do {sys.executable} -c "
    f"\"import os,time\nfd=os.open('/dev/null',os.O_RDONLY)\n"
    f'for _ in range({FDS}): os.dup(fd)\ntime.sleep(600)" & done; wait'
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def invoke(url: str, method: str, params: dict[str, object]) -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(
        url + "/invoke",
        data=json.dumps({"method": method, "params": params}).encode(),
        headers={"Content-Type": "application/json", "Connection": "close"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode()[:200]}


def sample(url: str) -> tuple[list[float], int]:
    """N calls of `exec true`, each over a new connection: (ms each, how many refused)."""
    out, refused = [], 0
    for _ in range(N):
        t = time.perf_counter()
        status, _ = invoke(url, "exec", {"command": "true"})
        out.append((time.perf_counter() - t) * 1000)
        refused += status != 200
    return out, refused


def p99(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


def run(backend: str) -> None:
    root = tempfile.mkdtemp(prefix="conch-bench-guard-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "conch", "serve", "--http", "--port", str(port)]
    cmd += ["--data-dir", os.path.join(root, "data"), "--sandbox-backend", backend]
    env = {**os.environ, "CONCH_CGROUP": CGROUP}
    env.pop("CONCH_AUTH_TOKEN", None)
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"[{backend}] the server did not start") from None
                time.sleep(0.1)
        invoke(url, "exec", {"command": "true", "sandbox": "read-only"})  # the guard is on
        quiet, q_refused = sample(url)
        status, hog = invoke(url, "exec", {"command": HOG, "sandbox": "read-only", "yield_ms": 0})
        assert status == 200, hog
        time.sleep(2 + PROCS * FDS / 50000)  # the descriptors made
        attacked, a_refused = sample(url)
        invoke(url, "signal", {"job_id": hog["job_id"], "signal": "kill"})
        q, a = p99(quiet), p99(attacked)
        print(
            f"[{backend}, cgroup {CGROUP}] exec true, new connection each, n={N}: "
            f"quiet median {statistics.median(quiet):.1f} ms p99 {q:.1f} ms"
            f" (refused {q_refused}); with {PROCS * FDS:,} descriptors held by a sandboxed "
            f"job: median {statistics.median(attacked):.1f} ms p99 {a:.1f} ms "
            f"(refused {a_refused}); p99 ratio {a / q:.2f} (goal <= 2)"
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")] or ["bwrap", "landlock"]
    for b in chosen:
        run(b)
