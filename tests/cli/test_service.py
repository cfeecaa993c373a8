"""`conch service install|uninstall|status` (conch.cli.service): unit/plist text, quoting,
systemd's own verifier, and the error path without a systemd user instance (the gateway
registration such a service may do: tests/http/test_register.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from frontend_servers import free_port

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


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


def test_install_says_who_may_connect_to_the_service(tmp_path: Path):
    """The service gets a token from its --env-file only: without one, only this user may
    connect; with one, whoever presents it."""
    from conch.cli.main import build_parser, config_from_args
    from conch.cli.service import _who_may_connect
    from conch.http.peers import user_name

    args = build_parser().parse_args(["service", "install", "--port", "7799"])
    said = _who_may_connect(args, config_from_args(args))
    assert said.startswith(f"only {user_name(os.geteuid())} may connect"), said
    assert "other local users are refused" in said
    env = tmp_path / "conch.env"
    env.write_text("CONCH_AUTH_TOKEN=tok-service-secret\n")
    args = build_parser().parse_args(["service", "install", "--env-file", str(env)])
    said = _who_may_connect(args, config_from_args(args))
    assert said.startswith("any client that presents the token") and "tok-" not in said


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
    assert r.stderr.startswith("conch service install: once running, only ")
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
