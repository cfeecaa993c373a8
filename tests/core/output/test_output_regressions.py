"""Output bugs found using Conch as a new user would (issue 8, part 1): each stays fixed.

Progress bars do not flood previews, and tiny budgets are valid. (The same issue's job bugs:
tests/core/jobs/test_job_regressions.py.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import conch
from conch.core.output import window as win
from conch.core.output.log import JobLog
from conch.core.output.utf8 import utf8_len

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


async def call(rt: conch.Runtime, tool: str, **args: Any) -> dict[str, Any]:
    r = await rt.call_tool(tool, args)
    assert "error" not in r, r
    return r


# -- progress bars ----------------------------------------------------------------------------


async def test_a_rewritten_progress_line_previews_as_its_final_content(rt: conch.Runtime) -> None:
    r = await call(rt, "exec", command="for i in $(seq 1 20000); do printf '\\r%d' $i; done; echo")
    assert r["state"] == "exited"
    assert r["output"] == "20000\n", r["output"][:300]
    # lean result: nothing cut, so neither truncated nor omitted_bytes is there
    assert "truncated" not in r and "omitted_bytes" not in r
    assert (await rt.list())["jobs"][-1]["total_bytes"] > 100_000


def _log(tmp_path: Path, data: bytes) -> JobLog:
    path = str(tmp_path / "x.log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    log = JobLog(path, fd, 1 << 30)
    log.append(data)
    log.close_writer()
    return log


def test_preview_of_a_huge_rewritten_log_is_bounded_and_its_marker_cursors_are_raw(
    tmp_path: Path,
) -> None:
    frames = b"".join(b"\r%07d" % i for i in range(500_000))  # 4 MB of one rewritten line
    data = b"start\n" + frames + b"\nend\n"
    log = _log(tmp_path, data)
    w = win.preview(log, 400)
    assert utf8_len(w.text) <= 400 and w.truncated
    assert w.text.startswith("start\n") and w.text.endswith("end\n")
    a, b = (int(x) for x in w.text.split("read cursor ")[1].split(" ")[0].split("-"))
    assert b - a == w.omitted_bytes and 0 < a < b < len(data)
    # the marker's range is exactly what the head and tail left out, in raw bytes
    head_raw = win.forward(log, 0, a, 1 << 20, stream=None, raw=True, final=True)
    assert head_raw.next_cursor == a
    log.unlink()


# -- tiny budgets ------------------------------------------------------------------------------


async def test_tiny_read_and_exec_budgets_keep_the_newest_tail(rt: conch.Runtime) -> None:
    r = await call(rt, "exec", command="printf 'one two three héllo wörld'", max_output_bytes=5)
    assert r["truncated"] and utf8_len(r["output"]) <= 5
    assert "wörld".endswith(r["output"]) and r["output"]
    for n in (1, 2, 3, 5, 15):
        got = await call(rt, "read", job_id=r["job_id"], cursor=0, max_bytes=n)
        assert 0 < utf8_len(got["output"]) <= n, got
        assert got["output"] == "one two three héllo wörld"[: len(got["output"])]
    one = await call(rt, "exec", command="echo 12345", max_output_bytes=1)
    assert one["output"] == "\n"
