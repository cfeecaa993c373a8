"""Who may use a Conch HTTP server: over loopback without a token only the server's own user
(told from the socket's owner in /proc/net/tcp), with a token whoever presents it; the token
throttle counts each peer user apart, and a right token always passes. A real second local
user (tests/support/local_user.py) is the other peer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from frontend_servers import HttpServer, agent_call, http_get, kill_group, start_http
from local_user import PYTHON, LocalUser

from conch.core import socket_uid
from conch.core.process import peer
from conch.http.peers import user_name

TOKEN = "tok-peers-8Rk2-secret"
# every route, with a request that would succeed if it were allowed
ROUTES = [
    ("GET", "/", ""),
    ("GET", "/health", ""),
    ("GET", "/manifest", ""),
    ("GET", "/api/jobs", ""),
    ("POST", "/invoke", '{"method": "exec", "params": {"command": "id -u"}}'),
    ("POST", "/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'),
    ("GET", "/sse", ""),
    ("POST", "/messages/?session_id=00000000000000000000000000000000", "{}"),
]
# run by the other user with the system's Python: each request's status and the start of its
# answer, one JSON line each
CLIENT = r"""
import http.client, json, sys
port, requests, auth = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for method, path, body in requests:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if auth:
        headers["Authorization"] = auth
    conn.request(method, path, body=body or None, headers=headers)
    resp = conn.getresponse()
    stream = resp.getheader("content-type", "").startswith("text/event-stream")
    text = "" if stream else resp.read().decode(errors="replace")[:600]
    print(json.dumps([path, resp.status, text]), flush=True)
    conn.close()
"""


def as_user(
    user: LocalUser, srv: HttpServer, routes: list[tuple[str, str, str]], auth: str = ""
) -> list[tuple[str, int, str]]:
    r = user.python(CLIENT, str(srv.port), json.dumps(routes), auth)
    assert r.returncode == 0, r.stderr
    return [tuple(json.loads(line)) for line in r.stdout.splitlines()]  # type: ignore[misc]


def test_another_local_user_is_refused_on_every_route_without_a_token(
    http_server: HttpServer, other_user: LocalUser
):
    agent_call(http_server, "exec", {"command": "echo the-agents-secret-output"})
    answers = as_user(other_user, http_server, ROUTES)
    assert len(answers) == len(ROUTES)
    for path, status, text in answers:
        assert status == 403, (path, status, text)
        assert "takes requests from root (uid 0) only" in text, text
        assert f"{other_user.name} (uid {other_user.uid})" in text, text
        assert "the-agents-secret-output" not in text
    # curl too, as the red team ran it
    r = other_user.run(
        "curl", "-s", "-w", "\n%{http_code}", f"http://127.0.0.1:{http_server.port}/invoke",
        "-d", '{"method":"exec","params":{"command":"id -u"}}',
    )  # fmt: skip
    assert r.stdout.endswith("\n403") and "Forbidden" in r.stdout, r.stdout
    # the server's own user is served as before
    assert http_get(http_server, "/health")[0] == 200
    assert agent_call(http_server, "exec", {"command": "id -u"})["output"] == "0\n"


def test_with_a_token_another_local_user_needs_it_and_gets_in_with_it(
    tmp_path: Path, other_user: LocalUser
):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        without = as_user(other_user, srv, ROUTES[1:2] + ROUTES[4:5])
        assert [status for _, status, _ in without] == [401, 401], without
        right = as_user(other_user, srv, ROUTES[1:2] + ROUTES[4:5], f"Bearer {TOKEN}")
        assert [status for _, status, _ in right] == [200, 200], right
        assert json.loads(right[1][2])["output"] == "0\n"  # the token is the server's user
    finally:
        kill_group(srv.proc)


def test_serve_says_at_start_who_may_connect(tmp_path: Path, http_server: HttpServer):
    me = user_name(os.geteuid())
    line = f"conch: only {me} may connect (over loopback); other local users are refused"
    assert line in http_server.stderr()
    (tmp_path / "t").mkdir()
    srv = start_http(tmp_path / "t", "--auth-token", TOKEN, token=TOKEN)
    try:
        assert "conch: any client that presents the token" in srv.stderr()
    finally:
        kill_group(srv.proc)


def test_another_users_wrong_tokens_never_lock_out_the_agents_right_token(
    tmp_path: Path, other_user: LocalUser
):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        health = [("GET", "/health", "")] * 6
        got = as_user(other_user, srv, health, "Bearer wrong")  # the 6th waits its turn
        assert [status for _, status, _ in got] == [401] * 5 + [429], got
        t0 = time.monotonic()
        ok = agent_call(srv, "exec", {"command": "echo ok"})
        assert ok["output"] == "ok\n" and time.monotonic() - t0 < 5, ok
        # and the agent's own wrong token counts for the agent alone: 401, not 429
        status, _ = http_get(srv, "/health", {"Authorization": "Bearer wrong"})
        assert status == 401
    finally:
        kill_group(srv.proc)


def test_a_right_token_passes_after_the_same_users_wrong_ones(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        for _ in range(5):
            assert http_get(srv, "/health", {"Authorization": "Bearer wrong"})[0] == 401
        assert http_get(srv, "/health", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        kill_group(srv.proc)


def test_the_owner_of_a_loopback_socket_is_told_alike_by_sock_diag_and_the_table(
    other_user: LocalUser,
):
    """The user who made the client's socket, whichever way it is asked; and nobody once its
    process has closed it (a socket without a file: some kernels show uid 0 for it)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    theirs = subprocess.Popen(
        other_user.argv(
            PYTHON,
            "-c",
            "import socket, sys\n"
            f"s = socket.create_connection(('127.0.0.1', {port}))\n"
            "s.sendall(b'GET / HTTP/1.1\\r\\n\\r\\n')\n"
            "print(s.getsockname()[1], flush=True)\n"
            "sys.stdin.readline()\n"
            "s.close()\n"
            "print('closed', flush=True)\n"
            "sys.stdin.read()",
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    mine = socket.create_connection(("127.0.0.1", port))
    accepted = []
    try:
        assert theirs.stdout is not None and theirs.stdin is not None
        their_port = int(theirs.stdout.readline())
        accepted = [listener.accept()[0], listener.accept()[0]]
        server = listener.getsockname()
        for client, uid in (
            (mine.getsockname(), os.geteuid()),
            (("127.0.0.1", their_port), other_user.uid),
        ):
            assert socket_uid(client, server) == uid
            assert peer.diag_socket_uid(client, server) == uid  # the kernel's exact lookup
            assert peer.table_socket_uid(client, server) == uid  # /proc/net/tcp
        gone = ("127.0.0.1", 1)  # no such connection: nobody's
        assert socket_uid(gone, server) is None and peer.table_socket_uid(gone, server) is None
        theirs.stdin.write("\n")  # their process closes its end (which our end has not)
        theirs.stdin.flush()
        assert theirs.stdout.readline() == "closed\n"
        closed = ("127.0.0.1", their_port)
        assert peer.diag_socket_uid(closed, server) is None
        assert peer.table_socket_uid(closed, server) is None
    finally:
        theirs.kill()
        theirs.communicate()
        for s in (mine, listener, *accepted):
            s.close()


@pytest.mark.anyio
async def test_a_secret_page_refuses_another_local_user(other_user: LocalUser):
    """The one-time secret pages (--secret-prompt elicit) run a small server of their own
    behind the same guard: another user who learns a page's address gets 403."""
    from conch.http.secret_page import LoopbackSecretPages

    typed: list[str] = []

    async def deliver(value: str) -> bool:
        typed.append(value)
        return True

    pages = LoopbackSecretPages()
    try:
        page = await pages.open("[sudo] password for root:", deliver)
        curl = ("curl", "-s", "-w", "\n%{http_code}")
        theirs = await anyio.to_thread.run_sync(
            lambda: other_user.run(*curl, "--data-urlencode", "secret=x", page.url)
        )
        assert theirs.stdout.endswith("\n403") and "takes requests from" in theirs.stdout
        assert typed == [] and pages.usable(page.page_id)  # still there for the person
        mine = await anyio.to_thread.run_sync(
            lambda: subprocess.run([*curl, page.url], capture_output=True, text=True)
        )
        assert mine.stdout.endswith("\n200"), mine.stdout[-200:]
    finally:
        await pages.aclose()
