"""Resizing a terminal job with `write {resize: {rows, cols}}` (docs/spec.md §8): the program's
terminal gets the new size (and SIGWINCH), its screen and its recording follow, a shell keeps the
size for the commands after. Real programs on real terminals."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

import conch

pytestmark = pytest.mark.anyio

# a full-screen program: on each SIGWINCH it repaints at its terminal's size
REDRAWS = r"""
import os, signal, sys, time
def draw(*_):
    cols, rows = os.get_terminal_size()
    sys.stdout.write(f"\x1b[H\x1b[2Jrows={rows} cols={cols}\x1b[{rows};1H" + "#" * cols)
    sys.stdout.flush()
signal.signal(signal.SIGWINCH, draw)
sys.stdout.write("\x1b[?1049h"); draw()
while True:
    time.sleep(1)
"""


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    return {"result_detail": "lean", "default_cwd": ""}


async def call(rt: conch.Runtime, tool: str, **args: Any) -> dict[str, Any]:
    r = await rt.call_tool(tool, args)
    assert "error" not in r, r
    return r


def cast_events(rt: conch.Runtime, job_id: str) -> tuple[dict[str, Any], list[list[Any]]]:
    header, *events = (json.loads(line) for line in rt.engine.cast(job_id))
    return header, events


async def test_the_program_sees_the_new_size(rt: conch.Runtime) -> None:
    job = await call(
        rt, "exec", argv=["sh", "-c", "stty size; read x; stty size"], pty=True, yield_ms=500
    )
    assert job["output"] == "50 200\n"
    w = await call(
        rt, "write", job_id=job["job_id"], resize={"rows": 33, "cols": 77}, keys=["enter"]
    )
    assert w["output"].endswith("33 77\n")


async def test_a_full_screen_program_redraws_and_the_screen_has_the_new_size(
    rt: conch.Runtime,
) -> None:
    job = await call(rt, "exec", argv=[sys.executable, "-c", REDRAWS], pty=True, yield_ms=500)
    assert "rows=50 cols=200" in job["output"]
    w = await call(rt, "write", job_id=job["job_id"], resize={"rows": 12, "cols": 40})
    assert "rows=12 cols=40" in w["output"]  # the redraw SIGWINCH asked for
    snap = await call(rt, "read", job_id=job["job_id"], screen=True)
    assert (snap["screen"]["rows"], snap["screen"]["cols"]) == (12, 40)
    lines = rt.engine.screen(job["job_id"])["lines"]
    assert len(lines) == 12 and lines[0] == "rows=12 cols=40" and lines[11] == "#" * 40
    await call(rt, "signal", job_id=job["job_id"], signal="kill")


async def test_a_program_polling_its_size_sees_each_resize(rt: conch.Runtime) -> None:
    loop = "while :; do tput cols; sleep 0.05; done"
    job = await call(rt, "exec", argv=["bash", "-c", loop], pty=True, yield_ms=300)
    assert "200\n" in job["output"]
    for cols in (90, 31):
        await call(rt, "write", job_id=job["job_id"], resize={"rows": 20, "cols": cols})
        r = await call(
            rt, "read", job_id=job["job_id"], wait_ms=5000, until={"pattern": f"^{cols}$"}
        )
        assert f"{cols}\n" in r["output"]
    await call(rt, "signal", job_id=job["job_id"], signal="kill")


async def test_the_recording_has_the_resize_where_it_happened(rt: conch.Runtime) -> None:
    job = await call(rt, "exec", argv=[sys.executable, "-c", REDRAWS], pty=True, yield_ms=500)
    await call(rt, "write", job_id=job["job_id"], resize={"rows": 12, "cols": 40})
    header, events = cast_events(rt, job["job_id"])
    assert (header["width"], header["height"]) == (200, 50)  # the size it started at
    kinds = [e[1] for e in events]
    assert kinds.count("r") == 1
    at = kinds.index("r")
    assert events[at][2] == "40x12"
    assert all("rows=50" in e[2] for e in events[:at] if "rows=" in e[2])
    assert any("rows=12 cols=40" in e[2] for e in events[at + 1 :])
    assert [e[0] for e in events] == sorted(e[0] for e in events)
    # the dashboard's replay ends at the new size too
    end, _ = rt.engine.replay(job["job_id"], 1e9)
    assert (end["rows"], end["cols"]) == (12, 40) and end["lines"][0] == "rows=12 cols=40"
    await call(rt, "signal", job_id=job["job_id"], signal="kill")


async def test_a_screen_looked_at_late_applies_each_resize_where_it_came(
    rt: conch.Runtime,
) -> None:
    """A line printed at 200 columns is cut at 100 by the resize after it; a line printed after
    the resize wraps at 100. The screen is the same whether someone watched all along or looks
    only at the end (it is rebuilt from the log and the recording)."""
    job = await call(rt, "exec", argv=["cat"], pty=True, stdin_open=True, yield_ms=0)
    jid = job["job_id"]
    await call(rt, "write", job_id=jid, text="A" * 150 + "\n")
    watched = [rt.engine.screen(jid)]
    await call(rt, "write", job_id=jid, resize={"rows": 10, "cols": 100}, yield_ms=0)
    await call(rt, "write", job_id=jid, text="B" * 150 + "\n")
    watched.append(rt.engine.screen(jid))
    assert watched[0]["cols"] == 200 and watched[1]["cols"] == 100
    assert watched[1]["lines"][:2] == ["A" * 100, "A" * 100]  # the echo, then cat's copy
    assert watched[1]["lines"][2:6] == ["B" * 100, "B" * 50, "B" * 100, "B" * 50]
    rt.engine.screens.drop(jid)  # as if nobody had looked: rebuilt from log and recording
    late = rt.engine.screen(jid)
    assert late["lines"] == watched[1]["lines"]
    assert (late["rows"], late["cols"]) == (10, 100)
    await call(rt, "signal", job_id=jid, signal="kill")


async def test_a_shell_keeps_its_size_for_the_next_command(rt: conch.Runtime) -> None:
    sh = await call(rt, "shell_open")
    job = await call(rt, "exec", shell_id=sh["shell_id"], command="read x; stty size")
    await call(rt, "write", job_id=job["job_id"], resize={"rows": 40, "cols": 120}, keys=["enter"])
    done = await call(rt, "read", job_id=job["job_id"], wait_ms=5000, until="exit")
    assert done["state"] == "exited"
    nxt = await call(rt, "exec", shell_id=sh["shell_id"], command="stty size")
    assert nxt["output"] == "40 120\n"
    header, _ = cast_events(rt, nxt["job_id"])
    assert (header["width"], header["height"]) == (120, 40)
    await call(rt, "signal", shell_id=sh["shell_id"])


async def test_a_pipe_job_has_no_size_to_set(rt: conch.Runtime) -> None:
    job = await call(rt, "exec", command="sleep 30", stdin_open=True, yield_ms=0)
    r = await rt.call_tool("write", {"job_id": job["job_id"], "resize": {"rows": 20, "cols": 80}})
    assert r["error"]["code"] == "invalid_argument" and "pipes" in r["error"]["message"]
    await call(rt, "signal", job_id=job["job_id"], signal="kill")


@pytest.mark.parametrize(
    "resize",
    [{"rows": 1, "cols": 80}, {"rows": 20, "cols": 1001}, {"rows": 20}, {"rows": 2, "cols": True}],
)
async def test_a_size_out_of_bounds_is_refused_before_anything_runs(
    rt: conch.Runtime, resize: dict[str, Any]
) -> None:
    job = await call(rt, "exec", argv=["cat"], pty=True, yield_ms=0)
    r = await rt.call_tool("write", {"job_id": job["job_id"], "resize": resize, "text": "x"})
    assert r["error"]["code"] == "invalid_argument"
    with pytest.raises(conch.ConchError) as info:  # the embedded API checks the same
        await rt.write(job["job_id"], resize=resize, text="x")
    assert info.value.code == "invalid_argument"
    assert rt.view.job(job["job_id"]).log.size() == 0  # nothing was typed
    await call(rt, "signal", job_id=job["job_id"], signal="kill")


async def test_a_finished_job_cannot_be_resized(rt: conch.Runtime) -> None:
    job = await call(rt, "exec", argv=["true"], pty=True)
    r = await rt.call_tool("write", {"job_id": job["job_id"], "resize": {"rows": 20, "cols": 80}})
    assert r["error"]["code"] == "not_running"
