"""Guessing the dashboard token is throttled: 5 wrong tokens a minute per client, then 429
with Retry-After (the right token included) until the oldest failure leaves the window."""

from __future__ import annotations

import http.client
from pathlib import Path

from frontend_servers import kill_group, sign_in, start_http

from conch.http.signin import Throttle

TOKEN = "tok-throttle-7Hq2-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_throttle_opens_again_exactly_when_the_oldest_failure_leaves_the_window():
    clock = Clock()
    t = Throttle(limit=3, window_s=10.0, clock=clock)
    for _ in range(3):
        assert t.retry_after("a") == 0.0
        t.failed("a")
        clock.now += 1.0  # failures at 1000, 1001, 1002
    assert t.retry_after("a") == 7.0  # the first leaves at 1010
    assert t.retry_after("b") == 0.0  # per client
    clock.now = 1009.999
    assert t.retry_after("a") > 0
    clock.now = 1010.0
    assert t.retry_after("a") == 0.0  # two failures left in the window
    t.failed("a")
    assert t.retry_after("a") == 1.0  # now 1001, 1002, 1010: 1001 leaves at 1011
    t.succeeded("a")
    assert t.retry_after("a") == 0.0


def test_the_throttle_forgets_the_oldest_client_beyond_its_bound():
    clock = Clock()
    t = Throttle(limit=1, window_s=60.0, clock=clock, max_clients=2)
    t.failed("a")
    t.failed("b")
    t.failed("c")  # "a" is forgotten to keep the table bounded
    assert t.retry_after("a") == 0.0
    assert t.retry_after("b") > 0 and t.retry_after("c") > 0


def test_a_real_server_refuses_a_sixth_try_within_the_minute(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        status, _, _ = sign_in(srv.port, TOKEN)
        assert status == 303  # signing in works, and a success leaves no failures behind
        for _ in range(5):
            status, _, body = sign_in(srv.port, "wrong")
            assert status == 401 and "not right" in body
        status, headers, body = sign_in(srv.port, TOKEN)  # even the right one waits now
        assert status == 429 and "Too many wrong tokens" in body
        assert 1 <= int(headers["retry-after"]) <= 60
        assert "set-cookie" not in headers
    finally:
        kill_group(srv.proc)
    assert TOKEN not in srv.stderr()


def _request(port: int, method: str, path: str, headers: dict[str, str], body: str = ""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode()
    finally:
        conn.close()


def test_forwarded_headers_do_not_make_a_new_client_and_bearer_guesses_count_too(tmp_path: Path):
    """Issue 18.8: the client is the socket's peer (no X-Forwarded-For, Forwarded or
    X-Real-IP makes another one), and wrong bearer tokens on any route count as wrong sign-ins:
    after five, every route answers 429 to that client, the right token included."""
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    invoke = ("POST", "/invoke", '{"method": "info", "params": {}}')
    try:
        for i, route in enumerate([invoke, ("GET", "/api/jobs", ""), invoke, invoke, invoke]):
            method, path, body = route
            headers = {
                "Authorization": "Bearer wrong",
                "Content-Type": "application/json",
                "X-Forwarded-For": f"10.9.8.{i}",
                "Forwarded": f"for=10.9.7.{i}",
                "X-Real-IP": f"10.9.6.{i}",
            }
            status, _, _ = _request(srv.port, method, path, headers, body)
            assert status == 401, (route, status)
        for spoof in ("10.1.1.1", "127.0.0.2"):
            status, _, _ = sign_in(srv.port, "wrong")
            assert status == 429
            headers = {
                "Authorization": f"Bearer {TOKEN}",
                "X-Forwarded-For": spoof,
                "Content-Type": "application/json",
            }
            status, got, body = _request(srv.port, *invoke[:2], headers, invoke[2])
            assert status == 429 and 1 <= int(got["retry-after"]) <= 60, (status, body)
    finally:
        kill_group(srv.proc)
