"""``conch service install|uninstall|status``: Conch's HTTP service as a per-user service.

Linux: a systemd *user* unit ``conch.service`` in ``$XDG_CONFIG_HOME/systemd/user`` (default
``~/.config/systemd/user``), ``Restart=on-failure``. macOS: a launchd agent
``~/Library/LaunchAgents/dev.conch.service.plist``, kept alive after a failed exit.

The service runs this interpreter (``sys.executable -m conch serve --http ...``) in the directory
install was run from, with the flags given to install, ``--host``/``--port`` always spelled out,
and this shell's ``PATH``. Install reports success only once ``GET /health`` answers (and, on
Linux, the unit is active). The quoting of unit and plist text lives in pure functions below.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conch.config import Config, local_url, read_env_file

UNIT_NAME = "conch.service"
LAUNCHD_LABEL = "dev.conch.service"
HEALTH_WAIT_S = 10.0
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
URL_MARK = "conch-url:"


class ServiceError(Exception):
    """A service action failed; the message says what to do."""


# -- quoting (pure) --------------------------------------------------------------------------------


def _systemd_escape(text: str, *, dollar: bool) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "%":
            out.append("%%")  # specifier expansion
        elif ch == "$" and dollar:
            out.append("$$")  # environment variable substitution in ExecStart
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def systemd_exec_arg(arg: str) -> str:
    """One ExecStart= argument: double-quoted, C-escaped, ``%`` -> ``%%``, ``$`` -> ``$$``."""
    if "\x00" in arg:
        raise ServiceError("a service argument cannot contain a NUL character")
    return _systemd_escape(arg, dollar=True)


def _plain_executable(path: str) -> bool:
    # systemd refuses quotes, backslashes and control characters in the executable's path, and
    # expands ``$`` in argv[0] but not in the path it executes: such a path goes through env
    return not any(ch in "\"'\\$" or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path)


def systemd_exec_line(argv: list[str], env: str = "/usr/bin/env") -> str:
    """An ExecStart= command line for argv. An executable whose path systemd cannot take as
    is (quotes, backslashes, ``$``) runs through ``env``, which receives it as an argument."""
    if not argv or not os.path.isabs(argv[0]):
        raise ServiceError("the service's executable must be an absolute path")
    if not _plain_executable(argv[0]):
        argv = [env, *argv]
    return " ".join(systemd_exec_arg(a) for a in argv)


def systemd_environment(name: str, value: str) -> str:
    """An Environment= value: quoted and C-escaped, ``%`` doubled; ``$`` is literal there."""
    if "\x00" in value or "=" in name or not name:
        raise ServiceError(f"cannot put {name!r} into the unit's environment")
    return _systemd_escape(f"{name}={value}", dollar=False)


def systemd_path(path: str) -> str:
    """A WorkingDirectory= value: taken literally (no quotes, no ``$``), only ``%`` doubled."""
    if not os.path.isabs(path):
        raise ServiceError(f"the service directory must be absolute: {path!r}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path) or path != path.strip():
        raise ServiceError(
            f"systemd cannot use a working directory with control characters or "
            f"surrounding spaces: {path!r}; run install from another directory"
        )
    if path.endswith("\\"):
        raise ServiceError(f"systemd cannot use a working directory ending in '\\': {path!r}")
    return path.replace("%", "%%")


def render_unit(argv: list[str], cwd: str, search_path: str, url: str) -> str:
    return (
        "[Unit]\n"
        "Description=Conch: a shell for AI agents (HTTP service)\n"
        "After=network.target\n"
        f"# {URL_MARK} {url}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={systemd_exec_line(argv)}\n"
        f"WorkingDirectory={systemd_path(cwd)}\n"
        f"Environment={systemd_environment('PATH', search_path)}\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """Text for a plist ``<string>``: ``& < > " '`` as entities; XML-illegal characters refused."""
    if _XML_INVALID.search(text):
        raise ServiceError(f"a launchd plist cannot hold control characters: {text!r}")
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def render_plist(argv: list[str], cwd: str, search_path: str, log_dir: str, url: str) -> str:
    args = "".join(f"\n    <string>{xml_text(a)}</string>" for a in argv)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
        '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
        f"<!-- {URL_MARK} {xml_text(url).replace('--', '-&#45;')} -->\n"
        '<plist version="1.0">\n<dict>\n'
        f"  <key>Label</key><string>{LAUNCHD_LABEL}</string>\n"
        f"  <key>ProgramArguments</key>\n  <array>{args}\n  </array>\n"
        f"  <key>WorkingDirectory</key><string>{xml_text(cwd)}</string>\n"
        "  <key>RunAtLoad</key><true/>\n"
        "  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>\n"
        "  <key>ThrottleInterval</key><integer>5</integer>\n"
        "  <key>StandardOutPath</key>"
        f"<string>{xml_text(os.path.join(log_dir, 'stdout.log'))}</string>\n"
        "  <key>StandardErrorPath</key>"
        f"<string>{xml_text(os.path.join(log_dir, 'stderr.log'))}</string>\n"
        "  <key>EnvironmentVariables</key>\n"
        f"  <dict><key>PATH</key><string>{xml_text(search_path)}</string></dict>\n"
        "</dict>\n</plist>\n"
    )


# -- locations -------------------------------------------------------------------------------------


def unit_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def plist_path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def service_file() -> Path:
    return plist_path() if sys.platform == "darwin" else unit_path()


def installed_url() -> str | None:
    """The service URL recorded in the installed unit or plist, if any."""
    try:
        text = service_file().read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(re.escape(URL_MARK) + r"\s*(\S+)", text)
    return m.group(1).replace("&amp;", "&") if m else None


def _check_platform() -> None:
    if sys.platform not in ("linux", "darwin"):
        raise ServiceError(
            f"conch service supports Linux (systemd) and macOS (launchd), not {sys.platform}"
        )


# -- systemctl / launchctl -------------------------------------------------------------------------


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise ServiceError(f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise ServiceError(f"`{' '.join(argv)}` did not answer within {timeout:g} s") from None


def _detail(r: subprocess.CompletedProcess[str]) -> str:
    return (r.stderr.strip() or r.stdout.strip() or f"exit status {r.returncode}")[:500]


def _systemctl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = _run(["systemctl", "--user", *args])
    if check and r.returncode != 0:
        raise ServiceError(f"`systemctl --user {' '.join(args)}` failed: {_detail(r)}")
    return r


def require_user_systemd() -> None:
    """Fail clearly when no systemd user instance can be reached."""
    if shutil.which("systemctl") is None:
        raise ServiceError(
            "systemctl not found: conch service install needs systemd (a user instance); "
            "run `conch serve --http` under your own supervisor instead"
        )
    r = _run(["systemctl", "--user", "show-environment"], timeout=10)
    if r.returncode != 0:
        raise ServiceError(
            f"no systemd user instance is reachable (`systemctl --user`: {_detail(r)}). "
            "Install from a login session that runs `systemd --user` (for a session-less "
            "account: `loginctl enable-linger $USER`), or run `conch serve --http` under "
            "your own supervisor"
        )


def _launchctl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = _run(["launchctl", *args])
    if check and r.returncode != 0:
        raise ServiceError(f"`launchctl {' '.join(args)}` failed: {_detail(r)}")
    return r


def _launchd_target() -> str:
    return f"gui/{os.getuid()}/{LAUNCHD_LABEL}"


# -- health ----------------------------------------------------------------------------------------


def fetch_health(url: str, token: str = "", timeout: float = 2.0) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url + "/health", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise ServiceError(f"{url}/health answered HTTP {e.code}") from None
    except (OSError, ValueError) as e:
        raise ServiceError(f"{url}/health: {getattr(e, 'reason', e)}") from None
    if not isinstance(body, dict) or body.get("service") != "conch":
        raise ServiceError(f"{url}/health is not a Conch service's health")
    return body


def wait_healthy(url: str, token: str, timeout: float = HEALTH_WAIT_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fetch_health(url, token, timeout=1.0)
        except ServiceError as e:
            if time.monotonic() >= deadline:
                raise ServiceError(
                    f"the service did not become healthy in {timeout:g} s ({e})"
                ) from None
        time.sleep(0.2)


# -- actions ---------------------------------------------------------------------------------------


def serve_argv(args: argparse.Namespace, cfg: Config) -> list[str]:
    """``python -m conch serve --http`` with --host/--port and the settings given on the
    command line (secrets refused: they belong in an --env-file, not in a unit file)."""
    argv = [sys.executable, "-m", "conch", "serve", "--http"]
    argv += ["--host", cfg.host, "--port", str(cfg.port)]
    for f in Config.settings():
        text = getattr(args, f"setting_{f.name}", None)
        if text is None or f.name in ("host", "port"):
            continue
        if f.metadata.get("secret"):
            raise ServiceError(
                f"{f.name}: a secret does not belong on the service's command line; put "
                f"CONCH_{f.name.upper()}=... into a file (mode 0600) and pass --env-file FILE"
            )
        argv += ["--" + f.name.replace("_", "-"), text]
    if getattr(args, "env_file", None):
        argv += ["--env-file", os.path.abspath(args.env_file)]
    return argv


def _who_may_connect(args: argparse.Namespace, cfg: Config) -> str:
    """Who the installed service lets in: it gets a token from its --env-file only."""
    from conch.http.peers import who_may_connect

    env_file = getattr(args, "env_file", None)
    token = bool(env_file and read_env_file(env_file).get("CONCH_AUTH_TOKEN", "").strip())
    return who_may_connect(cfg.host, token)


def install(args: argparse.Namespace, cfg: Config) -> dict[str, Any]:
    _check_platform()
    if cfg.port == 0:
        raise ServiceError("port: the service needs a fixed port, not 0")
    if cfg.register:
        from conch.http.register import gateway_url

        gateway_url(cfg.register)  # ConfigError now rather than a crash-looping service
    argv = serve_argv(args, cfg)
    given = {f"CONCH_{f.name.upper()}" for f in Config.settings()}
    for name in sorted(given & set(os.environ)):
        if name not in ("CONCH_HOST", "CONCH_PORT"):
            print(
                f"conch service install: note: {name} from this shell is not passed to the "
                "service; give it as a flag or in an --env-file",
                file=sys.stderr,
            )
    print(f"conch service install: once running, {_who_may_connect(args, cfg)}", file=sys.stderr)
    cwd = os.getcwd()
    search_path = os.environ.get("PATH") or DEFAULT_PATH
    url = local_url(cfg.host, cfg.port)
    if sys.platform == "darwin":
        path = plist_path()
        log_dir = os.path.join(os.path.expanduser("~"), "Library", "Logs", "conch")
        text = render_plist(argv, cwd, search_path, log_dir, url)
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        _launchctl("bootout", _launchd_target(), check=False)
        path.write_text(text, encoding="utf-8")
        _launchctl("enable", _launchd_target())
        _launchctl("bootstrap", f"gui/{os.getuid()}", str(path))
        logs = f"see {log_dir}"
    else:
        require_user_systemd()
        path = unit_path()
        text = render_unit(argv, cwd, search_path, url)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        _systemctl("daemon-reload")
        _systemctl("enable", UNIT_NAME)
        _systemctl("restart", UNIT_NAME)  # a re-install runs with the new flags
        logs = f"see `journalctl --user -u {UNIT_NAME}`"
    try:
        health = wait_healthy(url, cfg.auth_token)
        if sys.platform != "darwin":
            state = _systemctl("is-active", UNIT_NAME, check=False).stdout.strip()
            if state != "active":
                raise ServiceError(
                    f"{url} answers but {UNIT_NAME} is {state or 'not active'} "
                    "(is another Conch already using the port?)"
                )
    except ServiceError as e:
        raise ServiceError(f"installed {path}, but {e}; {logs}") from None
    return {
        "installed": True,
        "platform": sys.platform,
        "file": str(path),
        "url": url,
        "health": health,
    }


def uninstall() -> dict[str, Any]:
    _check_platform()
    path = service_file()
    existed = path.exists()
    notes: list[str] = []
    if sys.platform == "darwin":
        _launchctl("bootout", _launchd_target(), check=False)
        path.unlink(missing_ok=True)
    else:
        if shutil.which("systemctl") is not None:
            r = _systemctl("disable", "--now", UNIT_NAME, check=False)
            if r.returncode != 0 and existed:
                notes.append(f"systemctl --user disable --now: {_detail(r)}")
        path.unlink(missing_ok=True)
        if existed and shutil.which("systemctl") is not None:
            r = _systemctl("daemon-reload", check=False)
            if r.returncode != 0:
                notes.append(f"systemctl --user daemon-reload: {_detail(r)}")
    out: dict[str, Any] = {"uninstalled": True, "file": str(path), "removed": existed}
    if notes:
        out["notes"] = notes
    return out


def unit_state() -> dict[str, Any]:
    if sys.platform == "darwin":
        r = _launchctl("print", _launchd_target(), check=False)
        if r.returncode != 0:
            return {"loaded": False}
        state = re.search(r"^\s*state = (.+)$", r.stdout, re.M)
        pid = re.search(r"^\s*pid = (\d+)$", r.stdout, re.M)
        return {
            "loaded": True,
            "state": state.group(1) if state else None,
            "pid": int(pid.group(1)) if pid else None,
        }
    if shutil.which("systemctl") is None:
        return {"error": "systemctl not found"}
    props = "LoadState,ActiveState,SubState,UnitFileState,MainPID,Result"
    r = _systemctl("show", UNIT_NAME, "--property", props, check=False)
    if r.returncode != 0:
        return {"error": _detail(r)}
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def status(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    _check_platform()
    path = service_file()
    if args.port is not None or args.host is not None:
        host = args.host or os.environ.get("CONCH_HOST", "").strip() or "127.0.0.1"
        url = local_url(host, args.port if args.port is not None else 7785)
    else:
        url = installed_url() or local_url(
            os.environ.get("CONCH_HOST", "").strip(),
            int(os.environ.get("CONCH_PORT", "").strip() or 7785),
        )
    out: dict[str, Any] = {
        "platform": sys.platform,
        "file": str(path),
        "installed": path.exists(),
        "unit": unit_state(),
        "url": url,
    }
    try:
        out["health"] = fetch_health(url, os.environ.get("CONCH_AUTH_TOKEN", ""))
        healthy = True
    except ServiceError as e:
        out["health"], out["health_error"], healthy = None, str(e), False
    return out, healthy


def run(args: argparse.Namespace, cfg: Config | None) -> int:
    """Dispatch ``conch service ACTION``; JSON on stdout, errors on stderr (exit 1)."""
    try:
        if args.action == "install":
            assert cfg is not None
            out, code = install(args, cfg), 0
        elif args.action == "uninstall":
            out, code = uninstall(), 0
        else:
            out, healthy = status(args)
            code = 0 if healthy else 1
    except ServiceError as e:
        print(f"conch service {args.action}: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    return code
