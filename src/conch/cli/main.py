"""The ``conch`` command.

``conch serve`` imports the MCP SDK; everything else stays on the standard library and Conch's
light modules so that ``conch --help``, ``conch tools`` and ``conch invoke`` start fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from conch._version import __version__
from conch.cli import install as install_cmd
from conch.config import Config, local_url, parse_setting
from conch.errors import ConfigError
from conch.http import IS_ERROR_HEADER

DEFAULT_URL = "http://127.0.0.1:7785"
MAX_PARAMS_BYTES = 4 * 1024 * 1024


# -- settings as flags ----------------------------------------------------------------------------


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _describe_default(f: dataclasses.Field[Any]) -> str:
    factory: Any = f.default_factory
    default = f.default if f.default is not dataclasses.MISSING else factory()
    if f.metadata.get("secret"):
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, list):
        return ",".join(default)
    if default == "":
        return '""'
    return str(default)


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--kebab-case`` flag per Config setting, parsed (and checked) at startup."""
    group = parser.add_argument_group(
        "settings",
        "every setting also reads CONCH_<NAME> from the environment or --env-file; "
        "flags win over the environment, which wins over the env file",
    )
    for f in Config.settings():
        flags = [_flag(f.name)]
        if f.name == "profiles":
            flags.append("--profile")
        meta = f.metadata
        extra = f" (one of: {', '.join(meta['choices'])})" if meta.get("choices") else ""
        # a bare boolean flag (`--dashboard-control`) means true
        bare: dict[str, Any] = (
            {"nargs": "?", "const": "true"} if isinstance(f.default, bool) else {}
        )
        group.add_argument(
            *flags,
            dest=f"setting_{f.name}",
            metavar=f.name.upper(),
            default=None,
            **bare,
            help=f"{meta.get('help', '')}{extra} [default: {_describe_default(f)}]",
        )


def _takes_settings(parser: argparse.ArgumentParser, func: Callable[..., int]) -> None:
    """A command that reads the settings: --env-file and one flag per setting."""
    parser.add_argument("--env-file", metavar="FILE", help="read CONCH_* settings from FILE")
    add_setting_flags(parser)
    parser.set_defaults(func=func)


def config_from_args(args: argparse.Namespace) -> Config:
    flags: dict[str, Any] = {}
    for f in Config.settings():
        text = getattr(args, f"setting_{f.name}", None)
        if text is not None:
            flags[f.name] = parse_setting(f.name, text)
            if f.metadata.get("secret"):
                print(
                    f"conch: warning: {_flag(f.name)} on the command line can be read by every "
                    f"local user (/proc/{os.getpid()}/cmdline, ps): set CONCH_{f.name.upper()} "
                    "in the environment or in an --env-file only the server's user can read",
                    file=sys.stderr,
                )
    return Config.from_sources(flags, os.environ, getattr(args, "env_file", None))


# -- commands --------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    cfg = config_from_args(args)
    cfg.resolved_data_dir  # noqa: B018  (fail early on a bad path)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="conch: %(levelname)s %(name)s: %(message)s",
    )
    if args.http:
        from conch.http.serve import run_http

        return run_http(cfg)
    from conch.mcp.stdio import run_stdio

    if cfg.secret_prompt == "elicit":
        from conch.http.secret_page import LoopbackSecretPages

        return run_stdio(cfg, secret_pages=LoopbackSecretPages())

    return run_stdio(cfg)


def _default_url() -> str:
    return local_url(
        os.environ.get("CONCH_HOST", ""), os.environ.get("CONCH_PORT", "").strip() or "7785"
    )


def cmd_invoke(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    raw = args.params
    if raw == "-":
        raw = sys.stdin.buffer.read(MAX_PARAMS_BYTES + 1).decode("utf-8", "replace")
        if len(raw.encode()) > MAX_PARAMS_BYTES:
            print("conch invoke: params on stdin exceed 4 MiB", file=sys.stderr)
            return 2
    try:
        params = json.loads(raw) if raw is not None and raw.strip() else {}
    except json.JSONDecodeError as e:
        print(f"conch invoke: params are not valid JSON: {e}", file=sys.stderr)
        return 2
    if not isinstance(params, dict):
        print("conch invoke: params must be a JSON object", file=sys.stderr)
        return 2
    url = (args.url or _default_url()).rstrip("/") + "/invoke"
    body = json.dumps({"method": args.method, "params": params}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    token = os.environ.get("CONCH_AUTH_TOKEN", "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=args.timeout) as resp:
            payload = resp.read()
            is_error = resp.headers.get(IS_ERROR_HEADER, "").lower() == "true"
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace").strip()[:500]
        print(f"conch invoke: {url} answered HTTP {e.code}: {detail}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        print(
            f"conch invoke: cannot reach the Conch service at {url} ({reason}); "
            "start it with `conch serve --http`",
            file=sys.stderr,
        )
        return 1
    try:
        result = json.loads(payload)
    except json.JSONDecodeError:
        print("conch invoke: the service answered with invalid JSON", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    if not is_error and isinstance(result, dict) and "error" in result and len(result) == 1:
        is_error = True
    return 1 if is_error else 0


def cmd_cast(args: argparse.Namespace) -> int:
    """``conch cast JOB_ID``: a terminal job's asciicast v2 recording, from the running HTTP
    service's dashboard route (the bearer token from CONCH_AUTH_TOKEN), to stdout."""
    import urllib.error
    import urllib.parse
    import urllib.request

    base = (args.url or _default_url()).rstrip("/")
    url = f"{base}/api/jobs/{urllib.parse.quote(args.job_id, safe='')}/cast"
    headers = {"Accept": "application/x-asciicast"}
    token = os.environ.get("CONCH_AUTH_TOKEN", "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
            while chunk := r.read(1 << 16):
                sys.stdout.buffer.write(chunk)
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace").strip()[:500]
        print(f"conch cast: {url} answered HTTP {e.code}: {detail}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        print(f"conch cast: cannot reach the Conch service at {base} ({reason})", file=sys.stderr)
        return 1
    sys.stdout.flush()
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.manifest:
        from conch.http.manifest import manifest

        out: Any = manifest(cfg)
    else:
        from conch.tools.registry import catalogue

        out = [t.describe(cfg) for t in catalogue(cfg.profiles)]
    json.dump(out, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import asyncio

    from conch.runtime import Runtime

    cfg = config_from_args(args)

    async def info() -> dict[str, Any]:
        async with Runtime(cfg) as rt:
            return dict(await rt.info())

    json.dump(asyncio.run(info()), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    from conch.cli import service

    if not args.action:
        args.service_parser.print_help(sys.stderr)
        return 2
    cfg = config_from_args(args) if args.action == "install" else None
    return service.run(args, cfg)


# -- parser ----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conch",
        description="Conch: a shell for AI agents (MCP server, HTTP service and CLI).",
        epilog="Run `conch COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"conch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default, or --http)",
        description="Run the MCP server over stdio (default), or with --http the HTTP service: "
        "Streamable HTTP MCP at /mcp, legacy SSE at /sse, POST /invoke, GET /health, "
        "GET /manifest and the dashboard at /.",
    )
    serve.add_argument("--http", action="store_true", help="serve HTTP instead of stdio")
    _takes_settings(serve, cmd_serve)

    invoke = sub.add_parser(
        "invoke",
        help="call a tool on the running HTTP service",
        description="Call METHOD (any tool name) on the running `conch serve --http` service and "
        "print its structured result as JSON. Exit status 1 when the result is an "
        "error. Jobs persist across invocations: the service keeps them.",
    )
    invoke.add_argument("method", metavar="METHOD", help="tool name, e.g. exec, read, list")
    invoke.add_argument(
        "params",
        metavar="JSON",
        nargs="?",
        help="arguments as a JSON object, or - to read them from stdin",
    )
    invoke.add_argument(
        "--url",
        help=f"service URL (default from CONCH_HOST/CONCH_PORT, "
        f"i.e. {DEFAULT_URL}); token from CONCH_AUTH_TOKEN",
    )
    invoke.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the answer (default 300)"
    )
    invoke.set_defaults(func=cmd_invoke)

    cast = sub.add_parser(
        "cast",
        help="print a terminal job's or shell session's recording (asciicast v2)",
        description="Print the asciicast v2 recording of JOB_ID (a pty job or shell command), "
        "or of a shell's whole session (its retained commands in turn: give its s_… id), "
        "from the running `conch serve --http` service: `conch cast j_… > x.cast`, then "
        "`asciinema play x.cast`. Output only, with its timing; no input is recorded.",
    )
    cast.add_argument("job_id", metavar="JOB_ID", help="job id or name, or a shell id")
    cast.add_argument("--url", help="service URL (as for invoke); token from CONCH_AUTH_TOKEN")
    cast.set_defaults(func=cmd_cast)

    tools = sub.add_parser(
        "tools",
        help="print the tool catalogue with schemas (JSON)",
        description="Print every tool of the active profiles with its "
        "schemas and annotations, as JSON.",
    )
    tools.add_argument(
        "--manifest", action="store_true", help="print the HTTP service manifest instead"
    )
    _takes_settings(tools, cmd_tools)

    info = sub.add_parser(
        "info",
        help="print runtime information (JSON)",
        description="Start a runtime in this process and print what `info` "
        "reports: version, shells, ripgrep, containment, limits.",
    )
    _takes_settings(info, cmd_info)

    service = sub.add_parser(
        "service",
        help="install, remove or inspect Conch as a user service (systemd or launchd)",
        description="Run `conch serve --http` as a per-user service that restarts on failure: "
        "a systemd user unit (~/.config/systemd/user/conch.service) on Linux, a launchd agent "
        "(~/Library/LaunchAgents/dev.conch.service.plist) on macOS. Output is JSON.",
    )
    service.set_defaults(func=cmd_service, action=None, service_parser=service)
    actions = service.add_subparsers(dest="action", metavar="ACTION")
    install = actions.add_parser(
        "install",
        help="install, enable and start the service; succeeds once /health answers",
        description="Write the unit (or plist) running this Python's `conch serve --http` "
        "with the flags given here (--host and --port always spelled out) in the current "
        "directory, enable and (re)start it, and report success only after GET /health "
        "answers within 10 s. Secrets (--auth-token, ...) are refused on the command line: "
        "put them in an --env-file.",
    )
    install.add_argument(
        "--env-file", metavar="FILE", help="CONCH_* settings file the service reads"
    )
    add_setting_flags(install)
    actions.add_parser(
        "uninstall",
        help="stop, disable and remove the service",
        description="Stop and disable the service and remove its unit (or plist).",
    )
    status = actions.add_parser(
        "status",
        help="print the unit state and the service's /health (exit 1 when not healthy)",
        description="Print the unit (or agent) state and the JSON of GET /health; exit status "
        "1 when the service does not answer. The URL comes from the installed unit unless "
        "--host/--port are given; the token from CONCH_AUTH_TOKEN.",
    )
    status.add_argument("--host", help="service host (default: as installed)")
    status.add_argument("--port", type=int, help="service port (default: as installed)")

    add_setting_flags(install_cmd.add_parser(sub))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except ConfigError as e:
        print(f"conch: invalid setting: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `conch tools | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
