"""Front-end fixtures: real `conch serve` subprocesses (stdio and HTTP) and the SDK client."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

SERVE = [sys.executable, "-m", "conch", "serve"]


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once pid no longer exists (or is a zombie nobody of ours needs to reap)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def sign_in(port: int, token: str) -> tuple[int, dict[str, str], str]:
    """POST the dashboard's sign-in form: (status, headers with lower-case names, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/login",
            body=f"token={token}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        resp = conn.getresponse()
        body = resp.read().decode()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


def page_token(port: int, headers: dict[str, str] | None = None) -> str | None:
    """The token the dashboard's page (``GET /``, with these credentials) gives its control
    actions, for a client that plays the page (it sends it as ``X-Conch-Page-Token``); None
    when no page is served to them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/", headers=headers or {})
        resp = conn.getresponse()
        page = resp.read().decode()
    finally:
        conn.close()
    if resp.status != 200 or "const PAGE_TOKEN = " not in page:
        return None
    return str(json.loads(page.split("const PAGE_TOKEN = ", 1)[1].split(";", 1)[0]))


def free_port() -> int:
    """A loopback port free now, taken below the kernel's ephemeral range
    (``ip_local_port_range``, 32768 and up here), so that no outgoing connection of a
    parallel test can take it between this check and the server's bind. A parallel test can
    still win it; :func:`start_http` retries then."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server we started: TERM its group, then KILL, then reap."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


@dataclass
class HttpServer:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    stderr_path: Path
    token: str = ""

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


class _PortTaken(RuntimeError):
    pass


def start_http(
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    token: str = "",
    prefix: tuple[str, ...] = (),
) -> HttpServer:
    """``conch serve --http`` on a free port (``prefix``: a command that runs it, such as
    ``prlimit --nofile=…``), once it answers /health. A start that lost its port to a
    parallel test between the check and the bind is tried again on another port."""
    for attempt in range(5):
        try:
            return _start_http_once(tmp, *extra, env=env, token=token, prefix=prefix)
        except _PortTaken:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def _start_http_once(
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    token: str = "",
    prefix: tuple[str, ...] = (),
) -> HttpServer:
    port = free_port()
    err = tmp / f"http-{port}.stderr"
    full_env = {**os.environ, **(env or {})}
    full_env.pop("CONCH_AUTH_TOKEN", None) if "CONCH_AUTH_TOKEN" not in (env or {}) else None
    args = [
        *prefix,
        *SERVE,
        "--http",
        "--port",
        str(port),
        "--data-dir",
        str(tmp / "data"),
        *extra,
    ]
    with open(err, "wb") as errf:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errf,
            env=full_env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    while True:
        if proc.poll() is not None:
            text = err.read_text()
            if "Address already in use" in text:
                raise _PortTaken(text)
            raise RuntimeError(f"server exited {proc.returncode}: {text}")
        try:
            req = urllib.request.Request(url + "/health", headers=headers)
            with urllib.request.urlopen(req, timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            kill_group(proc)
            raise RuntimeError("server did not become healthy")
        time.sleep(0.05)
    return HttpServer(url, port, proc, err, token)


def invoke(srv: HttpServer, method: str, params: Any, *, token: str = "") -> Any:
    """One call of the HTTP invoke API (``POST /invoke``), with a bearer ``token`` if given."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", "/invoke", json.dumps({"method": method, "params": params}), headers)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def agent_call(srv: HttpServer, method: str, params: Any) -> Any:
    """An agent's call through the invoke API, with the server's own token (if it has one)."""
    return invoke(srv, method, params, token=srv.token)


def rest_until(srv: HttpServer, job_id: str, got: dict[str, Any], end: str) -> dict[str, Any]:
    """The output after a ``write``'s result (``got``) until the pattern ``end``, if ``got``
    does not end there already: a write returns once output pauses, and under load the echo
    of Enter may come alone, the program's answer after it."""
    if got.get("output", "").endswith(end):
        return {"output": ""}
    params = {"job_id": job_id, "wait_ms": 5000, "until": {"pattern": end}}
    out: dict[str, Any] = agent_call(srv, "read", params)
    return out


def http_get(
    srv: HttpServer, path: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """(status, body) of a GET to the server (no token unless ``headers`` carry one)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def http_post(
    srv: HttpServer, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """(status, JSON answer or text) of a JSON POST (``body`` as is when bytes)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request("POST", path, raw, {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        data = resp.read()
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode(errors="replace")
    finally:
        conn.close()


def dashboard_post(
    srv: HttpServer, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """A control action as the dashboard's page sends it: :func:`http_post` with the token of
    a page served to the same credentials (``Cookie``, ``Authorization``), if any is."""
    headers = dict(headers or {})
    creds = {k: v for k, v in headers.items() if k.lower() in ("cookie", "authorization")}
    token = page_token(srv.port, creds)
    if token is not None:
        headers.setdefault("X-Conch-Page-Token", token)
    return http_post(srv, path, body, headers)


@contextlib.contextmanager
def control_http(tmp: Path) -> Iterator[HttpServer]:
    """An HTTP server whose dashboard takes typing and sizes (``--dashboard-control``), a
    person's hold lasting a minute; stopped after."""
    srv = start_http(tmp, "--dashboard-control", "--attended-idle-ms", "60000")
    try:
        yield srv
    finally:
        kill_group(srv.proc)
