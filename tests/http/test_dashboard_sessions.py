"""The dashboard's sign-in is a session this server run keeps, not a bearer value: bound to the
user who signed in, expiring, revoked at /logout, unknown to another run or another server;
and every control action also needs the token of a page of that session (the browser tests:
tests/http/test_dashboard_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

from frontend_servers import (
    HttpServer,
    agent_call,
    dashboard_post,
    http_get,
    http_post,
    kill_group,
    page_token,
    sign_in,
    start_http,
)
from local_user import LocalUser

from conch.http.peers import Peer
from conch.http.signin import Sessions

TOKEN = "tok-sessions-2Vn8-secret"
ME = Peer("127.0.0.1", True, 0)
OTHER = Peer("127.0.0.1", True, 1001)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_bound_to_its_peer_and_ends_when_idle_old_or_revoked():
    clock = Clock()
    sessions = Sessions(clock=clock, max_s=100.0, idle_s=30.0)
    sid = sessions.create(ME)
    assert sessions.check(sid, ME)
    assert not sessions.check(sid, OTHER)  # another user with the same cookie
    assert not sessions.check(sid, Peer("10.0.0.1", False))
    assert not sessions.check("forged", ME) and not sessions.check(None, ME)
    for _ in range(3):  # used every 29 s it stays...
        clock.now += 29
        assert sessions.check(sid, ME)
    clock.now += 14  # ...until 100 s after signing in (now 101)
    assert not sessions.check(sid, ME)
    idle = sessions.create(ME)
    clock.now += 30  # 30 s without a request
    assert not sessions.check(idle, ME)
    gone = sessions.create(ME)
    sessions.revoke(gone)
    assert not sessions.check(gone, ME)
    assert not Sessions().check(sessions.create(ME), ME)  # another run knows none of them


def test_page_tokens_are_bound_to_their_session_and_run():
    sessions = Sessions()
    token = sessions.page_token("session:a")
    assert sessions.page_token_valid(token, "session:a")
    another_page = sessions.page_token("session:a")  # a new one per page, as good
    assert another_page != token and sessions.page_token_valid(another_page, "session:a")
    assert not sessions.page_token_valid(token, "session:b")
    assert not sessions.page_token_valid(token, "peer:uid:0")
    assert not Sessions().page_token_valid(token, "session:a")
    for bad in (None, "", ".", token.split(".")[0], token + "x", "x." + token.split(".")[1]):
        assert not sessions.page_token_valid(bad, "session:a")


def cookie_of(srv: HttpServer) -> dict[str, str]:
    status, headers, _ = sign_in(srv.port, TOKEN)
    assert status == 303, status
    return {"Cookie": headers["set-cookie"].split(";")[0]}


def test_a_cookie_dies_at_logout_and_means_nothing_to_another_run_or_server(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    srv = start_http(tmp_path / "a", "--auth-token", TOKEN, token=TOKEN)
    other = start_http(tmp_path / "b", "--auth-token", TOKEN, token=TOKEN)
    try:
        cookie = cookie_of(srv)
        assert http_get(srv, "/api/jobs", cookie)[0] == 200
        # another Conch server with the same token (another port, or this one restarted)
        assert http_get(other, "/api/jobs", cookie)[0] == 401
        assert http_post(srv, "/logout", b"", cookie)[0] == 303
        assert http_get(srv, "/api/jobs", cookie)[0] == 401  # revoked here, not only forgotten
        later = cookie_of(srv)
        kill_group(srv.proc)
        srv = start_http(tmp_path / "a", "--auth-token", TOKEN, token=TOKEN)
        assert http_get(srv, "/api/jobs", later)[0] == 401
    finally:
        kill_group(srv.proc)
        kill_group(other.proc)


def test_another_local_user_replaying_the_cookie_gets_nothing(
    tmp_path: Path, other_user: LocalUser
):
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    try:
        shell = agent_call(srv, "shell_open", {})["shell_id"]
        cookie = cookie_of(srv)
        page = str(page_token(srv.port, cookie))
        replay = r"""
import json, sys, urllib.error, urllib.request
base, cookie, page, shell = sys.argv[1:5]
headers = {"Cookie": cookie, "Origin": base, "X-Conch-Page-Token": page,
           "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
out = []
for path, body in (("/api/jobs", None), ("/", None),
                   (f"/api/shells/{shell}/exec", json.dumps({"command": "true"}).encode())):
    req = urllib.request.Request(base + path, data=body, headers=headers)
    try:
        out.append(urllib.request.urlopen(req, timeout=30).status)
    except urllib.error.HTTPError as e:
        out.append(e.code)
print(json.dumps(out))
"""
        r = other_user.python(replay, srv.url, cookie["Cookie"], page, shell)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == [401, 401, 401]  # the sign-in form, not the dashboard
        assert agent_call(srv, "list", {})["jobs"] == []  # nothing ran
        assert http_get(srv, "/api/jobs", cookie)[0] == 200  # the person's session lives on
    finally:
        kill_group(srv.proc)


def test_control_actions_need_the_token_of_a_page_of_the_same_session(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    try:
        shell = agent_call(srv, "shell_open", {})["shell_id"]
        path, body = f"/api/shells/{shell}/exec", {"command": "true"}
        mine, theirs = cookie_of(srv), cookie_of(srv)
        origin = {"Origin": srv.url}
        own = str(page_token(srv.port, mine))
        foreign = str(page_token(srv.port, theirs))  # another session's page
        for headers in (
            {**mine, **origin},
            {**mine, **origin, "X-Conch-Page-Token": foreign},
            {**mine, **origin, "X-Conch-Page-Token": own, "Sec-Fetch-Site": "same-site"},
        ):
            status, answer = http_post(srv, path, body, headers)
            assert status == 403, (headers, answer)
        assert agent_call(srv, "list", {})["jobs"] == []
        headers = {**mine, **origin, "X-Conch-Page-Token": own, "Sec-Fetch-Site": "same-origin"}
        status, ran = http_post(srv, path, body, headers)
        assert status == 200, ran
        agent_call(srv, "read", {"job_id": ran["job_id"], "wait_ms": 5000, "until": "exit"})
        # a client that sends the bearer token itself plays no page: it needs none
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert http_post(srv, path, body, bearer)[0] == 200
    finally:
        kill_group(srv.proc)
    # without a token the page's token is needed all the same (bound to the user it was
    # served to)
    (tmp_path / "open").mkdir()
    srv = start_http(tmp_path / "open", "--dashboard-control")
    try:
        shell = agent_call(srv, "shell_open", {})["shell_id"]
        path = f"/api/shells/{shell}/exec"
        assert http_post(srv, path, {"command": "true"})[0] == 403
        assert dashboard_post(srv, path, {"command": "true"})[0] == 200
    finally:
        kill_group(srv.proc)
