"""The place the host tests run Claude Code in (claude_offline.py) sees every attempt to leave
loopback, so "it recorded nothing" means something."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from claude_offline import Offline


@pytest.fixture
def offline() -> Iterator[Offline]:
    o = Offline()
    try:
        yield o
    finally:
        o.close()


def python_there(offline: Offline, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python started where the host would be, with its proxy variables."""
    env = {"PATH": "/usr/bin:/bin"} | offline.proxy_env
    cmd = [sys.executable, "-c", code]
    return offline.call(
        lambda: subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    )


def needs_sinkhole(offline: Offline) -> None:
    if not offline.sinkhole:
        pytest.skip(f"no sinkhole here: {offline.describe()}")


def test_loopback_still_works(offline: Offline):
    server = offline.call(lambda: socket.create_server(("127.0.0.1", 0)))
    with server:
        port = server.getsockname()[1]
        r = python_there(offline, f"import socket; socket.create_connection(('127.0.0.1', {port}))")
    assert r.returncode == 0, r.stderr
    assert offline.attempts() == []


def test_a_proxied_request_is_refused_and_recorded(offline: Offline):
    r = python_there(
        offline, "import urllib.request; urllib.request.urlopen('https://example.org/')"
    )
    assert r.returncode != 0
    [attempt] = offline.attempts()
    assert attempt.startswith("proxy: 'CONNECT example.org:443 HTTP/1.")


def test_a_name_lookup_is_recorded(offline: Offline):
    needs_sinkhole(offline)
    r = python_there(offline, "import socket; socket.getaddrinfo('example.org', 443)")
    assert r.returncode != 0
    assert set(offline.attempts()) == {"dns: lookup of 'example.org'"}


def test_a_connection_to_an_address_off_loopback_is_recorded(offline: Offline):
    needs_sinkhole(offline)
    code = (
        "import socket; c = socket.create_connection(('192.0.2.77', 443)); c.send(b'hi'); c.recv(1)"
    )
    python_there(offline, code)
    assert offline.attempts() == ["tcp: connection to 192.0.2.77:443, first bytes b'hi'"]
