"""A terminal job's recording played by a real player (docs/spec.md §8): `conch cast JOB > x.cast`,
then asciinema (the Debian package: tests/support/system-tools.txt) plays it on a terminal of
the same size, and that terminal ends on the screen the dashboard showed for the job."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from frontend_servers import HttpServer, http_get, kill_group, start_http
from frontend_servers import invoke as call

pytestmark = pytest.mark.needs("asciinema")

# a full-screen program: alternate screen, colours, a scroll region, cursor moves, UTF-8
PROGRAM = r"""
import sys, time
w = sys.stdout.write
w("before the full-screen part\n"); sys.stdout.flush(); time.sleep(0.2)
w("\x1b[?1049h\x1b[H\x1b[2J\x1b[1;32mgreen bold\x1b[0m \x1b[7minverse\x1b[0m é ü 日本\n")
w("\x1b[3;10r")
for i in range(12):
    w(f"\x1b[10;1Hscrolled line {i}\n"); sys.stdout.flush(); time.sleep(0.02)
w("\x1b[r\x1b[20;5H\x1b[38;5;208morange at 20,5\x1b[0m\x1b[12;40H")
sys.stdout.flush()
time.sleep(60)
"""


def screen(srv: HttpServer, job_id: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request("GET", f"/api/jobs/{job_id}/screen")
        resp = conn.getresponse()
        assert resp.status == 200
        return dict(json.loads(resp.read()))
    finally:
        conn.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path)
    try:
        yield srv
    finally:
        kill_group(srv.proc)


def conch_cast(srv: HttpServer, job_id: str, out: Path) -> None:
    env = {**os.environ, "CONCH_PORT": str(srv.port), "CONCH_HOST": "127.0.0.1"}
    with open(out, "wb") as f:
        done = subprocess.run(
            [sys.executable, "-m", "conch", "cast", job_id], stdout=f, env=env, timeout=60
        )
    assert done.returncode == 0


def replayed(srv: HttpServer, argv: list[str]) -> dict[str, Any]:
    player = call(srv, "exec", {"argv": argv, "pty": True, "yield_ms": 20000})
    assert player["state"] == "exited" and player["exit_code"] == 0, player
    return screen(srv, player["job_id"])


@pytest.mark.parametrize("how", ["cat", "play"])
def test_asciinema_plays_a_recording_to_the_screen_the_dashboard_showed(
    tmp_path: Path, server: HttpServer, how: str
):
    job = call(
        server, "exec", {"argv": [sys.executable, "-c", PROGRAM], "pty": True, "yield_ms": 0}
    )
    done = call(
        server,
        "read",
        {"job_id": job["job_id"], "cursor": 0, "wait_ms": 10000, "until": {"pattern": "orange"}},
    )
    assert "orange" in done["output"]
    call(
        server,
        "read",
        {"job_id": job["job_id"], "wait_ms": 2000, "until": "quiet", "quiet_ms": 300},
    )
    shown = screen(server, job["job_id"])
    assert shown["alternate"] is True
    cast = tmp_path / "x.cast"
    conch_cast(server, job["job_id"], cast)
    lines = cast.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and (header["width"], header["height"]) == (200, 50)
    events = [json.loads(x) for x in lines[1:]]
    assert all(e[1] == "o" for e in events) and len(events) > 3
    assert [e[0] for e in events] == sorted(e[0] for e in events)
    assert events[-1][0] - events[0][0] >= 0.2  # the timing is the program's, not one burst
    argv = ["asciinema", "cat", str(cast)]
    if how == "play":
        argv = ["asciinema", "play", "-i", "0.05", "-s", "4", str(cast)]
    played = replayed(server, argv)
    assert played["lines"] == shown["lines"]
    assert played["cursor"] == shown["cursor"]
    assert played["alternate"] == shown["alternate"]
    call(server, "signal", {"job_id": job["job_id"], "signal": "kill"})


# a full-screen program that repaints at its terminal's size on each SIGWINCH
REDRAWS = r"""
import os, signal, sys, time
def draw(*_):
    cols, rows = os.get_terminal_size()
    sys.stdout.write(f"\x1b[H\x1b[2J\x1b[1;33mrows={rows} cols={cols}\x1b[0m\n")
    sys.stdout.write("".join(f"line {i} " + "=" * (cols - 12) + "\n" for i in range(rows - 2)))
    sys.stdout.write(f"\x1b[{rows};1H\x1b[7m" + "#" * (cols - 1) + f"\x1b[0m\x1b[2;{cols // 2}H")
    sys.stdout.flush()
signal.signal(signal.SIGWINCH, draw)
sys.stdout.write("\x1b[?1049h"); draw()
while True:
    time.sleep(1)
"""


def test_a_resized_session_replays_to_the_screen_the_dashboard_showed(
    tmp_path: Path, server: HttpServer
):
    job = call(
        server, "exec", {"argv": [sys.executable, "-c", REDRAWS], "pty": True, "yield_ms": 500}
    )
    assert "rows=50 cols=200" in job["output"]
    w = call(server, "write", {"job_id": job["job_id"], "resize": {"rows": 24, "cols": 90}})
    assert "rows=24 cols=90" in w["output"]
    shown = screen(server, job["job_id"])
    assert (shown["rows"], shown["cols"]) == (24, 90)
    assert "".join(run["text"] for run in shown["lines"][0]) == "rows=24 cols=90"
    cast = tmp_path / "x.cast"
    conch_cast(server, job["job_id"], cast)
    lines = cast.read_text().splitlines()
    assert (json.loads(lines[0])["width"], json.loads(lines[0])["height"]) == (200, 50)
    events = [json.loads(x) for x in lines[1:]]
    assert [e[1:] for e in events if e[1] == "r"] == [["r", "90x24"]]
    # asciinema 2 plays output only: its terminal takes the new size before playing, and the
    # program's repaint after the resize gives the final screen
    player = call(
        server,
        "exec",
        {
            "argv": ["sh", "-c", f"stty -echo; read go; asciinema cat {cast}"],
            "pty": True,
            "yield_ms": 300,
        },
    )
    call(
        server,
        "write",
        {"job_id": player["job_id"], "resize": {"rows": 24, "cols": 90}, "keys": ["enter"]},
    )
    done = call(server, "read", {"job_id": player["job_id"], "wait_ms": 20000, "until": "exit"})
    assert done["state"] == "exited" and done["exit_code"] == 0, done
    played = screen(server, player["job_id"])
    assert (played["rows"], played["cols"]) == (24, 90)
    assert played["lines"] == shown["lines"]
    assert played["cursor"] == shown["cursor"]
    assert played["alternate"] == shown["alternate"]
    call(server, "signal", {"job_id": job["job_id"], "signal": "kill"})


def test_a_shell_sessions_recording_holds_its_commands_in_turn(tmp_path: Path, server: HttpServer):
    """`conch cast s_…` (and `conch://shells/{id}/cast`): a shell's whole session as one
    asciicast, every retained command in turn at its own time, which asciinema plays."""
    sh = call(server, "shell_open", {})
    shell_id = sh["shell_id"]
    for command in ("echo first-cmd", "sleep 0.4; echo second-cmd", "echo third-cmd"):
        r = call(server, "exec", {"shell_id": shell_id, "command": command, "yield_ms": 5000})
        assert r["state"] == "exited", r
    cast = tmp_path / "session.cast"
    conch_cast(server, shell_id, cast)
    lines = cast.read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    events = [json.loads(x) for x in lines[1:]]
    assert [e[0] for e in events] == sorted(e[0] for e in events)
    text = "".join(e[2] for e in events if e[1] == "o")
    at = [text.index(word) for word in ("first-cmd", "second-cmd", "third-cmd")]
    assert at == sorted(at), text
    first = next(e[0] for e in events if "first-cmd" in e[2])
    third = next(e[0] for e in events if "third-cmd" in e[2])
    assert third - first >= 0.4, events  # each command at its own time
    status, body = http_get(server, f"/api/jobs/{shell_id}/cast")  # the download route
    assert status == 200 and body.decode() == cast.read_text()
    played = call(
        server, "exec", {"argv": ["asciinema", "cat", str(cast)], "pty": True, "yield_ms": 20000}
    )
    assert played["state"] == "exited" and played["exit_code"] == 0, played
    shown = "\n".join(
        "".join(run["text"] for run in row) for row in screen(server, played["job_id"])["lines"]
    )
    at = [shown.index(word) for word in ("first-cmd", "second-cmd", "third-cmd")]
    assert at == sorted(at), shown
    missing = call(server, "exec", {"command": "true"})  # a job id that is no terminal's
    status, body = http_get(server, f"/api/jobs/{missing['job_id']}/cast")
    assert status == 404 and b"no terminal" in body, (status, body)
    status, body = http_get(server, "/api/jobs/s_0000000000/cast")
    assert status == 404, (status, body)
    call(server, "shell_close", {"shell_id": shell_id})
