"""bench/agent_tasks.py stays runnable: one quick task (t3, a test suite's two failures in 1 MB
of output) with the conch policy through the real Claude Code and a reactive fake model."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _marked(run_dir: Path) -> list[str]:
    from agent_tasks_hosts import RUN_MARK

    mark = f"{RUN_MARK}={run_dir}".encode()
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error), open(f"/proc/{p.pid}/environ", "rb") as f:
            if mark in f.read().split(b"\0"):
                found.append(" ".join(p.cmdline()))
    return found


def test_one_quick_task_through_claude_code(tmp_path: Path) -> None:
    import agent_tasks
    from agent_tasks_hosts import claude_binary

    try:
        claude_binary()
    except Exception as e:  # no npm or no registry: the hosts tests say the same
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Claude Code {e}")
    task = next(t for t in agent_tasks.TASKS if t.key == "t3")
    spec = next(s for s in agent_tasks.TOOLSETS if s.key == "conch@claude")
    started = time.monotonic()
    r = agent_tasks.run_one(task, spec, tmp_path, quick=True)
    assert r.ok, f"{r.why}: {r.answer[:500]} (logs in {r.run_dir})"
    assert r.turns == 1 and 0 < r.bytes < 2000, r
    assert time.monotonic() - started < 40
    assert _marked(Path(r.run_dir)) == []  # the run cleaned up what it started


def test_plain_model_looks_again_when_the_window_is_cut(tmp_path: Path) -> None:
    """``claude-plain@claude`` on t12 through the real Claude Code: its window of make's ~43 KB
    holds neither error, so the model runs make again to a file with the generic grep, and
    names both errors from that."""
    import json

    import agent_tasks
    from agent_tasks_hosts import claude_binary
    from agent_tasks_tasks import GENERIC

    try:
        claude_binary()
    except Exception as e:  # no npm or no registry: the hosts tests say the same
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Claude Code {e}")
    task = next(t for t in agent_tasks.TASKS if t.key == "t12")
    spec = next(s for s in agent_tasks.TOOLSETS if s.key == "claude-plain@claude")
    r = agent_tasks.run_one(task, spec, tmp_path, quick=True)
    assert r.ok, f"{r.why}: {r.answer[:500]} (logs in {r.run_dir})"
    first, second = json.loads((Path(r.run_dir) / "result.json").read_text())["turns"]
    assert first["call"]["args"]["command"] == "make"
    assert "characters truncated" in first["shown"]  # the host's own cut, as the model saw it
    assert f"grep -n -E {GENERIC} build.log" in second["call"]["args"]["command"]
    assert r.bytes > 5000  # the window it paid for, before the grep
    assert _marked(Path(r.run_dir)) == []  # the run cleaned up what it started
