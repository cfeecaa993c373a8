"""A screen first looked at long after the program began (docs/spec.md §8, core/jobs/screens.py):
the look feeds at most SCREEN_CATCHUP_BYTES of the log, so it restarts from a point within them. A
program that redraws in place (top: one clear, then each frame a cursor home and its lines)
must still show its whole last frame, header first. Real program, real terminal."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conch.config import SCREEN_CATCHUP_BYTES

pytestmark = pytest.mark.anyio

# one clear, then frames of 40 lines of 184 styled columns drawn from a cursor home, each line
# erased to its end: one frame is larger than the catch-up window
FRAMES = r"""
import sys, time
sys.stdout.write("\x1b[H\x1b[2J")
for n in range(12):
    out = ["\x1b[H"]
    for row in range(40):
        # every cell styled, as top's fields are: a frame is several times the window
        text = f"HEADER frame {n}" if row == 0 else f"{row:3d} " + "\x1b[1mx\x1b[m" * 180
        out.append(text + "\x1b[K\r\n")
    sys.stdout.write("".join(out) + "\x1b[J")
    sys.stdout.flush()
print("\x1b[41;1Hdone", flush=True)
time.sleep(30)
"""


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    return {"result_detail": "lean", "default_cwd": ""}


async def test_a_late_look_shows_the_last_frame_of_an_in_place_redraw(rt) -> None:
    job = await rt.exec(argv=[sys.executable, "-c", FRAMES], pty=True, yield_ms=200)
    try:
        # the frames are written at once; then the program sleeps: output goes quiet
        r = await rt.read(job["job_id"], until="quiet", quiet_ms=500, wait_ms=10000)
        assert r["state"] == "running", r
        s = await rt.read(job["job_id"], screen=True)
        lines = [line.rstrip() for line in s["output"].split("\n")]
        assert lines[0] == "HEADER frame 11", lines[:3]
        assert lines[1].startswith("  1 xxx") and lines[39].startswith(" 39 xxx"), lines[:3]
    finally:
        await rt.signal(job["job_id"], "kill")
    assert 2 * SCREEN_CATCHUP_BYTES < 40 * 180 * 8  # one frame outgrows the window
