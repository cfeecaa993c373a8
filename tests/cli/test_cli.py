"""The `conch` command: help, settings as flags, tools/info, and `conch invoke` against a
running HTTP service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from frontend_servers import HttpServer, free_port

from conch.config import Config


def conch(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("CONCH_")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "conch", *args],
        capture_output=True,
        text=True,
        env=full,
        input=stdin,
        timeout=timeout,
    )


def test_help_and_version():
    r = conch("--help")
    assert r.returncode == 0 and "serve" in r.stdout and "invoke" in r.stdout
    for sub in ("serve", "invoke", "tools", "info"):
        assert conch(sub, "--help").returncode == 0
    v = conch("--version")
    assert v.returncode == 0 and v.stdout.startswith("conch ")


def test_serve_help_lists_every_setting_with_its_default():
    out = " ".join(conch("serve", "--help").stdout.split())
    for f in Config.settings():
        assert "--" + f.name.replace("_", "-") in out, f.name
    assert "[default: 32]" in out  # max_running
    assert "[default: 127.0.0.1]" in out
    assert "--http" in out and "--env-file" in out and "--profile" in out


def test_fast_commands_do_not_import_the_sdk():
    for args in (["--help"], ["tools"], ["invoke", "--help"]):
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "conch", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        modules = {line.split("|")[-1].strip() for line in r.stderr.splitlines()}
        assert not {m for m in modules if m.split(".")[0] in ("mcp", "pydantic", "starlette")}, args


def test_invalid_settings_fail_at_startup_naming_the_setting(tmp_path: Path):
    r = conch("serve", "--max-running", "lots")
    assert r.returncode == 2 and "max_running" in r.stderr
    r = conch("serve", env={"CONCH_KILL_GRACE_MS": "-1"})
    assert r.returncode == 2 and "kill_grace_ms" in r.stderr
    r = conch("serve", "--text-format", "yaml")
    assert r.returncode == 2 and "text_format" in r.stderr
    r = conch("serve", "--profile", "nope")
    assert r.returncode == 2 and "profiles" in r.stderr


def test_flags_beat_environment_beat_env_file(tmp_path: Path):
    envfile = tmp_path / "conch.env"
    envfile.write_text("CONCH_MAX_RUNNING=4\nCONCH_MAX_SHELLS=3\n")
    base = ["info", "--data-dir", str(tmp_path / "d"), "--env-file", str(envfile)]
    info = json.loads(conch(*base).stdout)
    assert info["limits"]["max_running"] == 4 and info["limits"]["max_shells"] == 3
    info = json.loads(conch(*base, env={"CONCH_MAX_RUNNING": "5"}).stdout)
    assert info["limits"]["max_running"] == 5 and info["limits"]["max_shells"] == 3
    info = json.loads(conch(*base, "--max-running", "6", env={"CONCH_MAX_RUNNING": "5"}).stdout)
    assert info["limits"]["max_running"] == 6


def test_tools_prints_the_catalogue_and_the_manifest():
    tools = json.loads(conch("tools").stdout)
    assert {t["name"] for t in tools} >= {"exec", "read", "write", "signal", "list", "changes"}
    assert all("inputSchema" in t and "outputSchema" in t for t in tools)
    manifest = json.loads(conch("tools", "--manifest").stdout)
    assert manifest["execution"] == "http"
    assert [m["name"] for m in manifest["methods"]] == [t["name"] for t in tools]


def test_invoke_prints_results_and_jobs_persist_between_calls(http_server: HttpServer):
    url = ["--url", http_server.url]
    r = conch("invoke", "exec", '{"command": "sleep 0.2; echo persisted", "yield_ms": 0}', *url)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    assert job["state"] == "running"
    r = conch(
        "invoke",
        "read",
        "-",
        *url,
        stdin=json.dumps({"job_id": job["job_id"], "wait_ms": 5000, "until": "exit"}),
    )
    assert r.returncode == 0
    assert json.loads(r.stdout)["output"] == "persisted\n"
    r = conch("invoke", "exec", '{"command": "exit 3"}', *url)
    assert r.returncode == 0 and json.loads(r.stdout)["exit_code"] == 3  # ran: not an error


def test_invoke_exits_1_on_error_results(http_server: HttpServer):
    r = conch("invoke", "read", '{"job_id": "j_missing"}', "--url", http_server.url)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "not_found"
    r = conch("invoke", "nope", "--url", http_server.url)
    assert r.returncode == 1


def test_invoke_defaults_to_conch_host_and_port(http_server: HttpServer):
    r = conch("invoke", "list", env={"CONCH_PORT": str(http_server.port)})
    assert r.returncode == 0 and json.loads(r.stdout) == {"jobs": [], "shells": []}


def test_invoke_reports_bad_params_and_unreachable_service():
    r = conch("invoke", "exec", "{oops", "--url", "http://127.0.0.1:9")
    assert r.returncode == 2 and "JSON" in r.stderr
    r = conch("invoke", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 1 and "conch serve --http" in r.stderr


def test_dashboard_control_is_one_setting_three_ways_and_a_bare_flag_means_true():
    from conch.cli.main import build_parser, config_from_args

    def parsed(*argv: str, environ: dict[str, str] | None = None) -> bool:
        args = build_parser().parse_args(["serve", *argv])
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("CONCH_")}
        os.environ.update(environ or {})
        try:
            return config_from_args(args).dashboard_control
        finally:
            for k in environ or {}:
                os.environ.pop(k, None)
            os.environ.update(saved)

    assert parsed() is False
    assert parsed("--dashboard-control") is True
    assert parsed("--dashboard-control", "false") is False
    assert parsed(environ={"CONCH_DASHBOARD_CONTROL": "1"}) is True
    assert parsed("--dashboard-control", "no", environ={"CONCH_DASHBOARD_CONTROL": "1"}) is False
    assert Config(dashboard_control=True).dashboard_control is True
    assert "--dashboard-control" in conch("serve", "--help").stdout


def test_a_secret_given_as_a_flag_is_warned_about_and_never_echoed(tmp_path):
    """Issue 18.9: a token on the command line is readable in /proc/<pid>/cmdline."""
    import subprocess
    import sys

    token = "tok-flag-Zr8w-secret"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "conch",
            "info",
            "--auth-token",
            token,
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--auth-token on the command line can be read by every local user" in r.stderr
    assert "CONCH_AUTH_TOKEN" in r.stderr and token not in r.stderr + r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "conch", "info", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CONCH_AUTH_TOKEN": token},
    )
    assert "warning" not in r.stderr
