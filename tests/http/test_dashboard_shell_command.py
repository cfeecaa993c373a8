"""A person runs a command in an idle shell from the dashboard (issue 23): ``POST
/api/shells/{id}/exec`` of a real `conch serve --http --dashboard-control`, a real bash, no
browser (the page's command box that posts it: tests/http/test_terminal_browser.py). The
command runs as the shell's next one and its state persists for the agent; its job is attended
from the start; the agent hears that a person used its shell and how many bytes, never the
command; the route is refused as typing is."""

from __future__ import annotations

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
    http_get,
    kill_group,
    sign_in,
    start_http,
)

TOKEN = "tok-shellcmd-4Qe-secret"
MARK = "person-typed-this-Xq7"


call = agent_call


def run_as_person(srv: HttpServer, shell_id: str, body: Any, **headers: str) -> tuple[int, Any]:
    return dashboard_post(srv, f"/api/shells/{shell_id}/exec", body, headers)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    with control_http(tmp_path) as srv:
        yield srv


def agent_results(*results: Any) -> str:
    return json.dumps(results)


def test_a_persons_command_runs_in_the_agents_shell_and_the_agent_hears_only_that(
    server: HttpServer, tmp_path: Path
):
    sh = call(server, "shell_open", {})["shell_id"]
    where = tmp_path / "chosen"
    where.mkdir()
    command = f"cd {where} && export PERSON={MARK} && read -r x && echo got-$x"
    status, body = run_as_person(server, sh, {"command": command})
    assert status == 200 and body["attended"] is True and body["job_id"].startswith("j_"), body
    job = body["job_id"]
    # the shell runs it: the agent's own command waits (shell_busy), its write is busy
    busy = call(server, "exec", {"shell_id": sh, "command": "true"})
    assert busy["error"]["code"] == "shell_busy", busy
    typed = call(server, "write", {"job_id": job, "text": "no"})
    assert typed["error"]["code"] == "busy" and typed["error"]["retryable"] is True, typed
    # the person answers the prompt in its terminal
    typing = {"text": "yes", "keys": ["enter"]}
    assert dashboard_post(server, f"/api/jobs/{job}/input", typing)[0] == 200
    done = call(server, "read", {"job_id": job, "wait_ms": 5000, "until": "exit"})
    assert done["state"] == "exited" and done["output"].strip().endswith("got-yes"), done
    assert done["human_input"]["bytes"] == len(command) + 1 + len("yes") + 1, done
    # what the shell now is persists for the agent; told once, so not again here
    after = call(server, "exec", {"shell_id": sh, "command": "pwd; echo $PERSON"})
    assert after["output"] == f"{where}\n{MARK}\n", after
    assert "human_input" not in after, after
    # the agent is told the command ran, never what it was: no result or listing names it
    listing = call(server, "list", {})
    assert any(j["job_id"] == job for j in listing["jobs"]), listing
    assert MARK not in agent_results(done, listing, busy, typed)
    # the person's page shows what they ran (as every job's command is shown there)
    page_jobs = json.loads(http_get(server, "/api/jobs", server_auth(server))[1])
    mine = next(j for j in page_jobs["jobs"] if j["job_id"] == job)
    assert mine["what"] == command and "person" in mine["purpose"], mine
    call(server, "signal", {"shell_id": sh})


def test_the_agents_next_command_in_the_shell_says_a_person_used_it(server: HttpServer):
    sh = call(server, "shell_open", {})["shell_id"]
    command = f"export PERSON={MARK}"
    status, body = run_as_person(server, sh, {"command": command})
    assert status == 200, body
    # the agent never read the person's job: its next command in the shell carries the news
    for _ in range(50):
        nxt = call(server, "exec", {"shell_id": sh, "command": "echo $PERSON"})
        if nxt.get("error", {}).get("code") != "shell_busy":
            break
    assert nxt["output"] == f"{MARK}\n", nxt
    assert set(nxt["human_input"]) == {"at", "bytes"}, nxt
    assert nxt["human_input"]["bytes"] == len(command) + 1, nxt
    assert "attended" not in nxt, nxt  # the agent's own command is not held for the person
    again = call(server, "exec", {"shell_id": sh, "command": "true"})
    assert "human_input" not in again, again  # reported once
    person = call(server, "read", {"job_id": body["job_id"]})
    assert "human_input" not in person, person  # nor again on the person's job
    call(server, "signal", {"shell_id": sh})


def test_bad_bodies_busy_and_unknown_shells_are_refused(server: HttpServer):
    sh = call(server, "shell_open", {})["shell_id"]
    for bad in (
        {},
        {"command": ""},
        {"command": "   "},
        {"command": 7},
        {"command": "true", "cwd": "/"},
        {"command": "a\x00b"},
        {"command": "x" * (64 * 1024 + 1)},
    ):
        status, body = run_as_person(server, sh, bad)
        assert status == 400 and body["error"]["code"] == "invalid_argument", (bad, body)
    status, body = run_as_person(server, sh, b"[1]")
    assert status == 400 and body["error"]["message"] == "the body must be a JSON object"
    running = call(server, "exec", {"shell_id": sh, "command": "sleep 30", "yield_ms": 0})
    status, body = run_as_person(server, sh, {"command": "true"})
    assert status == 409 and body["error"]["code"] == "shell_busy", body
    status, body = run_as_person(server, "s_nosuchshell", {"command": "true"})
    assert status == 404 and body["error"]["code"] == "not_found", body
    call(server, "signal", {"job_id": running["job_id"], "signal": "kill"})
    call(server, "signal", {"shell_id": sh})


def test_without_control_or_from_a_foreign_page_a_persons_command_is_refused(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    srv = start_http(tmp_path / "a")
    try:
        sh = call(srv, "shell_open", {})["shell_id"]
        status, body = run_as_person(srv, sh, {"command": "touch nope"})
        assert status == 403 and "dashboard control is off" in body["error"]["message"]
    finally:
        kill_group(srv.proc)
    srv = start_http(tmp_path / "b", "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    try:
        sh = call(srv, "shell_open", {})["shell_id"]
        status, headers, _ = sign_in(srv.port, TOKEN)
        assert status == 303
        cookie = {"Cookie": headers["set-cookie"].split(";")[0]}
        cmd = {"command": "true"}
        assert run_as_person(srv, sh, cmd)[0] == 401  # neither token nor cookie
        assert run_as_person(srv, sh, cmd, **cookie, Origin="http://evil.example")[0] == 403
        assert run_as_person(srv, sh, cmd, **cookie)[0] == 403  # a cookie without Origin
        assert call(srv, "list", {})["jobs"] == []  # nothing ran
        same = {**cookie, "Origin": f"http://127.0.0.1:{srv.port}"}
        assert run_as_person(srv, sh, cmd, **same)[0] == 200
    finally:
        kill_group(srv.proc)


def server_auth(srv: HttpServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {srv.token}"} if srv.token else {}
