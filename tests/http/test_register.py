"""Gateway registration (`conch serve --http --register URL`: conch.http.register) against a
real gateway on 127.0.0.1. (`conch service`, which may install such a server, is tested in
tests/cli/test_service.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from frontend_servers import free_port, kill_group, start_http

from conch.config import Config
from conch.errors import ConfigError
from conch.http.app import ConchHTTP
from conch.http.register import RETRY_INTERVAL_S, Registrar, gateway_url

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


# -- a tiny gateway --------------------------------------------------------------------------------


class Gateway:
    """POST /services (the first `fail_first` answered 503), GET /services, DELETE
    /services/<id>; records what it saw."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.lock = threading.Lock()
        self.services: dict[str, dict[str, Any]] = {}
        self.posts: list[dict[str, Any]] = []
        self.rejected = 0
        self.deletes: list[str] = []
        gw = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with gw.lock:
                    if self.path != "/services":
                        return self.reply(404, {"error": "no such route"})
                    if gw.fail_first > 0:
                        gw.fail_first -= 1
                        gw.rejected += 1
                        return self.reply(503, {"error": "gateway starting"})
                    gw.posts.append(body)
                    gw.services[body["id"]] = body
                self.reply(200, {"ok": True})

            def do_GET(self) -> None:
                with gw.lock:
                    entries = [{"id": k, "port": v["port"]} for k, v in gw.services.items()]
                self.reply(200, {"services": entries})

            def do_DELETE(self) -> None:
                sid = self.path.removeprefix("/services/")
                with gw.lock:
                    gw.deletes.append(sid)
                    gw.services.pop(sid, None)
                self.reply(200, {"ok": True})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway()
    try:
        yield gw
    finally:
        gw.close()


def get_json(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- registration ---------------------------------------------------------------------------------


def test_gateway_url_accepts_local_http_base_urls_only():
    assert gateway_url("http://127.0.0.1:36908") == "http://127.0.0.1:36908"
    assert gateway_url(" http://localhost:9/ ") == "http://localhost:9"
    assert gateway_url("http://[::1]:9") == "http://[::1]:9"
    assert gateway_url("http://127.0.0.2:9") == "http://127.0.0.2:9"
    bad = {
        "https://127.0.0.1:9": "plain-http",
        "ftp://127.0.0.1:9": "plain-http",
        "127.0.0.1:9": "plain-http",
        "http://user:pw@127.0.0.1:9": "credentials",
        "http://user@127.0.0.1:9": "credentials",
        "http://example.com:9": "this machine",
        "http://10.0.0.1:9": "this machine",
        "http://0.0.0.0:9": "this machine",
        "http://127.0.0.1:9/gateway": "base URL",
        "http://127.0.0.1:9/?x=1": "base URL",
        "http://127.0.0.1:99999": "not a valid URL",
    }
    for url, words in bad.items():
        with pytest.raises(ConfigError) as e:
            gateway_url(url)
        assert str(e.value).startswith("register: ") and words in str(e.value), url
    with pytest.raises(ConfigError, match="register: needs a fixed --port"):
        Registrar(Config(port=0, register="http://127.0.0.1:9"))


def test_serve_refuses_a_bad_register_url_at_startup(tmp_path: Path):
    serve = [sys.executable, "-m", "conch", "serve", "--http", "--port", str(free_port())]
    for url in ("https://127.0.0.1:9", "http://192.0.2.1:9", "http://a:b@localhost:9"):
        r = subprocess.run(
            [*serve, "--data-dir", str(tmp_path), "--register", url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert "conch: invalid setting: register: " in r.stderr


@pytest.mark.anyio
async def test_registration_retries_until_the_gateway_answers_and_unregisters_on_stop(
    tmp_path: Path, gateway: Gateway
):
    assert RETRY_INTERVAL_S == 30
    gateway.fail_first = 1
    port = free_port()
    cfg = Config(port=port, data_dir=str(tmp_path / "data"), register=gateway.url + "/")
    service = ConchHTTP(cfg, registrar=Registrar(cfg, interval_s=0.5))
    server = uvicorn.Server(
        uvicorn.Config(service.app(), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    base = f"http://127.0.0.1:{port}"
    try:
        seen: list[tuple[bool, str | None]] = []
        deadline = time.monotonic() + 15
        while not (seen and seen[-1][0]):
            assert time.monotonic() < deadline, seen
            try:
                _, health = await asyncio.to_thread(get_json, base + "/health")
            except OSError:
                await asyncio.sleep(0.05)
                continue
            seen.append((health["registered"], health["registration_error"]))
            await asyncio.sleep(0.05)
        # refused once (503: registered false with the reason), then registered by the retry
        assert seen[0][0] is False
        assert any(not ok and err and "503" in err for ok, err in seen), seen
        assert seen[-1] == (True, None)
        assert gateway.rejected == 1
        entry = gateway.services["conch"]
        assert entry["port"] == port and entry["execution"] == "http"
        assert entry["base_url"] == base and entry["health"] == "/health"
        assert entry["sop"] and {"exec", "read"} <= {m["name"] for m in entry["methods"]}
        assert entry["methods"][0]["input_schema"]["type"] == "object"
        # the invoke API the gateway will call works
        req = urllib.request.Request(
            base + "/invoke",
            data=json.dumps({"method": "exec", "params": {"command": "echo hi"}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        result = await asyncio.to_thread(lambda: json.loads(urllib.request.urlopen(req).read()))
        assert result["exit_code"] == 0
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 20)
    assert gateway.deletes == ["conch"] and "conch" not in gateway.services


def _start_registered(tmp_path: Path, gateway: Gateway) -> Any:
    tmp_path.mkdir()
    srv = start_http(tmp_path, "--register", gateway.url)
    try:
        wait_for(lambda: get_json(srv.url + "/health")[1]["registered"])
    except BaseException:
        kill_group(srv.proc)
        raise
    return srv


def test_stop_unregisters_only_an_entry_that_is_still_ours(tmp_path: Path, gateway: Gateway):
    # ours: SIGTERM unregisters it
    srv = _start_registered(tmp_path / "a", gateway)
    try:
        assert gateway.services["conch"]["port"] == srv.port
        os.kill(srv.proc.pid, signal.SIGTERM)
        assert srv.proc.wait(15) in (0, -signal.SIGTERM)
    finally:
        kill_group(srv.proc)
    assert gateway.deletes == ["conch"] and not gateway.services
    assert "registered 'conch' with" in srv.stderr()

    # a replacement on another port took the id over meanwhile: left alone
    srv = _start_registered(tmp_path / "b", gateway)
    try:
        with gateway.lock:
            gateway.services["conch"] = {"id": "conch", "port": srv.port + 1}
        os.kill(srv.proc.pid, signal.SIGTERM)
        assert srv.proc.wait(15) in (0, -signal.SIGTERM)
    finally:
        kill_group(srv.proc)
    assert gateway.deletes == ["conch"]
    assert gateway.services["conch"]["port"] == srv.port + 1


def test_health_reports_the_error_while_the_gateway_is_down(tmp_path: Path):
    down = f"http://127.0.0.1:{free_port()}"
    srv = start_http(tmp_path, "--register", down)
    try:
        wait_for(lambda: get_json(srv.url + "/health")[1]["registration_error"])
        _, health = get_json(srv.url + "/health")
        assert health["registered"] is False
        assert "unreachable" in health["registration_error"]
    finally:
        kill_group(srv.proc)
    assert "pending" in srv.stderr()


def test_health_without_register_says_not_registered(http_server):
    _, health = get_json(http_server.url + "/health")
    assert health["registered"] is False and health["registration_error"] is None
