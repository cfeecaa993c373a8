"""A person resizes a terminal from the dashboard (issue 23): ``POST /api/jobs/{id}/resize`` of
a real `conch serve --http --dashboard-control`, real programs on real terminals, no browser
(the Fit button that posts it: tests/http/test_terminal_browser.py). The program sees the new
size, the agent's own `write {resize}` rules and errors hold, a size is not input, and the
route is refused as typing is: without control, from a foreign page, unsigned."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from frontend_servers import (
    HttpServer,
    agent_call,
    control_http,
    dashboard_post,
    kill_group,
    rest_until,
    sign_in,
    start_http,
)

TOKEN = "tok-resize-7Lw-secret"
# prints its terminal's size at the start and after each line read
SIZES = "stty size; while read -r x; do stty size; done"


call = agent_call


post = dashboard_post


def resize(srv: HttpServer, job_id: str, body: Any, **headers: str) -> tuple[int, Any]:
    return post(srv, f"/api/jobs/{job_id}/resize", body, headers)


def pty(srv: HttpServer, script: str) -> str:
    job = call(srv, "exec", {"argv": ["bash", "-c", script], "pty": True, "yield_ms": 500})
    assert job.get("output") == "50 200\n", job  # a terminal starts at 50 x 200
    return str(job["job_id"])


def screen_size(srv: HttpServer, job_id: str) -> tuple[int, int]:
    snap = call(srv, "read", {"job_id": job_id, "screen": True})
    return snap["screen"]["rows"], snap["screen"]["cols"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    with control_http(tmp_path) as srv:
        yield srv


def test_a_person_resizes_a_running_terminal_and_the_program_sees_it(server: HttpServer):
    job = pty(server, SIZES)
    status, body = resize(server, job, {"rows": 33, "cols": 77})
    assert (status, body) == (200, {"rows": 33, "cols": 77})
    assert screen_size(server, job) == (33, 77)  # the screen follows at once
    # not input: the job is not attended, the agent hears of no person, its write is not busy
    got = call(server, "write", {"job_id": job, "keys": ["enter"]})
    assert "error" not in got and "attended" not in got and "human_input" not in got, got
    rest = rest_until(server, job, got, "33 77\n")
    assert (got["output"] + rest["output"]).endswith("33 77\n"), (got, rest)
    assert "attended" not in rest and "human_input" not in rest, rest
    # the recording has the resize, as for the agent's own
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", f"/api/jobs/{job}/cast")
    events = [json.loads(line) for line in conn.getresponse().read().decode().splitlines()[1:]]
    conn.close()
    assert [e[2] for e in events if e[1] == "r"] == ["77x33"]
    # while the person has the terminal, they may still fit it (no busy check for them)
    assert post(server, f"/api/jobs/{job}/input", {"keys": ["enter"]})[0] == 200
    assert resize(server, job, {"rows": 20, "cols": 60}) == (200, {"rows": 20, "cols": 60})
    post(server, f"/api/jobs/{job}/input", {"keys": ["enter"]})
    done = call(server, "read", {"job_id": job, "wait_ms": 3000, "until": {"pattern": "20 60"}})
    assert "20 60\n" in done["output"] and done["attended"] is True, done
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_a_shell_commands_terminal_is_resized_for_it_and_the_commands_after(server: HttpServer):
    sh = call(server, "shell_open", {})
    assert "shell_id" in sh, sh
    job = call(server, "exec", {"shell_id": sh["shell_id"], "command": SIZES, "yield_ms": 500})
    assert "job_id" in job, job
    job_id = job["job_id"]
    assert resize(server, job_id, {"rows": 24, "cols": 90}) == (200, {"rows": 24, "cols": 90})
    got = call(server, "write", {"job_id": job_id, "keys": ["enter"]})
    rest = rest_until(server, job_id, got, "24 90\n")
    assert (got["output"] + rest["output"]).endswith("24 90\n"), (got, rest)
    call(server, "write", {"job_id": job_id, "keys": ["ctrl-d"]})
    call(server, "read", {"job_id": job_id, "wait_ms": 3000, "until": "exit"})
    after = call(server, "exec", {"shell_id": sh["shell_id"], "command": "stty size"})
    assert after["output"] == "24 90\n", after
    call(server, "signal", {"shell_id": sh["shell_id"]})


def test_bad_sizes_and_jobs_without_a_terminal_get_writes_own_errors(server: HttpServer):
    job = pty(server, SIZES)
    for bad in (
        {"rows": 1, "cols": 80},
        {"rows": 24, "cols": 1001},
        {"rows": "24", "cols": 80},
        {"rows": True, "cols": 80},
        {"rows": 24},
        {"rows": 24, "cols": 80, "x": 1},
    ):
        status, body = resize(server, job, bad)
        agent = call(server, "write", {"job_id": job, "resize": bad})
        assert status == 400 and body["error"]["code"] == "invalid_argument", (bad, body)
        assert body["error"]["message"] == agent["error"]["message"], (bad, body, agent)
    for raw in (b"[24, 80]", b"not json", b'"24x80"'):
        status, body = resize(server, job, raw)
        assert status == 400 and body["error"]["message"] == "the body must be a JSON object"
    assert screen_size(server, job) == (50, 200)
    pipe = call(server, "exec", {"command": "sleep 30", "yield_ms": 0})["job_id"]
    status, body = resize(server, pipe, {"rows": 24, "cols": 80})
    agent = call(server, "write", {"job_id": pipe, "resize": {"rows": 24, "cols": 80}})
    assert status == 400 and body["error"] == agent["error"], (body, agent)
    assert "pipes" in body["error"]["message"]
    call(server, "signal", {"job_id": job, "signal": "kill"})
    call(server, "signal", {"job_id": pipe, "signal": "kill"})
    call(server, "read", {"job_id": job, "wait_ms": 3000, "until": "exit"})
    status, body = resize(server, job, {"rows": 24, "cols": 80})
    assert status == 409 and body["error"]["code"] == "not_running", body
    status, body = resize(server, "j_nosuchjob", {"rows": 24, "cols": 80})
    assert status == 404 and body["error"]["code"] == "not_found", body


def test_without_dashboard_control_resizing_is_refused(tmp_path: Path):
    srv = start_http(tmp_path)
    try:
        job = pty(srv, SIZES)
        status, body = resize(srv, job, {"rows": 24, "cols": 80})
        assert status == 403 and "dashboard control is off" in body["error"]["message"]
        assert screen_size(srv, job) == (50, 200)
        call(srv, "signal", {"job_id": job, "signal": "kill"})
    finally:
        kill_group(srv.proc)


def test_resizing_is_refused_from_a_foreign_page_and_without_origin_when_signed_in(
    tmp_path: Path,
):
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    try:
        job = pty(srv, SIZES)
        status, headers, _ = sign_in(srv.port, TOKEN)
        assert status == 303
        cookie = {"Cookie": headers["set-cookie"].split(";")[0]}
        size = {"rows": 24, "cols": 80}
        assert resize(srv, job, size)[0] == 401  # neither token nor cookie
        assert resize(srv, job, size, **cookie, Origin="http://evil.example")[0] == 403
        assert resize(srv, job, size, **cookie)[0] == 403  # a cookie without Origin
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert resize(srv, job, size, **bearer, Origin="http://evil.example")[0] == 403
        assert screen_size(srv, job) == (50, 200)
        same = {**cookie, "Origin": f"http://127.0.0.1:{srv.port}"}
        assert resize(srv, job, size, **same) == (200, size)
        assert screen_size(srv, job) == (24, 80)
        call(srv, "signal", {"job_id": job, "signal": "kill"})
    finally:
        kill_group(srv.proc)
