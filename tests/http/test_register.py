"""Gateway registration (`conch serve --http --register URL`) against a real gateway on
127.0.0.1, and `conch service install|uninstall|status`: unit/plist text, quoting, systemd's own
verifier, and the error path without a systemd user instance."""

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


# -- conch service: quoting and generated text ----------------------------------------------------

HOSTILE = "目录 a%b$c'd\"e"  # Chinese characters, a space, %, $ and both quotes


def test_systemd_exec_arg_quoting():
    from conch.cli.service import systemd_exec_arg

    cases = {
        "plain": '"plain"',
        "a b": '"a b"',
        "50%": '"50%%"',
        "%h": '"%%h"',
        "$HOME ${X}": '"$$HOME $${X}"',
        'say "hi"': '"say \\"hi\\""',
        "it's": '"it\'s"',
        "back\\slash": '"back\\\\slash"',
        "line\nbreak\ttab": '"line\\x0abreak\\x09tab"',
        "目录": '"目录"',
        ";": '";"',
        "": '""',
        HOSTILE: '"目录 a%%b$$c\'d\\"e"',
    }
    for arg, quoted in cases.items():
        assert systemd_exec_arg(arg) == quoted, arg


def test_systemd_environment_and_working_directory_quoting():
    from conch.cli.service import ServiceError, systemd_environment, systemd_path

    # Environment= expands specifiers and unquotes, but does not substitute $
    assert systemd_environment("PATH", f"/usr/bin:/x/{HOSTILE}") == (
        '"PATH=/usr/bin:/x/目录 a%%b$c\'d\\"e"'
    )
    assert systemd_environment("X", "a\\b") == '"X=a\\\\b"'
    # WorkingDirectory= is taken literally: only specifiers need escaping
    assert systemd_path(f"/x/{HOSTILE}") == "/x/目录 a%%b$c'd\"e"
    for bad in ("relative/dir", "/x/trailing ", " /x", "/x/new\nline", "/x/back\\"):
        with pytest.raises(ServiceError):
            systemd_path(bad)


def test_exec_line_routes_paths_systemd_cannot_execute_through_env():
    from conch.cli.service import ServiceError, systemd_exec_line

    assert systemd_exec_line(["/opt/我的 %x/python", "-m", "conch"]) == (
        '"/opt/我的 %%x/python" "-m" "conch"'
    )
    # systemd refuses quotes/backslashes in the executable and would not undo $$ there
    for exe in (f"/opt/{HOSTILE}/python", "/opt/$HOME/python", "/opt/a\\b/python"):
        line = systemd_exec_line([exe, "-m", "conch"], env="/usr/bin/env")
        assert line.startswith('"/usr/bin/env" "/opt/'), line
    with pytest.raises(ServiceError):
        systemd_exec_line(["python", "-m", "conch"])


def test_render_unit():
    from conch.cli.service import render_unit

    text = render_unit(
        ["/venv/bin/python", "-m", "conch", "serve", "--http", "--port", "7786"],
        "/home/u/proj 100%",
        "/usr/bin:/bin",
        "http://127.0.0.1:7786",
    )
    lines = text.splitlines()
    assert 'ExecStart="/venv/bin/python" "-m" "conch" "serve" "--http" "--port" "7786"' in lines
    assert "WorkingDirectory=/home/u/proj 100%%" in lines
    assert 'Environment="PATH=/usr/bin:/bin"' in lines
    assert "Restart=on-failure" in lines and "WantedBy=default.target" in lines
    assert "# conch-url: http://127.0.0.1:7786" in lines


def test_render_plist_escapes_xml_and_round_trips():
    import plistlib

    from conch.cli.service import LAUNCHD_LABEL, ServiceError, render_plist

    argv = ["/Users/u/a&b <c>/python", "-m", "conch", "--data-dir", f"/tmp/{HOSTILE}"]
    text = render_plist(argv, f"/Users/u/{HOSTILE} & co", "/usr/bin:/bin", "/Users/u/L", "u")
    assert "a&amp;b &lt;c&gt;" in text and "&apos;d&quot;e" in text and "& co" not in text
    data = plistlib.loads(text.encode())
    assert data["Label"] == LAUNCHD_LABEL
    assert data["ProgramArguments"] == argv
    assert data["WorkingDirectory"] == f"/Users/u/{HOSTILE} & co"
    assert data["KeepAlive"] == {"SuccessfulExit": False} and data["RunAtLoad"] is True
    assert data["EnvironmentVariables"] == {"PATH": "/usr/bin:/bin"}
    assert data["StandardErrorPath"] == "/Users/u/L/stderr.log"
    with pytest.raises(ServiceError):
        render_plist(["/bin/x\x01"], "/", "/bin", "/tmp", "u")


def _systemd_verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    r = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if "Failed to initialize manager" in r.stderr:  # no user manager possible here
        r = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
        )
    return r


@pytest.mark.skipif(
    sys.platform != "linux" or not __import__("shutil").which("systemd-analyze"),
    reason="needs systemd-analyze",
)
def test_systemd_analyze_verifies_units_with_hostile_paths(tmp_path: Path):
    from conch.cli.service import render_unit

    home = tmp_path / HOSTILE
    home.mkdir()
    plain = home.parent / "我的 python %x"  # executed directly
    plain.symlink_to(sys.executable)
    hostile = home / "py 'q' $HOME"  # executed through env
    hostile.symlink_to(sys.executable)
    for exe in (plain, hostile):
        argv = [str(exe), "-m", "conch", "serve", "--http", "--data-dir", str(home / "d %h $X")]
        unit = home / "conch.service"
        unit.write_text(render_unit(argv, str(home), f"/usr/bin:/bin:{home}", "http://x"))
        r = _systemd_verify(unit, tmp_path)
        assert r.returncode == 0 and "conch.service" not in r.stderr, r.stderr + unit.read_text()
    # the verifier does check the executable: the decoded path must be the real one
    argv = [str(home.parent / "我的 missing %x"), "-m", "conch"]
    unit.write_text(render_unit(argv, str(home), "/usr/bin", "http://x"))
    r = _systemd_verify(unit, tmp_path)
    assert r.returncode != 0 and "我的 missing %x" in r.stderr, r.stderr


# -- conch service: the command --------------------------------------------------------------------


def conch_cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCH_")}
    if home is not None:
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return subprocess.run(
        [sys.executable, "-m", "conch", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_service_help():
    r = conch_cli("service", "--help")
    assert r.returncode == 0
    assert all(a in r.stdout for a in ("install", "uninstall", "status", "systemd", "launchd"))
    for action in ("install", "uninstall", "status"):
        assert conch_cli("service", action, "--help").returncode == 0
    assert "--register" in conch_cli("service", "install", "--help").stdout
    r = conch_cli("service")
    assert r.returncode == 2 and "ACTION" in r.stderr
    assert "service" in conch_cli("--help").stdout


def test_install_passes_the_given_settings_to_serve():
    from conch.cli.main import build_parser, config_from_args
    from conch.cli.service import serve_argv

    args = build_parser().parse_args(
        ["service", "install", "--port", "7799", "--data-dir", "d x", "--profile", "conch"]
    )
    cfg = config_from_args(args)
    assert serve_argv(args, cfg)[1:] == [
        "-m", "conch", "serve", "--http", "--host", "127.0.0.1", "--port", "7799",
        "--data-dir", "d x", "--profiles", "conch",
    ]  # fmt: skip
    assert serve_argv(args, cfg)[0] == sys.executable


def test_install_refuses_secrets_port_zero_and_bad_gateways(tmp_path: Path):
    r = conch_cli("service", "install", "--auth-token", "s3cret", home=tmp_path)
    assert r.returncode == 1 and "--env-file" in r.stderr and "s3cret" not in r.stderr
    r = conch_cli("service", "install", "--port", "0", home=tmp_path)
    assert r.returncode == 1 and "fixed port" in r.stderr
    r = conch_cli("service", "install", "--register", "https://127.0.0.1:9", home=tmp_path)
    assert r.returncode == 2 and "invalid setting: register:" in r.stderr
    assert not (tmp_path / ".config").exists()


def _user_systemd_reachable() -> bool:
    import shutil

    if shutil.which("systemctl") is None:
        return False
    r = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, timeout=10)
    return r.returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="systemd path")
def test_install_without_a_user_systemd_fails_clearly(tmp_path: Path):
    if _user_systemd_reachable():
        pytest.skip("a systemd user instance is running here: not installing into it")
    r = conch_cli("service", "install", "--port", str(free_port()), home=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("conch service install: ")
    assert "no systemd user instance is reachable" in r.stderr or "systemctl not found" in r.stderr
    assert "conch serve --http" in r.stderr
    assert r.stdout == ""
    assert not (tmp_path / ".config" / "systemd" / "user" / "conch.service").exists()
    # uninstall of nothing succeeds; status says not installed, not healthy
    r = conch_cli("service", "uninstall", home=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["removed"] is False
    r = conch_cli("service", "status", "--port", str(free_port()), home=tmp_path)
    assert r.returncode == 1
    status = json.loads(r.stdout)
    assert status["installed"] is False and status["health"] is None and status["health_error"]


@pytest.mark.skipif(sys.platform != "linux", reason="systemd path")
def test_status_reads_the_installed_url_and_checks_health(tmp_path: Path, http_server):
    from conch.cli.service import render_unit

    unit = tmp_path / ".config" / "systemd" / "user" / "conch.service"
    unit.parent.mkdir(parents=True)
    argv = [sys.executable, "-m", "conch", "serve", "--http", "--port", str(http_server.port)]
    unit.write_text(render_unit(argv, str(tmp_path), "/usr/bin", http_server.url))
    r = conch_cli("service", "status", home=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(r.stdout)
    assert status["installed"] is True and status["url"] == http_server.url
    assert status["health"]["status"] == "ok" and status["health"]["service"] == "conch"
    assert "unit" in status
    if not _user_systemd_reachable():
        r = conch_cli("service", "uninstall", home=tmp_path)
        assert r.returncode == 0 and json.loads(r.stdout)["removed"] is True
        assert not unit.exists()


def test_wait_healthy(http_server):
    from conch.cli.service import ServiceError, wait_healthy

    assert wait_healthy(http_server.url, "", timeout=5)["service"] == "conch"
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=r"did not become healthy in 0\.5 s"):
        wait_healthy(f"http://127.0.0.1:{free_port()}", "", timeout=0.5)
    assert time.monotonic() - t0 < 3
