"""Guessing the token is throttled per peer (a local user, or an address): past 5 wrong tokens a
minute that peer's tries are looked at one at a time, each wrong one answered 429 (with
Retry-After) only after 12 s; a right token always passes. Another user's wrong tokens never
touch the agent (tests/http/test_http_peers.py)."""

from __future__ import annotations

import asyncio
import http.client
import time
from pathlib import Path

import pytest
from frontend_servers import kill_group, sign_in, start_http

from conch.http.signin import Throttle, wrong_token

pytestmark = pytest.mark.anyio

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


async def test_over_the_limit_tries_take_turns_and_a_right_token_still_passes():
    t = Throttle(limit=2, window_s=1.0)  # 0.5 s a try over the limit
    t.failed("a")
    t.failed("a")
    ends: dict[str, float] = {}
    start = time.monotonic()

    async def attempt(name: str, right: bool) -> None:
        async with t.turn("a"):
            if right:
                t.succeeded("a")
            else:
                assert await wrong_token(t, "a") > 0  # a 429, answered after its turn
        ends[name] = time.monotonic() - start

    async def other_peer() -> None:
        async with t.turn("b"):  # another peer: no turn to wait for
            ends["b"] = time.monotonic() - start

    await asyncio.gather(attempt("wrong", False), attempt("right", True), other_peer())
    assert ends["b"] < 0.2
    assert 0.45 <= ends["wrong"] < 1.0  # the wrong one took its 0.5 s
    assert ends["wrong"] <= ends["right"] < 1.0  # the right one waited for it, then passed
    assert t.retry_after("a") == 0.0  # and cleared the peer's failures


def test_a_real_server_slows_a_sixth_wrong_try_but_lets_the_right_token_in(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        status, _, _ = sign_in(srv.port, TOKEN)
        assert status == 303  # signing in works, and a success leaves no failures behind
        for _ in range(5):
            status, _, body = sign_in(srv.port, "wrong")
            assert status == 401 and "not right" in body
        t0 = time.monotonic()
        status, headers, body = sign_in(srv.port, "wrong")  # over the limit: 12 s, then 429
        assert time.monotonic() - t0 >= 11.5
        assert status == 429 and "Too many wrong tokens" in body
        assert 1 <= int(headers["retry-after"]) <= 60
        assert "set-cookie" not in headers
        t0 = time.monotonic()
        status, headers, _ = sign_in(srv.port, TOKEN)  # the right one: at once
        assert status == 303 and "set-cookie" in headers
        assert time.monotonic() - t0 < 5
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
    past five, that peer's next wrong try on any route is slowed and answered 429."""
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
        status, _, _ = sign_in(srv.port, "wrong")
        assert status == 429  # the same peer, whatever its headers said
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "X-Forwarded-For": "10.1.1.1",
            "Content-Type": "application/json",
        }
        status, _, body = _request(srv.port, *invoke[:2], headers, invoke[2])
        assert status == 200, (status, body)  # a right token always passes
    finally:
        kill_group(srv.proc)
